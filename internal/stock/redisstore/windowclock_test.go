package redisstore_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/health"
	"seckill/internal/lock/locallock"
	"seckill/internal/lock/redislock"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// A window's time only moves forward, on a real redis-server whose clock
// the test steps (servers.ShiftedClock) and a seller's clock it sets: the
// two clocks are the test's, so no step waits on time.

// clocks is a Redis on a steppable clock and the seller's clock, both
// offsets from the machine's.
type clocks struct {
	t      *testing.T
	redis  *servers.ShiftedClock
	seller atomic.Int64 // ns
}

// at puts Redis's clock at r and the seller's at s, both from the
// machine's.
func (c *clocks) at(r, s time.Duration) {
	c.t.Helper()
	if err := c.redis.Set(r); err != nil {
		c.t.Fatal(err)
	}
	c.seller.Store(int64(s))
}

func (c *clocks) now() time.Time { return time.Now().Add(time.Duration(c.seller.Load())) }

// windowItems is Items on a Redis on a steppable clock, its windows
// checked against the seller's clock with bound maxSkew.
func windowItems(t *testing.T, mode itemMode, ledger bool, maxSkew time.Duration) (*redisstore.Items, *redis.Client, *clocks) {
	t.Helper()
	srv, rc := servertest.RedisOnClock(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	c := &clocks{t: t, redis: rc}
	items := itemsOver(rdb, ledger, func(cfg *redisstore.ItemsConfig) {
		mode.cfg(&cfg.Service)
		cfg.Clock = redisstore.WindowClock{Now: c.now, MaxSkew: maxSkew}
	})
	return items, rdb, c
}

// sell sells one unit of item x to a new anonymous buyer.
func sell(t *testing.T, items *redisstore.Items) error {
	t.Helper()
	_, err := items.ReduceFor(t.Context(), "x", stock.Buyer{})
	return err
}

func wantState(t *testing.T, items *redisstore.Items, state string) redisstore.ItemStatus {
	t.Helper()
	st, err := items.Status(t.Context(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != state {
		t.Fatalf("state %q, want %q (%+v)", st.State, state, st)
	}
	return st
}

// Finding: Redis's clock stepped back on a live primary reopened an ended
// item (54 units sold 4–6 s after the end). Once a sale saw the end, the
// item stays ended whatever the clock says; a step back before the start
// does not make an open item upcoming again.
func TestItemWindowSurvivesAStepBack(t *testing.T) {
	for _, m := range itemModes {
		t.Run(m.name, func(t *testing.T) {
			items, rdb, c := windowItems(t, m, true, time.Second)
			start := time.Now().Add(time.Hour)
			create(t, items, redisstore.Item{ID: "x", Stock: 100, StartsAt: start.UnixMilli(), EndsAt: start.Add(time.Minute).UnixMilli()})
			_ = rdb
			if err := sell(t, items); !errors.Is(err, stock.ErrNotStarted) {
				t.Fatalf("before the start: %v, want ErrNotStarted", err)
			}
			c.at(time.Hour+time.Second, time.Hour+time.Second)
			if err := sell(t, items); err != nil {
				t.Fatalf("in the window: %v", err)
			}
			// Both clocks back before the start (within the bound of each
			// other): the sale saw the window open, so it stays open.
			c.at(time.Hour-5*time.Second, time.Hour-5*time.Second)
			if err := sell(t, items); err != nil {
				t.Fatalf("after a step back before the start: %v, want a sale (the window was open)", err)
			}
			wantState(t, items, redisstore.ItemOpen)

			c.at(time.Hour+time.Minute+time.Second, time.Hour+time.Minute+time.Second)
			if err := sell(t, items); !errors.Is(err, stock.ErrEnded) {
				t.Fatalf("after the end: %v, want ErrEnded", err)
			}
			latched := wantState(t, items, redisstore.ItemEnded)
			if latched.EndSeenAt == 0 {
				t.Fatalf("after a sale saw the end: no end latch (%+v)", latched)
			}
			for _, back := range []time.Duration{6 * time.Second, 30 * time.Second, 2 * time.Minute} {
				// Redis's clock alone steps back (the sellers' are right),
				// then every clock does: the item stays ended.
				c.at(time.Hour+time.Minute+time.Second-back, time.Hour+time.Minute+time.Second)
				if err := sell(t, items); !errors.Is(err, stock.ErrEnded) {
					t.Fatalf("Redis's clock %s back: %v, want ErrEnded", back, err)
				}
				c.at(time.Hour+time.Minute+time.Second-back, time.Hour+time.Minute+time.Second-back)
				if err := sell(t, items); !errors.Is(err, stock.ErrEnded) {
					t.Fatalf("every clock %s back: %v, want ErrEnded", back, err)
				}
				wantState(t, items, redisstore.ItemEnded)
			}
			wantItem(t, items, "x", 98, 2)
		})
	}
}

// Finding: a failover to a replica 60 s ahead ended a sale early (280
// refused), and a second to one 60 s behind reopened it after its end
// (222 sold). Beyond the bound the window moves nothing: far from an
// edge the sale goes on, and at an edge it is refused with ErrClockSkew.
func TestItemWindowUnderASkewedPrimary(t *testing.T) {
	for _, m := range itemModes {
		t.Run(m.name, func(t *testing.T) {
			items, _, c := windowItems(t, m, false, time.Second)
			end := time.Hour
			create(t, items, redisstore.Item{ID: "x", Stock: 100, EndsAt: time.Now().Add(end).UnixMilli()})

			// Far from the end, a primary 60 s ahead: both clocks say
			// open, and the sale goes on.
			c.at(end-2*time.Minute+time.Minute, end-2*time.Minute)
			if err := sell(t, items); err != nil {
				t.Fatalf("far from the end, Redis 60 s ahead: %v, want a sale", err)
			}
			// 30 s before the end by the seller's clock, 30 s after by
			// Redis's: refused, and not latched.
			c.at(end+30*time.Second, end-30*time.Second)
			var ce *stock.ClockSkewError
			if err := sell(t, items); !errors.Is(err, stock.ErrClockSkew) || !errors.As(err, &ce) || ce.Skew < 59*time.Second {
				t.Fatalf("at the end, Redis 60 s ahead: %v, want ErrClockSkew of about +60s", err)
			}
			// The primary's clock right again: the sale was never ended.
			c.at(end-29*time.Second, end-29*time.Second)
			if err := sell(t, items); err != nil {
				t.Fatalf("back in sync before the end: %v, want a sale (a skewed primary ended it)", err)
			}
			// A failover to one 60 s behind, after the end.
			c.at(end+30*time.Second-time.Minute, end+30*time.Second)
			if err := sell(t, items); !errors.Is(err, stock.ErrClockSkew) {
				t.Fatalf("after the end, Redis 60 s behind: %v, want ErrClockSkew", err)
			}
			// Past the end by both clocks: ended.
			c.at(end+2*time.Minute-time.Minute, end+2*time.Minute)
			if err := sell(t, items); !errors.Is(err, stock.ErrEnded) {
				t.Fatalf("past the end by both clocks: %v, want ErrEnded", err)
			}
			wantItem(t, items, "x", 98, 2)
		})
	}
}

// A forward step within the bound moves the window for good: the sale
// ends early and stays ended. Unlatch undoes it, once the clock is right,
// and says who did it; it refuses a window that has ended by Redis's
// clock now.
func TestItemUnlatchUndoesAForwardStep(t *testing.T) {
	items, rdb, c := windowItems(t, itemModes[0], false, time.Second)
	end := time.Hour
	create(t, items, redisstore.Item{ID: "x", Stock: 100, EndsAt: time.Now().Add(end).UnixMilli()})
	c.at(end-500*time.Millisecond+800*time.Millisecond, end-500*time.Millisecond)
	if err := sell(t, items); !errors.Is(err, stock.ErrEnded) {
		t.Fatalf("Redis 0.8 s ahead, past the end by it: %v, want ErrEnded (within the bound)", err)
	}
	c.at(end-time.Minute, end-time.Minute)
	if err := sell(t, items); !errors.Is(err, stock.ErrEnded) {
		t.Fatalf("clocks right again: %v, want ErrEnded (latched)", err)
	}
	st, err := items.Unlatch(t.Context(), "x", "ops")
	if err != nil || st.State != redisstore.ItemOpen || st.EndSeenAt != 0 {
		t.Fatalf("unlatch: %+v, %v; want open, no latch", st, err)
	}
	if by, err := rdb.HGet(t.Context(), "{item:x}:stock:window", "unlatched_by").Result(); err != nil || by != "ops" {
		t.Fatalf("unlatched_by %q, %v; want ops", by, err)
	}
	if err := sell(t, items); err != nil {
		t.Fatalf("after the unlatch: %v, want a sale", err)
	}
	c.at(end+time.Second, end+time.Second)
	if err := sell(t, items); !errors.Is(err, stock.ErrEnded) {
		t.Fatalf("past the end: %v, want ErrEnded", err)
	}
	if _, err := items.Unlatch(t.Context(), "x", "ops"); !errors.Is(err, redisstore.ErrWindowEnded) {
		t.Fatalf("unlatch after the end: %v, want ErrWindowEnded", err)
	}
	if _, err := items.Unlatch(t.Context(), "nope", "ops"); !errors.Is(err, stock.ErrNoItem) {
		t.Fatalf("unlatch of no item: %v, want ErrNoItem", err)
	}
	wantItem(t, items, "x", 99, 1)
}

// ReadProcess sees a step of the primary's clock at once, either way,
// with the sign ClockSkew documents (this process's clock less the
// primary's).
func TestReadProcessSeesAStep(t *testing.T) {
	srv, rc := servertest.RedisOnClock(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	check := health.ClockCheck{Primary: rdb}
	for _, step := range []time.Duration{0, 5 * time.Second, -6 * time.Second} {
		if err := rc.Set(step); err != nil {
			t.Fatal(err)
		}
		s, err := check.ReadProcess(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// The reading is off by at most its uncertainty (and TIME's µs).
		if d := (s.Skew + step).Abs(); d > s.Uncertainty+time.Millisecond {
			t.Fatalf("primary %s off: this process reads %s, want %s (±%s)", step, s, -step, s.Uncertainty)
		}
		if beyond := s.Beyond(time.Second); beyond != (step != 0) {
			t.Fatalf("primary %s off: Beyond(1s) %v", step, beyond)
		}
	}
}

// Finding: Redis's clock jumped past stock.idempotency_ttl (24 h) and the
// same Idempotency-Key sold a second unit. A record has no TTL: it lives
// as long as its sale, and only the sellers' clock trims it.
func TestIdempotencyOutlivesAClockJump(t *testing.T) {
	for _, m := range itemModes {
		t.Run(m.name, func(t *testing.T) {
			srv, rc := servertest.RedisOnClock(t)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			s := redisstore.NewStore(rdb, ledgerKeys(1))
			if err := s.Reset(t.Context(), 10); err != nil {
				t.Fatal(err)
			}
			svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) {
				c.Fencing, c.Replica, c.IdempotencyTTL = true, "r1", 24*time.Hour
				m.cfg(c)
			})
			ann := stock.Buyer{User: "ann", Key: "k1"}
			first, err := svc.ReduceFor(t.Context(), ann)
			if err != nil {
				t.Fatal(err)
			}
			if err := rc.Step(25 * time.Hour); err != nil {
				t.Fatal(err)
			}
			again, err := svc.ReduceFor(t.Context(), ann)
			if err != nil || !again.Replayed || again.OrderID != first.OrderID {
				t.Fatalf("the same key after Redis's clock jumped 25 h: %+v, %v; want the replay of %s", again, err, first.OrderID)
			}
			if err := rc.Step(-25 * time.Hour); err != nil {
				t.Fatal(err)
			}
			if back, err := svc.ReduceFor(t.Context(), ann); err != nil || back.OrderID != first.OrderID {
				t.Fatalf("the same key after the clock came back: %+v, %v; want the replay of %s", back, err, first.OrderID)
			}
			if st, err := s.Status(t.Context()); err != nil || st.Lucky != 1 {
				t.Fatalf("status %+v, %v: want 1 unit sold to one key", st, err)
			}
		})
	}
}

// The records are trimmed by the sellers' clock as sales go on: one
// older than the TTL is removed by the next keyed sale, and its key may
// buy again; a reset removes every record and the index.
func TestIdempotencyTrimmedBySalesClock(t *testing.T) {
	s, rdb := ledgerStore(t, 10, 1)
	svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) {
		c.Fencing, c.Replica, c.IdempotencyTTL = true, "r1", time.Millisecond
	})
	sellKey := func(key string) stock.Sale {
		t.Helper()
		sale, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "ann", Key: key})
		if err != nil {
			t.Fatal(err)
		}
		return sale
	}
	first := sellKey("k1")
	// The next sale's clock past the TTL: a reading, not a wait on a bound.
	for t0 := time.Now().UnixMilli(); time.Now().UnixMilli() <= t0+1; {
		time.Sleep(time.Millisecond)
	}
	sellKey("k2")
	names, err := rdb.ZRange(t.Context(), ordersKey+":idem:by-time", 0, -1).Result()
	if err != nil || len(names) != 1 || !strings.HasSuffix(names[0], ":k2") {
		t.Fatalf("index after k2's sale: %q, %v; want only k2's record (k1's trimmed)", names, err)
	}
	if again := sellKey("k1"); again.Replayed || again.OrderID == first.OrderID {
		t.Fatalf("k1 after its record was trimmed: %+v, want a new sale", again)
	}
	if err := s.Reset(t.Context(), 5); err != nil {
		t.Fatal(err)
	}
	left, err := rdb.Keys(t.Context(), ordersKey+":idem:*").Result()
	if err != nil || len(left) != 0 {
		t.Fatalf("after a reset: %q, %v; want no record and no index", left, err)
	}
}

