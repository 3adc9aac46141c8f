package stockd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"seckill/internal/metrics"
	"seckill/internal/orders"
	"seckill/internal/stock/redisstore"
)

// orders.go: the stock.ledger, stock.per_user_limit, stock.idempotency_ttl
// and orders.* keys.

// validateLedger checks the ledger's and the durable orders' keys.
func validateLedger(c *Config, bad func(key, format string, args ...any)) {
	if c.Stock.PerUserLimit < 0 {
		bad("stock.per_user_limit", "must not be negative (0 = unlimited), got %d", c.Stock.PerUserLimit)
	} else if c.Stock.PerUserLimit > 0 && !c.Stock.Ledger {
		bad("stock.per_user_limit", "needs stock.ledger: true (the limit counts the buyer's orders)")
	}
	if d := c.Stock.IdempotencyTTL; d < time.Second || d > 720*time.Hour {
		bad("stock.idempotency_ttl", "must be between 1s and 720h0m0s, got %s", d)
	}
	if c.Orders.Group == "" {
		bad("orders.group", "must not be empty")
	}
	if d := c.Orders.ClaimIdle; d < 100*time.Millisecond || d > time.Hour {
		bad("orders.claim_idle", "must be between 100ms and 1h0m0s, got %s", d)
	}
	if d := c.Orders.TrimInterval; d != 0 && (d < 10*time.Millisecond || d > time.Hour) {
		bad("orders.trim_interval", "must be between 10ms and 1h0m0s, or 0 (no trim), got %s", d)
	}
	validateReservations(c, bad)
	if !c.Orders.Durable {
		return
	}
	if !c.Stock.Ledger {
		bad("orders.durable", "needs stock.ledger: true (it stores the ledger's orders)")
	}
	if b, ok := backends[c.Lock.Backend]; ok && b.needs == needsMySQL {
		return // validateMySQL checks mysql.dsn
	}
	switch dsn, err := mysql.ParseDSN(c.MySQL.DSN); {
	case c.MySQL.DSN == "":
		bad("orders.durable", "needs mysql.dsn (the orders' database), e.g. user:password@tcp(host:3306)/seckill")
	case err != nil:
		// The driver's message does not quote the DSN, which holds a password.
		bad("mysql.dsn", "%v", err)
	case dsn.DBName == "":
		bad("mysql.dsn", "names no database (want …/dbname, e.g. user:password@tcp(host:3306)/seckill)")
	}
}

// Timing of the durable orders' connections.
const (
	// ordersConnectTimeout bounds a connection attempt whose mysql.dsn
	// sets none.
	ordersConnectTimeout = 5 * time.Second
	// ordersIOTimeout bounds one read or write on an orders connection
	// whose mysql.dsn sets none.
	ordersIOTimeout = 30 * time.Second
	// ordersLagInterval is how often seckill_orders_lag is sampled.
	ordersLagInterval = time.Second
)

