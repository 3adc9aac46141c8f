package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// lossyStore is a Store whose client reaches a real redis-server through a
// hop that can lose replies. retries is go-redis's MaxRetries: its default
// (3) is what re-ran a sale's write after a lost reply; stockd sets -1.
func lossyStore(t *testing.T, n int64, retries int) (*redisstore.Store, *servertest.ReplyLoser) {
	t.Helper()
	srv := servertest.Redis(t)
	hop := servertest.NewReplyLoser(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: hop.Addr(), MaxRetries: retries, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.NewStore(rdb, redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"})
	if err := s.Reset(t.Context(), n); err != nil {
		t.Fatalf("reset: %v", err)
	}
	// Loaded, so the lost reply is the script's own, not a NOSCRIPT.
	if err := s.LoadScripts(t.Context()); err != nil {
		t.Fatalf("load scripts: %v", err)
	}
	return s, hop
}

// The write's reply is lost after it ran: whoever retries it — go-redis
// (retries on) or the service (retries off) — the sale counts once, and the
// buyer is told it sold. Before receipts, a retried fenced write found its
// token still highest and ran INCR lucky again: stock 9, lucky 2.
func TestLostWriteReplySellsOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries int
		atomic  bool
	}{
		{"fenced write, client retries", 3, false},
		{"fenced write, service retries", -1, false},
		{"atomic sell, client retries", 3, true},
		{"atomic sell, service retries", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, hop := lossyStore(t, 10, tc.retries)
			hop.Lose([]byte("lucky"), 1) // both the write and the atomic sell name the lucky key
			svc := newService(s, one(newFakeLease(7)), func(c *stock.ServiceConfig) {
				c.Fencing = true
				if tc.atomic {
					c.Mode = stock.ModeAtomic
				}
			})
			sale, err := svc.Reduce(t.Context())
			if err != nil {
				t.Fatalf("reduce: got %v, want a confirmed sale", err)
			}
			if hop.Lost() != 1 {
				t.Fatalf("lost %d replies, want 1: the fault did not happen", hop.Lost())
			}
			if sale.StockAfter != 9 {
				t.Fatalf("got stock after %d, want 9", sale.StockAfter)
			}
			storetest.WantStatus(t, s, stock.Status{Stock: 9, Lucky: 1})
		})
	}
}

// When no reply comes back at all, the sale is not reported as sold: it is
// unconfirmed, names its attempt, and the receipt settles it afterwards.
func TestUnansweredWriteIsUnconfirmedAndSettledByReceipt(t *testing.T) {
	s, hop := lossyStore(t, 10, -1)
	hop.Lose([]byte("lucky"), 1<<30)
	var events []stock.Event
	var mu sync.Mutex
	svc := newService(s, one(newFakeLease(7)), func(c *stock.ServiceConfig) {
		c.Fencing = true
		c.ConfirmTimeout = 300 * time.Millisecond
		c.OnEvent = func(e stock.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
	})
	_, err := svc.Reduce(t.Context())
	var ue *stock.UnconfirmedError
	if !errors.As(err, &ue) || !errors.Is(err, stock.ErrUnconfirmed) {
		t.Fatalf("got %v, want an UnconfirmedError", err)
	}
	hop.Lose(nil, 0) // replies flow again, so the checks below can read
	after, sold, rerr := s.Receipt(t.Context(), ue.Attempt)
	if rerr != nil || !sold || after != 9 {
		t.Fatalf("receipt of %s: got (%d, %v, %v), want (9, true, nil)", ue.Attempt, after, sold, rerr)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 9, Lucky: 1})
	mu.Lock()
	defer mu.Unlock()
	if len(events) < 2 || events[len(events)-1] != stock.EventUnconfirmed {
		t.Fatalf("got events %v, want retries then %q", events, stock.EventUnconfirmed)
	}
}

// A lock that lost state hands one token to two leases. Whatever the order,
// neither may then write: B's read is refused as a collision and poisons the
// token, so A's write is refused too; the next token sells normally.
func TestEqualTokensFromTwoLeasesAreBothRefused(t *testing.T) {
	s, _ := newStore(t, 1)
	ctx := t.Context()
	a := stock.Fence{Lock: "redis/k", Token: 5, Lease: "a"}
	b := stock.Fence{Lock: "redis/k", Token: 5, Lease: "b"}
	if _, err := s.Read(ctx, a); err != nil {
		t.Fatalf("A read: %v", err)
	}
	if _, err := s.Read(ctx, b); !errors.Is(err, stock.ErrTokenCollision) || !errors.Is(err, stock.ErrFenced) {
		t.Fatalf("B read under A's token: got %v, want ErrTokenCollision (and ErrFenced)", err)
	}
	if err := s.Write(ctx, a, 0); !errors.Is(err, stock.ErrTokenCollision) {
		t.Fatalf("A write after the collision: got %v, want ErrTokenCollision", err)
	}
	if err := s.Write(ctx, b, 0); !errors.Is(err, stock.ErrFenced) {
		t.Fatalf("B write: got %v, want ErrFenced", err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 1})
	c := stock.Fence{Lock: "redis/k", Token: 6, Lease: "c"}
	if _, err := s.Read(ctx, c); err != nil {
		t.Fatalf("C read with the next token: %v", err)
	}
	if err := s.Write(ctx, c, 0); err != nil {
		t.Fatalf("C write: %v", err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 0, Lucky: 1})
}

