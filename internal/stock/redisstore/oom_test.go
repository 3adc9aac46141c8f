package redisstore_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// A Redis at its maxmemory under noeviction refuses a sale's script with
// OOM at its first write. Nothing was written, so the sale is a definite
// error: it was unconfirmed (503 "ask the receipt") because the OOM reply
// was taken for a bug-or-outage of unknown outcome. Each case makes the
// write itself meet the OOM: the locked sale after its fenced read (from
// the lease's work), the atomic sale from its start.
func TestOutOfMemoryWriteIsDefinite(t *testing.T) {
	for _, tc := range []struct {
		name           string
		atomic, ledger bool
	}{
		{"fenced write", false, false},
		{"fenced write, ledger", false, true},
		{"atomic sell", true, false},
		{"atomic sell, ledger", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := servertest.Redis(t)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
			if tc.ledger {
				keys.Orders = "stock:orders"
			}
			s := redisstore.NewStore(rdb, keys)
			ctx := t.Context()
			if err := s.Reset(ctx, 10); err != nil {
				t.Fatal(err)
			}
			var before []string
			full := func() {
				var err error
				if before, err = rdb.Keys(ctx, "*").Result(); err != nil {
					t.Fatal(err)
				}
				if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
					t.Fatal(err)
				}
			}
			lease := newFakeLease(7)
			if tc.atomic {
				full()
			} else {
				lease.onDone = full // after the fenced read, before the write
			}
			svc := newService(s, one(lease), func(c *stock.ServiceConfig) {
				c.Fencing = true
				if tc.atomic {
					c.Mode = stock.ModeAtomic
				}
			})
			_, err := svc.Reduce(ctx)
			if before == nil {
				t.Fatal("the OOM was never set up")
			}
			if !errors.Is(err, stock.ErrOutOfMemory) || errors.Is(err, stock.ErrUnconfirmed) || errors.Is(err, stock.ErrUnavailable) {
				t.Fatalf("got %v, want ErrOutOfMemory, neither unconfirmed nor unavailable", err)
			}
			if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
				t.Fatal(err)
			}
			storetest.WantStatus(t, s, stock.Status{Stock: 10, Lucky: 0})
			after, err := rdb.Keys(ctx, "*").Result()
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(before)
			slices.Sort(after)
			if !slices.Equal(before, after) {
				t.Fatalf("keys went from %v to %v: the refused script wrote (a receipt, an order)", before, after)
			}
		})
	}
}