// On a Redis Cluster the trim removes records its script did not name
// (they share the item's hash tag, so its slot): an item's keyed sales
// trim there as on one Redis.
func TestItemIdempotencyTrimmedOnACluster(t *testing.T) {
	cl := servertest.RedisCluster(t)
	cc := clusterClient(t, cl)
	items := itemsOver(cc, true, func(c *redisstore.ItemsConfig) { c.Service.IdempotencyTTL = time.Millisecond })
	create(t, items, redisstore.Item{ID: "x", Stock: 5})
	first, err := items.ReduceFor(t.Context(), "x", stock.Buyer{User: "ann", Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	for t0 := time.Now().UnixMilli(); time.Now().UnixMilli() <= t0+1; {
		time.Sleep(time.Millisecond)
	}
	if _, err := items.ReduceFor(t.Context(), "x", stock.Buyer{User: "ann", Key: "k2"}); err != nil {
		t.Fatalf("a keyed sale that trims on a cluster: %v", err)
	}
	index := redisstore.ItemKeys(defaultBase.Derive(true), "x").Idempotency + "by-time"
	names, err := cc.ZRange(t.Context(), index, 0, -1).Result()
	if err != nil || len(names) != 1 || !strings.HasSuffix(names[0], ":k2") {
		t.Fatalf("index %s: %q, %v; want only k2's record", index, names, err)
	}
	if again, err := items.ReduceFor(t.Context(), "x", stock.Buyer{User: "ann", Key: "k1"}); err != nil || again.OrderID == first.OrderID {
		t.Fatalf("k1 after its record was trimmed: %+v, %v; want a new sale", again, err)
	}
}

// A lock key that expires early because the lock Redis's clock jumped
// forward lets a second holder in; the fence, on the stock Redis, refuses
// the first holder's write, so the unit is sold once.
func TestFencingRefusesAHolderAClockJumpExpired(t *testing.T) {
	ctx := t.Context()
	srv, rc := servertest.RedisOnClock(t)
	lrdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = lrdb.Close() })
	// Two replicas' lockers: within one, a second acquisition would queue
	// behind the first hold until its watchdog found it lost.
	locker := redislock.New(lrdb, redislock.Options{TTL: 30 * time.Second})
	t.Cleanup(func() { _ = locker.Close() })
	other := redislock.New(lrdb, redislock.Options{TTL: 30 * time.Second})
	t.Cleanup(func() { _ = other.Close() })
	s, _ := newStore(t, 5)
	const ident = "redis/seckill:lock"

	a, err := locker.Acquire(ctx, "seckill:lock")
	if err != nil {
		t.Fatal(err)
	}
	fa := stock.Fence{Lock: ident, Token: a.Token(), Lease: "a"}
	ra, err := s.Read(ctx, fa)
	if err != nil {
		t.Fatal(err)
	}
	// The lock Redis's clock jumps past a's TTL: its key is gone.
	if err := rc.Step(time.Minute); err != nil {
		t.Fatal(err)
	}
	b, err := other.Acquire(ctx, "seckill:lock")
	if err != nil {
		t.Fatalf("a second holder after the jump: %v", err)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("b's token %d not above a's %d", b.Token(), a.Token())
	}
	fb := stock.Fence{Lock: ident, Token: b.Token(), Lease: "b"}
	rb, err := s.Read(ctx, fb)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, fb, rb.Stock-1); err != nil {
		t.Fatalf("b's write: %v", err)
	}
	if err := s.Write(ctx, fa, ra.Stock-1); !errors.Is(err, stock.ErrFenced) {
		t.Fatalf("a's write after b's: %v, want ErrFenced", err)
	}
	if st, err := s.Status(ctx); err != nil || st.Stock != 4 || st.Lucky != 1 {
		t.Fatalf("status %+v, %v; want stock 4, lucky 1: one unit, sold once", st, err)
	}
	_ = b.Release(ctx)
}

