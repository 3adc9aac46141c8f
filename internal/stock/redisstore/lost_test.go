package redisstore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locallock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// A Redis that restarts without its data (no persistence, as the harness
// runs it) has lost the sale. Read as 0 left, it answered the buyers who
// hold a unit "sold out" and let their replayed keys buy again. Every way
// of selling now refuses with ErrStoreLost, writes nothing (the keys stay
// missing: no sale restarts from 0 by itself), and sells again once the
// sale is reset.
func TestRestartedEmptyRedisStopsTheSale(t *testing.T) {
	for _, m := range []struct {
		name     string
		segments int
		ledger   bool
		cfg      func(*stock.ServiceConfig)
	}{
		{"locked", 1, false, func(c *stock.ServiceConfig) { c.Fencing = true }},
		{"atomic", 1, false, func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }},
		{"locked+ledger", 1, true, func(c *stock.ServiceConfig) { c.Fencing = true }},
		{"atomic+ledger", 1, true, func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }},
		{"locked+combine", 1, false, func(c *stock.ServiceConfig) { c.Fencing, c.Combine = true, true }},
		{"locked/segments4", 4, false, func(c *stock.ServiceConfig) { c.Fencing = true }},
		{"atomic+ledger/segments4", 4, true, func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }},
	} {
		t.Run(m.name, func(t *testing.T) {
			srv := servertest.Redis(t)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Segments: m.segments}
			if m.ledger {
				keys = ledgerKeys(m.segments)
			}
			s := redisstore.NewStore(rdb, keys)
			if err := s.Reset(t.Context(), 10); err != nil {
				t.Fatal(err)
			}
			svc := newService(s, locallock.New(), m.cfg)
			buy := func(i int) (stock.Sale, error) {
				if !m.ledger {
					return svc.Reduce(t.Context())
				}
				return svc.ReduceFor(t.Context(), stock.Buyer{User: fmt.Sprintf("u%d", i), Key: fmt.Sprintf("k%d", i)})
			}
			for i := range 3 {
				if _, err := buy(i); err != nil {
					t.Fatalf("sale %d before the restart: %v", i, err)
				}
			}

			if err := srv.Restart(t.Context()); err != nil {
				t.Fatal(err)
			}
			// The buyers who bought (their replays) and new ones alike.
			for i := range 5 {
				sale, err := buy(i)
				if !errors.Is(err, stock.ErrStoreLost) {
					t.Fatalf("sale %d after Redis restarted empty: got %+v, %v; want ErrStoreLost", i, sale, err)
				}
			}
			if n, err := rdb.Exists(t.Context(), "stock", "lucky").Result(); err != nil || n != 0 {
				t.Fatalf("after the refused sales: %d of stock, lucky exist (%v), want none: a refused sale writes nothing", n, err)
			}

			if err := s.Reset(t.Context(), 10); err != nil {
				t.Fatal(err)
			}
			if sale, err := buy(7); err != nil {
				t.Fatalf("sale after the reset: %+v, %v; want sold", sale, err)
			}
			storetest.WantStatus(t, s, stock.Status{Stock: 9, Lucky: 1})
		})
	}
}