// startOrders runs the durable orders consumers (orders.durable) in this
// replica until stop: each creates its tables once MySQL answers, then
// stores its ledger streams' entries: the default sale's, and when items
// are sold (items' Unsupported is nil) every item's, in the table orders_items;
// it also samples seckill_orders_lag (the default sale's). With
// reservations (ended not nil) it also copies each reservation's end into
// the table orders_ends (orders.StateSyncer) and returns the Ends a
// payment is stored in before its answer. MySQL
// is opened lazily: one that is down or stalled keeps neither stockd from
// starting nor a sale from selling. Its stop is registered with w: it ends
// and waits for every goroutine started here before the clients they use
// close.
func startOrders(ctx context.Context, w *wiring, m *metrics.Metrics, items *redisstore.Items, ended orders.EndSource) (*orders.Consumer, *orders.ItemConsumers, *orders.Ends, error) {
	cfg := w.cfg
	// This pool is the consumer's alone: duplicates are told from inserts
	// by the affected-row count, which clientFoundRows would hide; and a
	// stalled server must fail a batch (to be retried) rather than hold it
	// forever, so unset timeouts get bounds far above a batch's time. One
	// batch's transaction at a time, plus the /ledger and audit counts.
	bound := func(dsn *mysql.Config) {
		dsn.ClientFoundRows = false
		if dsn.Timeout == 0 {
			dsn.Timeout = ordersConnectTimeout
		}
		if dsn.ReadTimeout == 0 {
			dsn.ReadTimeout = ordersIOTimeout
		}
		if dsn.WriteTimeout == 0 {
			dsn.WriteTimeout = ordersIOTimeout
		}
	}
	db, err := openMySQL(w, 4, bound)
	if err != nil {
		return nil, nil, nil, err
	}
	// GET /orders reads trimmed orders from a pool of its own: any buyer
	// can send those, and they must not take the consumer's connections.
	reads, err := openMySQL(w, 2, bound)
	if err != nil {
		return nil, nil, nil, err
	}

	base := orders.Config{
		Redis:       w.stockRedis(),
		Stream:      ordersKey(cfg),
		Group:       cfg.Orders.Group,
		Consumer:    cfg.Replica,
		DB:          db,
		ReadDB:      reads,
		UniqueBuyer: cfg.Stock.PerUserLimit == 1,
		ClaimIdle:   cfg.Orders.ClaimIdle,
		TrimEvery:   cfg.Orders.TrimInterval,
		Logger:      w.log,
	}
	c, err := orders.New(base)
	if err != nil {
		return nil, nil, nil, err
	}
	var ic *orders.ItemConsumers
	if items.Unsupported() == nil {
		itemCfg := base
		itemCfg.Stream, itemCfg.UniqueBuyer, itemCfg.Table = "", false, orders.DefaultItemsTable
		keys := saleKeys(cfg, true)
		ic, err = orders.NewItemConsumers(orders.ItemsConfig{
			Config: itemCfg,
			Items:  items.IDs,
			Stream: func(id string) string { return redisstore.ItemKeys(keys, id).Orders },
		})
		if err != nil {
			return nil, nil, nil, err
		}
	}

	var ends *orders.Ends
	if ended != nil {
		if ends, err = orders.NewEnds(db, "", w.log); err != nil {
			return nil, nil, nil, err
		}
	}

	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.Serve(rctx); err != nil {
			w.log.Error("durable orders stopped", "err", err)
		}
	})
	if ic != nil {
		wg.Go(func() {
			if err := ic.Serve(rctx); err != nil {
				w.log.Error("durable orders of the items stopped", "err", err)
			}
		})
	}
	if ends != nil {
		y := orders.NewStateSyncer(ended, ends, 0)
		wg.Go(func() { _ = y.Run(rctx) })
	}
	wg.Go(func() { m.SampleOrdersLag(rctx, ordersLagInterval, c.Lag) })
	if cfg.Orders.TrimInterval > 0 {
		// Trimming leaves a stored order's only copy in MySQL: say so
		// when MySQL may lose a commit. Off the start path, since a
		// MySQL that is down keeps nothing from starting.
		wg.Go(func() { warnNotDurable(rctx, db, w) })
	}
	// Registered after db.Close, so it runs before: the consumer stops,
	// then its pool closes, then (registered earlier still) Redis.
	w.onClose(func() error {
		cancel()
		wg.Wait()
		return nil
	})
	return c, ic, ends, nil
}

// openMySQL is a pool of at most maxOpen connections to mysql.dsn, as
// adjust leaves its settings, closed with w. It connects on first use: a
// MySQL that is down keeps nothing from starting.
func openMySQL(w *wiring, maxOpen int, adjust func(*mysql.Config)) (*sql.DB, error) {
	dsn, err := mysql.ParseDSN(w.cfg.MySQL.DSN)
	if err != nil {
		return nil, fmt.Errorf("config: mysql.dsn: %w", err) // Validate caught it already
	}
	adjust(dsn)
	conn, err := mysql.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("config: mysql.dsn: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(maxOpen)
	db.SetMaxIdleConns(max(maxOpen/2, 1))
	db.SetConnMaxIdleTime(time.Minute)
	w.onClose(db.Close)
	return db, nil
}

// warnNotDurable logs a warning when MySQL may lose commits it
// acknowledged (orders.CheckDurable); one try, bounded.
func warnNotDurable(ctx context.Context, db *sql.DB, w *wiring) {
	ctx, cancel := context.WithTimeout(ctx, ordersConnectTimeout)
	defer cancel()
	switch err := orders.CheckDurable(ctx, db); {
	case errors.Is(err, orders.ErrNotDurable):
		w.log.Warn("durable orders: MySQL may lose acknowledged commits, and trimmed orders are only there (set innodb_flush_log_at_trx_commit=1, or orders.trim_interval: 0)", "err", err)
	case err != nil:
		w.log.Info("durable orders: could not read MySQL's durability at start", "err", err)
	}
}