// A retry after Redis's clock jumped past ReceiptTTL (a lost reply, then
// the jump, then the retry) finds its receipt, which lives by the sales'
// clock, and counts nothing again. A fenced write whose receipt is gone
// all the same (an older replica wrote it with a Redis TTL) answers from
// the fence, which keeps the lease that wrote. Fenced and atomic, plain
// and ledger forms.
func TestRetryAfterAClockJumpSellsOnce(t *testing.T) {
	for _, mode := range []string{"fenced", "atomic"} {
		for _, ledger := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s ledger %v", mode, ledger), func(t *testing.T) {
				ctx := t.Context()
				srv, rc := servertest.RedisOnClock(t)
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
				t.Cleanup(func() { _ = rdb.Close() })
				keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
				if ledger {
					keys = ledgerKeys(1)
				}
				s := redisstore.NewStore(rdb, keys)
				if err := s.Reset(ctx, 5); err != nil {
					t.Fatal(err)
				}
				var sell func() error
				receipt := keys.Fence + ":receipt:"
				switch mode {
				case "fenced":
					f := stock.Fence{Lock: "test/k", Token: 7, Lease: "lease-1"}
					rd, err := s.Read(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					sell = func() error { return s.Write(ctx, f, rd.Stock-1) }
					receipt += f.Lease
				case "atomic":
					id := stock.NewAttemptID()
					sell = func() error {
						after, err := s.SellAtomic(ctx, id)
						if err == nil && after != 4 {
							return fmt.Errorf("stock after %d, want the first run's 4", after)
						}
						return err
					}
					receipt += id
				}
				if err := sell(); err != nil {
					t.Fatal(err)
				}
				if err := rc.Step(redisstore.ReceiptTTL + time.Minute); err != nil {
					t.Fatal(err)
				}
				if n, err := rdb.Exists(ctx, receipt).Result(); err != nil || n != 1 {
					t.Fatalf("the receipt after Redis's clock jumped past its TTL: exists %d, %v; want kept", n, err)
				}
				if err := sell(); err != nil {
					t.Fatalf("the retry: %v, want the first run's answer", err)
				}
				if mode == "fenced" {
					if err := rdb.Del(ctx, receipt).Err(); err != nil {
						t.Fatal(err)
					}
					if err := sell(); err != nil {
						t.Fatalf("the retry with its receipt gone: %v, want the fence's answer", err)
					}
				}
				if st, err := s.Status(ctx); err != nil || st.Stock != 4 || st.Lucky != 1 {
					t.Fatalf("status %+v, %v; want stock 4, lucky 1: sold once", st, err)
				}
			})
		}
	}
}

