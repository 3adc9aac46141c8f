package stock_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lab/servers"
	"seckill/internal/lab/servers/servertest"
	"seckill/internal/stock"
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
func windowItems(t *testing.T, mode itemMode, ledger bool, maxSkew time.Duration) (*stock.Items, *redis.Client, *clocks) {
	t.Helper()
	srv, rc := servertest.RedisOnClock(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	c := &clocks{t: t, redis: rc}
	items := itemsOver(rdb, ledger, func(cfg *stock.ItemsConfig) {
		mode.cfg(&cfg.Service)
		cfg.Clock = stock.WindowClock{Now: c.now, MaxSkew: maxSkew}
	})
	return items, rdb, c
}

// sell sells one unit of item x to a new anonymous buyer.
func sell(t *testing.T, items *stock.Items) error {
	t.Helper()
	_, err := items.ReduceFor(t.Context(), "x", stock.Buyer{})
	return err
}

func wantState(t *testing.T, items *stock.Items, state string) stock.ItemStatus {
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
			create(t, items, stock.Item{ID: "x", Stock: 100, StartsAt: start.UnixMilli(), EndsAt: start.Add(time.Minute).UnixMilli()})
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
			wantState(t, items, stock.ItemOpen)

			c.at(time.Hour+time.Minute+time.Second, time.Hour+time.Minute+time.Second)
			if err := sell(t, items); !errors.Is(err, stock.ErrEnded) {
				t.Fatalf("after the end: %v, want ErrEnded", err)
			}
			latched := wantState(t, items, stock.ItemEnded)
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
				wantState(t, items, stock.ItemEnded)
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
			create(t, items, stock.Item{ID: "x", Stock: 100, EndsAt: time.Now().Add(end).UnixMilli()})

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
	create(t, items, stock.Item{ID: "x", Stock: 100, EndsAt: time.Now().Add(end).UnixMilli()})
	c.at(end-500*time.Millisecond+800*time.Millisecond, end-500*time.Millisecond)
	if err := sell(t, items); !errors.Is(err, stock.ErrEnded) {
		t.Fatalf("Redis 0.8 s ahead, past the end by it: %v, want ErrEnded (within the bound)", err)
	}
	c.at(end-time.Minute, end-time.Minute)
	if err := sell(t, items); !errors.Is(err, stock.ErrEnded) {
		t.Fatalf("clocks right again: %v, want ErrEnded (latched)", err)
	}
	st, err := items.Unlatch(t.Context(), "x", "ops")
	if err != nil || st.State != stock.ItemOpen || st.EndSeenAt != 0 {
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
	if _, err := items.Unlatch(t.Context(), "x", "ops"); !errors.Is(err, stock.ErrWindowEnded) {
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
	check := stock.ClockCheck{Primary: rdb}
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
