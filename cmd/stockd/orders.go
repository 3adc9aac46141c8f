package main

import (
	"time"

	"github.com/go-sql-driver/mysql"
)

// orders.go: the stock.ledger, stock.per_user_limit, stock.idempotency_ttl
// and orders.* keys (issue #13).

// ordersKey is the ledger's stream. Derived, not configured: it belongs
// with stock.key, as the initial key does; the stock store derives the
// ledger's other keys from it.
func ordersKey(cfg *Config) string {
	if !cfg.Stock.Ledger {
		return ""
	}
	return cfg.Stock.Key + ":orders"
}

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