// The fence records the lock's identity, the lock key included: replicas
// configured with different lock keys hold different locks, whose tokens
// must not be compared.
func TestOtherLockKeyIsMixed(t *testing.T) {
	s, _ := newStore(t, 3)
	ctx := t.Context()
	if _, err := s.Read(ctx, stock.Fence{Lock: "redis/lock-a", Token: 1, Lease: "x"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Read(ctx, stock.Fence{Lock: "redis/lock-b", Token: 9, Lease: "y"})
	if !errors.Is(err, stock.ErrMixedBackends) {
		t.Fatalf("read under another lock key: got %v, want ErrMixedBackends", err)
	}
}

// advancingLease is a lease from a lock that can move its tokens forward.
type advancingLocker struct {
	fakeLocker
	mu    sync.Mutex
	above []uint64
}

func (a *advancingLocker) AdvanceTokens(_ context.Context, _ string, above uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.above = append(a.above, above)
	return nil
}

var _ lock.TokenAdvancer = (*advancingLocker)(nil)

// A token below the fence (the lock forgot its counter) is refused, and the
// service asks the lock to move its tokens past the fence's high-water mark
// so the next acquisition sells.
func TestStaleTokenAdvancesTheLock(t *testing.T) {
	s, _ := newStore(t, 5)
	ident := "test/seckill:lock"
	if _, err := s.Read(t.Context(), stock.Fence{Lock: ident, Token: 1000, Lease: "before-the-crash"}); err != nil {
		t.Fatal(err)
	}
	lk := &advancingLocker{fakeLocker: one(newFakeLease(3))}
	var advanced int
	svc := newService(s, lk, func(c *stock.ServiceConfig) {
		c.Fencing = true
		c.OnEvent = func(e stock.Event) {
			if e == stock.EventTokensAdvanced {
				advanced++
			}
		}
	})
	_, err := svc.Reduce(t.Context())
	var fe *stock.FencedError
	if !errors.As(err, &fe) || fe.Highest != 1000 || !fe.Stale() {
		t.Fatalf("got %v, want a stale FencedError reporting highest 1000", err)
	}
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if len(lk.above) != 1 || lk.above[0] != 1000 || advanced != 1 {
		t.Fatalf("AdvanceTokens calls %v (events %d), want one with 1000", lk.above, advanced)
	}
}

// A lock service that lost its state hands out tokens below the fence, or
// comes back as another lock. The fence refuses them while it is busy, and
// restarts at the next one once it has accepted nothing for its quiet
// period; a holder from before the restart still cannot write. (The fence's
// last-accepted time is moved back by hand instead of waiting it out.)
func TestQuietFenceRestartsForAForgetfulLock(t *testing.T) {
	s, rdb := newStore(t, 5)
	ctx := t.Context()
	const quiet = time.Hour
	old := stock.Fence{Lock: "etcd/k", Token: 1000 << 16, Lease: "old", Quiet: quiet}
	if _, err := s.Read(ctx, old); err != nil {
		t.Fatal(err)
	}
	low := stock.Fence{Lock: "etcd/k", Token: 3 << 16, Lease: "low", Quiet: quiet}
	if _, err := s.Read(ctx, low); !errors.Is(err, stock.ErrFenced) {
		t.Fatalf("stale read while the fence is busy: got %v, want ErrFenced", err)
	}
	if err := rdb.HSet(ctx, "stock:fence", "at", 0).Err(); err != nil {
		t.Fatal(err)
	}
	rd, err := s.Read(ctx, low)
	if err != nil || !rd.Restarted || rd.Stock != 5 {
		t.Fatalf("stale read once the fence is quiet: got %+v, %v; want a restart reading 5", rd, err)
	}
	if err := s.Write(ctx, old, 4); !errors.Is(err, stock.ErrFenced) {
		t.Fatalf("the old holder's write after the restart: got %v, want ErrFenced", err)
	}
	if err := s.Write(ctx, low, 4); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
	next := stock.Fence{Lock: "etcd/k", Token: 4 << 16, Lease: "next", Quiet: quiet}
	if rd, err := s.Read(ctx, next); err != nil || rd.Restarted {
		t.Fatalf("the next token after the restart: got %+v, %v; want an ordinary read", rd, err)
	}
	other := stock.Fence{Lock: "zookeeper/k", Token: 1 << 40, Lease: "other", Quiet: quiet}
	if _, err := s.Read(ctx, other); !errors.Is(err, stock.ErrMixedBackends) {
		t.Fatalf("another lock while the fence is busy: got %v, want ErrMixedBackends", err)
	}
	strict := low
	strict.Lease, strict.Quiet = "strict", 0
	if err := rdb.HSet(ctx, "stock:fence", "at", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(ctx, strict); !errors.Is(err, stock.ErrFenced) {
		t.Fatalf("a stale read with no quiet period: got %v, want ErrFenced however long the fence was quiet", err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 4, Lucky: 1})
}
