package orders_test

import (
	"context"
	"database/sql"
	"log"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"seckill/internal/orders"
)

// Each replica runs one consumer under its own name; the table is created
// (or adapted to the per-user limit) first. (Not run: it needs Redis and
// MySQL or MariaDB.)
func Example() {
	ctx, cancel := context.WithCancel(context.Background()) // stockd: the replica's lifetime
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	db, err := sql.Open("mysql", "seckill:seckill@tcp(127.0.0.1:3306)/seckill")
	if err != nil {
		log.Fatal(err)
	}
	const limitOne = true // stock.per_user_limit == 1
	if err := orders.EnsureSchema(ctx, db, orders.DefaultTable, limitOne); err != nil {
		log.Fatal(err)
	}
	c, err := orders.New(orders.Config{
		Redis:       rdb,
		Stream:      "seckill:orders",
		Consumer:    "replica-1",
		DB:          db,
		UniqueBuyer: limitOne,
	})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	// After the sale: every order stored once the lag is 0.
	lag, _ := c.Lag(ctx)
	rows, _ := c.Durable(ctx, "the sale id")
	log.Printf("lag %d, %d rows", lag, rows)

	cancel() // at shutdown, before db and rdb close
	<-done
}
