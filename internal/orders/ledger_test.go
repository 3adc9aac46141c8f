package orders

import (
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"seckill/internal/lock/locallock"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// The real producer: stock's sale scripts write the ledger, the consumer
// stores it. Every sold answer has its row, equal to the ledger's order;
// rows == orders == lucky; a reset's new sale is stored under its own id.
func TestStoresTheRealLedger(t *testing.T) {
	e := newEnv(t)
	for _, mode := range []struct {
		name string
		cfg  func(*stock.ServiceConfig)
	}{
		{"atomic", func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }},
		{"locked", func(c *stock.ServiceConfig) { c.Fencing = true }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			ctx := t.Context()
			keys := redisstore.Keys{Stock: mode.name + ":stock", Lucky: mode.name + ":lucky", Fence: mode.name + ":fence",
				Initial: mode.name + ":initial", Orders: mode.name + ":orders"}
			store := redisstore.NewStore(e.rdb, keys)
			if err := store.Reset(ctx, 150); err != nil {
				t.Fatal(err)
			}
			// Every buyer at once, each expected served: a minute's lock
			// wait, not 5 s, which the last of 200 waiters passed on a
			// loaded machine (answered busy, the test failed).
			cfg := stock.ServiceConfig{Store: store, Locker: locallock.New(), Backend: "test",
				LockKey: mode.name + ":lock", Replica: "r1", PerUserLimit: 1, WaitTimeout: time.Minute}
			mode.cfg(&cfg)
			svc := stock.NewService(cfg)
			table := mode.name + "_orders"
			c := e.consumer(t, Config{Stream: keys.Orders, Table: table, UniqueBuyer: true})
			run(t, c)

			// 120 named buyers with a key, 20 anonymous; 30 of the named
			// send their request again (a replay), 30 try a second unit
			// (over the limit).
			var buyers []stock.Buyer
			for i := range 120 {
				buyers = append(buyers, stock.Buyer{User: fmt.Sprintf("u%d", i), Key: fmt.Sprintf("k%d", i)})
			}
			for range 20 {
				buyers = append(buyers, stock.Buyer{})
			}
			for i := range 30 {
				buyers = append(buyers, stock.Buyer{User: fmt.Sprintf("u%d", i), Key: fmt.Sprintf("k%d", i)})
				buyers = append(buyers, stock.Buyer{User: fmt.Sprintf("u%d", 30+i), Key: fmt.Sprintf("again%d", i)})
			}
			var (
				mu   sync.Mutex
				sold = map[string]bool{} // order ids answered
				wg   sync.WaitGroup
			)
			for _, b := range buyers {
				wg.Go(func() {
					s, err := svc.ReduceFor(ctx, b)
					if err != nil && !errors.Is(err, stock.ErrLimitReached) {
						t.Errorf("ReduceFor(%+v): %v", b, err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						sold[s.OrderID] = true
					}
				})
			}
			wg.Wait()
			if len(sold) != 140 {
				t.Fatalf("%d distinct orders answered, want 140", len(sold))
			}

			e.drained(t, c, table, 140)
			ls, err := store.LedgerStats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			durable, err := c.Durable(ctx, ls.Sale)
			if err != nil || ls.Orders != 140 || ls.Lucky != 140 || durable != 140 {
				t.Errorf("ledger %+v, durable %d (%v): want 140 orders, lucky and rows", ls, durable, err)
			}
			if s := c.Stats(); s.Malformed != 0 || s.Conflicts != 0 || s.Inserted != 140 {
				t.Errorf("stats %+v, want 140 inserted, nothing malformed or conflicting", s)
			}
			for id := range sold {
				o, err := store.Order(ctx, id)
				if err != nil {
					t.Fatalf("Order(%s): %v", id, err)
				}
				got := rowOf(t, e.db, table, id)
				want := o
				want.Time = o.Time.UTC().Truncate(time.Millisecond)
				got.Time = got.Time.UTC()
				if got != want {
					t.Errorf("row %+v, want the ledger's order %+v", got, want)
				}
			}

			// The next sale, under the running consumer.
			if err := store.Reset(ctx, 5); err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if _, err := svc.ReduceFor(ctx, stock.Buyer{User: fmt.Sprintf("u%d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			e.drained(t, c, table, 145)
			next, err := store.LedgerStats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := c.Durable(ctx, next.Sale); err != nil || n != 5 || next.Sale == ls.Sale {
				t.Errorf("after a reset: sale %q (was %q), Durable = %d, %v; want a new sale with 5 rows", next.Sale, ls.Sale, n, err)
			}
		})
	}
}

// rowOf reads an order back from the table as a stock.Order.
func rowOf(t *testing.T, db *sql.DB, table, id string) stock.Order {
	t.Helper()
	var (
		o         stock.Order
		user, key sql.NullString
		unit      sql.NullInt64
	)
	err := db.QueryRowContext(t.Context(), "SELECT id, sale, `user`, idem_key, token, replica, stock_after, unit, sold_at, entry FROM `"+table+"` WHERE id = ?", id).
		Scan(&o.ID, &o.Sale, &user, &key, &o.Token, &o.Replica, &o.StockAfter, &unit, &o.Time, &o.Entry)
	if err != nil {
		t.Fatalf("row %s: %v", id, err)
	}
	o.User, o.Key, o.Unit = user.String, key.String, unit.Int64
	return o
}