// Receipts are trimmed by the sales' clock: a sale whose seller's clock is
// past an older receipt's ReceiptTTL removes it, and Redis's clock jumping
// does not.
func TestReceiptsTrimmedBySalesClock(t *testing.T) {
	ctx := t.Context()
	srv, rc := servertest.RedisOnClock(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	s := redisstore.NewStore(rdb, redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}).
		WithWindowClock(redisstore.WindowClock{Now: func() time.Time { return time.UnixMilli(now.Load()) }})
	if err := s.Reset(ctx, 5); err != nil {
		t.Fatal(err)
	}
	const index = "stock:fence:receipt:by-time"
	sell := func() string {
		t.Helper()
		id := stock.NewAttemptID()
		if _, err := s.SellAtomic(ctx, id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	first := sell()
	if err := rc.Step(2 * redisstore.ReceiptTTL); err != nil {
		t.Fatal(err)
	}
	second := sell()
	if got, err := rdb.ZRange(ctx, index, 0, -1).Result(); err != nil || len(got) != 2 {
		t.Fatalf("index after Redis's clock jumped: %q, %v; want both receipts", got, err)
	}
	now.Add((redisstore.ReceiptTTL + time.Second).Milliseconds())
	third := sell()
	got, err := rdb.ZRange(ctx, index, 0, -1).Result()
	if err != nil || len(got) != 1 || got[0] != "stock:fence:receipt:"+third {
		t.Fatalf("index after the sellers' clock passed the TTL: %q, %v; want only the newest receipt", got, err)
	}
	for _, id := range []string{first, second} {
		if n, err := rdb.Exists(ctx, "stock:fence:receipt:"+id).Result(); err != nil || n != 0 {
			t.Fatalf("receipt %s: exists %d, %v; want trimmed", id, n, err)
		}
	}
}
