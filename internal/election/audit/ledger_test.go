package audit_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/election/audit"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// A real ledger: every sale leaves an order, so orders == lucky and the
// audit is OK; a unit counted in lucky without its order is a violation,
// and the record (in the stream too) carries the ledger's counts.
func TestCheckReconcilesLedgerWithLucky(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	store := redisstore.NewStore(rdb, redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence",
		Initial: "stock:initial", Orders: "stock:orders"})
	if err := store.Reset(ctx, 5); err != nil {
		t.Fatal(err)
	}
	svc := stock.NewService(stock.ServiceConfig{Store: store, Mode: stock.ModeAtomic, Replica: "r-1"})
	for _, user := range []string{"alice", "bob"} {
		if _, err := svc.ReduceFor(ctx, stock.Buyer{User: user}); err != nil {
			t.Fatal(err)
		}
	}
	aud := audit.New(rdb, audit.Config{
		Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Initial: "stock:initial",
		Replica: "r-1", Backend: "etcd", Ledger: store,
	})
	r, err := aud.Run(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || r.Ledger == nil || r.Ledger.Orders != 2 || r.Ledger.Lucky != 2 || r.Ledger.Sale == "" || r.Ledger.Durable != nil {
		t.Fatalf("two sales, two orders: got OK=%v ledger %+v problems %q, want OK with 2 orders and lucky 2", r.OK, r.Ledger, r.Problems)
	}

	// A unit sold with no order (what an unfenced or broken write would
	// leave): stock+lucky are moved together so that only the ledger
	// check can see it.
	if err := rdb.MSet(ctx, "stock", 2, "lucky", 3).Err(); err != nil {
		t.Fatal(err)
	}
	r, err = aud.Run(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "ledger orders = 2, want lucky 3") {
		t.Fatalf("a sale without an order: got OK=%v problems %q, want one naming orders 2 and lucky 3", r.OK, r.Problems)
	}
	recs, err := audit.ReadStream(ctx, rdb, "")
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	if last.OK || last.Ledger == nil || last.Ledger.Orders != 2 || last.Ledger.Lucky != 3 || last.Ledger.Sale != r.Ledger.Sale {
		t.Fatalf("recorded: got OK=%v ledger %+v, want the ledger's counts (orders 2, lucky 3, sale %s)", last.OK, last.Ledger, r.Ledger.Sale)
	}
}

// fakeLedger answers a scripted LedgerStats per call (the last repeats).
type fakeLedger struct {
	stats []stock.LedgerStats
	calls int
}

func (f *fakeLedger) LedgerStats(context.Context) (stock.LedgerStats, error) {
	s := f.stats[min(f.calls, len(f.stats)-1)]
	f.calls++
	return s, nil
}

type fakeDurable struct {
	rows, lag       int64
	rowsErr, lagErr error
	asked           []string
}

func (f *fakeDurable) Durable(_ context.Context, sale string) (int64, error) {
	f.asked = append(f.asked, sale)
	return f.rows, f.rowsErr
}
func (f *fakeDurable) Lag(context.Context) (int64, error) { return f.lag, f.lagErr }

// MySQL's rows are compared with the ledger only when the consumer has no
// lag and no sale happened while they were counted; a difference then is
// a violation, anything else only skips the comparison.
func TestCheckReconcilesDurableOrders(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.MSet(t.Context(), "stock", 7, "lucky", 3, "stock:initial", 10).Err(); err != nil {
		t.Fatal(err)
	}
	quiet := stock.LedgerStats{Sale: "s1", Orders: 3, Buyers: 2, Lucky: 3}
	busy := stock.LedgerStats{Sale: "s1", Orders: 4, Buyers: 2, Lucky: 4}
	cases := []struct {
		name        string
		stats       []stock.LedgerStats
		durable     *fakeDurable
		wantOK      bool
		wantDurable int64 // -1: not compared
		wantLag     int64
		problem     string
	}{
		{"caught up", []stock.LedgerStats{quiet}, &fakeDurable{rows: 3}, true, 3, 0, ""},
		{"row missing", []stock.LedgerStats{quiet}, &fakeDurable{rows: 2}, false, 2, 0, "durable orders = 2, want the ledger's 3 for sale s1"},
		{"extra row", []stock.LedgerStats{quiet}, &fakeDurable{rows: 4}, false, 4, 0, "durable orders = 4"},
		{"lagging", []stock.LedgerStats{quiet}, &fakeDurable{rows: 1, lag: 2}, true, -1, 2, ""},
		{"sale during the count", []stock.LedgerStats{quiet, busy}, &fakeDurable{rows: 4}, true, -1, 0, ""},
		{"mysql down", []stock.LedgerStats{quiet}, &fakeDurable{rowsErr: errors.New("dial tcp: refused")}, true, -1, 0, ""},
		{"lag unreadable", []stock.LedgerStats{quiet}, &fakeDurable{lagErr: errors.New("NOGROUP")}, true, -1, -1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			aud := audit.New(rdb, audit.Config{
				Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Initial: "stock:initial",
				Replica: "r-1", Backend: "etcd", Ledger: &fakeLedger{stats: tc.stats}, Durable: tc.durable,
			})
			r, err := aud.Check(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			gotDurable := int64(-1)
			if r.Ledger.Durable != nil {
				gotDurable = *r.Ledger.Durable
			}
			if r.OK != tc.wantOK || gotDurable != tc.wantDurable || r.Ledger.Lag != tc.wantLag {
				t.Fatalf("got OK=%v durable %d lag %d problems %q, want OK=%v durable %d lag %d",
					r.OK, gotDurable, r.Ledger.Lag, r.Problems, tc.wantOK, tc.wantDurable, tc.wantLag)
			}
			if tc.problem != "" && (len(r.Problems) != 1 || !strings.Contains(r.Problems[0], tc.problem)) {
				t.Fatalf("got problems %q, want one containing %q", r.Problems, tc.problem)
			}
			for _, s := range tc.durable.asked {
				if s != "s1" {
					t.Fatalf("rows counted for sale %q, want the ledger's s1", s)
				}
			}
		})
	}
}

// The ledger is read from Redis like the sale: a failure is ErrRedis.
func TestCheckLedgerRedisDown(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	lrdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	store := redisstore.NewStore(lrdb, redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Orders: "stock:orders"})
	_ = lrdb.Close() // the ledger's client is gone, the audit's is not
	aud := audit.New(rdb, audit.Config{Stock: "stock", Lucky: "lucky", Fence: "stock:fence",
		Replica: "r-1", Backend: "etcd", Ledger: store})
	if _, err := aud.Check(t.Context(), 1); !errors.Is(err, audit.ErrRedis) {
		t.Fatalf("got %v, want ErrRedis", err)
	}
}
