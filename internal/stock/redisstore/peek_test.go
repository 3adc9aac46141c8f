package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/locallock"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
	"seckill/internal/testwait"
)

// countingLocker counts Acquire calls and hands out fresh leases.
type countingLocker struct {
	calls atomic.Int64
	next  atomic.Uint64
}

func (c *countingLocker) Acquire(context.Context, string) (lock.Lease, error) {
	c.calls.Add(1)
	return newFakeLease(c.next.Add(1)), nil
}

// A sold-out sale answers its losers from a read, without taking the lock;
// the event counts them.
func TestSoldOutAnsweredWithoutTheLock(t *testing.T) {
	for _, m := range ledgerModes {
		if m.name == "atomic" {
			continue // no lock to skip
		}
		t.Run(m.name, func(t *testing.T) {
			s, _ := ledgerStore(t, 0, m.segments)
			lk := &countingLocker{}
			var early atomic.Int64
			svc := newService(s, lk, func(c *stock.ServiceConfig) {
				m.cfg(c)
				c.OnEvent = func(e stock.Event) {
					if e == stock.EventSoldOutUnlocked {
						early.Add(1)
					}
				}
			})
			for _, b := range []stock.Buyer{{}, {User: "ann"}, {User: "bob", Key: "never-sold"}} {
				if _, err := svc.ReduceFor(t.Context(), b); !errors.Is(err, stock.ErrSoldOut) {
					t.Fatalf("%+v: got %v, want ErrSoldOut", b, err)
				}
			}
			if n := lk.calls.Load(); n != 0 {
				t.Errorf("the lock was taken %d times for a sold-out sale", n)
			}
			if early.Load() == 0 {
				t.Error("no sold_out_unlocked event")
			}
		})
	}
}

// Two replicas on one Redis: the units-left hint one replica's section
// leaves goes stale when the other sells the rest. Its next buyer takes
// the lock and is answered sold out by the read under it; the buyer after
// that, by the read without the lock (peek.go).
func TestStaleHintAnsweredUnderTheLock(t *testing.T) {
	for _, m := range ledgerModes {
		if m.segments != 1 || m.name == "atomic" {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			s, _ := ledgerStore(t, 2, 1)
			lk := &countingLocker{} // one token sequence for both
			var early atomic.Int64
			replica := func(name string) *stock.Service {
				return newService(s, lk, func(c *stock.ServiceConfig) {
					m.cfg(c)
					c.Replica = name
					c.OnEvent = func(e stock.Event) {
						if e == stock.EventSoldOutUnlocked {
							early.Add(1)
						}
					}
				})
			}
			a, b := replica("a"), replica("b")
			step := func(what string, svc *stock.Service, want error, grants, unlocked int64) {
				t.Helper()
				_, err := svc.ReduceFor(t.Context(), stock.Buyer{})
				if !errors.Is(err, want) && !(want == nil && err == nil) {
					t.Fatalf("%s: got %v, want %v", what, err, want)
				}
				if lk.calls.Load() != grants || early.Load() != unlocked {
					t.Fatalf("%s: %d lock grants, %d answered without the lock; want %d, %d",
						what, lk.calls.Load(), early.Load(), grants, unlocked)
				}
			}
			step("a sells (1 left: a's hint)", a, nil, 1, 0)
			step("b sells the last unit", b, nil, 2, 0)
			step("a's buyer on its stale hint", a, stock.ErrSoldOut, 3, 0)
			step("a's next buyer", a, stock.ErrSoldOut, 3, 1)
			step("b's next buyer", b, stock.ErrSoldOut, 3, 2)
		})
	}
}

// A buyer whose key has a record still takes the lock after the sell-out,
// and is answered its original order (TestReplayAfterSoldOut checks the
// answer in every mode; this checks it is not decided by the read).
func TestReplayAfterSoldOutTakesTheLock(t *testing.T) {
	s, _ := ledgerStore(t, 1, 1)
	lk := &countingLocker{}
	svc := newService(s, lk, func(c *stock.ServiceConfig) { c.Fencing = true })
	first, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "erin", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "erin", Key: "k"})
	if err != nil || !again.Replayed || again.OrderID != first.OrderID {
		t.Fatalf("replay: got %+v, %v; want a replay of %s", again, err, first.OrderID)
	}
	if n := lk.calls.Load(); n != 2 {
		t.Errorf("lock taken %d times, want 2 (the sale and the replay)", n)
	}
}

// Woken by the last unit's sale (bell.go), a buyer whose key already sold
// goes back to the lock and is answered its original order, not sold out;
// the anonymous buyers woken with it are told sold out by their own read,
// without a turn at the lock: two grants for the queue of five, the last
// unit's and the replay's.
func TestWokenReplayGetsItsSaleBack(t *testing.T) {
	s, _ := ledgerStore(t, 2, 1)
	lk := storetest.NewTurnLocker()
	svc := newService(s, lk, func(c *stock.ServiceConfig) { c.Fencing = true })
	ctx := t.Context()
	erin := stock.Buyer{User: "erin", Key: "k"}
	first, err := svc.ReduceFor(ctx, erin)
	if err != nil {
		t.Fatal(err)
	}
	queued := func(n int64) {
		t.Helper()
		deadline := testwait.Until(t)
		for lk.Waiting.Load() != n {
			if deadline.Err() != nil {
				t.Fatalf("never %d queued for the lock (%d)", n, lk.Waiting.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	// The lock held while the queue forms, in order: 4 anonymous buyers
	// (1 unit left when each read), then erin's purchase sent again.
	hold, err := lk.Acquire(ctx, "seckill:lock")
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		sale stock.Sale
		err  error
	}
	anon := make(chan answer, 4)
	var again answer
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			sale, err := svc.ReduceFor(ctx, stock.Buyer{User: fmt.Sprintf("u%d", i)})
			anon <- answer{sale, err}
		})
		queued(int64(i + 1))
	}
	wg.Go(func() { again.sale, again.err = svc.ReduceFor(ctx, erin) })
	queued(5)
	granted := lk.Granted.Load()
	if err := hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(anon)
	sold, out := 0, 0
	for a := range anon {
		switch {
		case a.err == nil:
			sold++
		case errors.Is(a.err, stock.ErrSoldOut):
			out++
		default:
			t.Errorf("an anonymous buyer got %v", a.err)
		}
	}
	if sold != 1 || out != 3 {
		t.Fatalf("anonymous buyers: %d sold, %d sold out; want 1, 3", sold, out)
	}
	if again.err != nil || !again.sale.Replayed || again.sale.OrderID != first.OrderID {
		t.Fatalf("erin's purchase sent again: got %+v, %v; want a replay of %s", again.sale, again.err, first.OrderID)
	}
	if g := lk.Granted.Load() - granted; g != 2 {
		t.Fatalf("the lock was granted %d times to the queue of 5; want 2 (the last unit, the replay)", g)
	}
}

// A stock key that is gone is a lost sale, never "0 left": the read
// without the lock says so too, and takes no lock to say it.
func TestPeekNeverReadsALostSaleAsSoldOut(t *testing.T) {
	s, rdb := ledgerStore(t, 3, 1)
	lk := &countingLocker{}
	svc := newService(s, lk, func(c *stock.ServiceConfig) { c.Fencing = true })
	if err := rdb.Del(t.Context(), "stock").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := svc.Reduce(t.Context())
	if !errors.Is(err, stock.ErrStoreLost) || errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("got %v, want ErrStoreLost", err)
	}
	if n := lk.calls.Load(); n != 0 {
		t.Errorf("lock taken %d times for a lost sale", n)
	}
}

// A reset by another replica after this one saw the sale sold out is
// seen by the next read: no false sold out.
func TestPeekSeesAResetByAnotherReplica(t *testing.T) {
	s, rdb := ledgerStore(t, 1, 1)
	svc := newService(s, &countingLocker{}, func(c *stock.ServiceConfig) { c.Fencing = true })
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reduce(t.Context()); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("got %v, want ErrSoldOut", err)
	}
	other := redisstore.NewStore(rdb, ledgerKeys(1))
	if err := other.Reset(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	if sale, err := svc.Reduce(t.Context()); err != nil || sale.StockAfter != 1 {
		t.Fatalf("after another replica's reset: got %+v, %v; want a sale leaving 1", sale, err)
	}
}

// With Shed, a flood the lock cannot serve within the wait is answered busy
// at once (a *BusyError with its estimate), not after the whole wait; the
// books stay exact. Without it, every busy is a wait that ran out.
func TestShedBuyersTheLockCannotServeInTime(t *testing.T) {
	for _, shed := range []bool{true, false} {
		s, _ := newStore(t, 1000)
		svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) {
			c.Fencing = true
			c.Shed = shed
			c.WaitTimeout = 100 * time.Millisecond
			c.Delay = stock.FixedDelay(20 * time.Millisecond)
		})
		var sold, shedN, waited atomic.Int64
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() {
				for range 5 {
					_, err := svc.Reduce(t.Context())
					var be *stock.BusyError
					switch {
					case err == nil:
						sold.Add(1)
					case errors.As(err, &be):
						if !errors.Is(err, stock.ErrBusy) || be.RetryAfter <= be.Wait {
							t.Errorf("shed answer %v: want ErrBusy with an estimate above the wait", err)
						}
						shedN.Add(1)
					case errors.Is(err, stock.ErrBusy):
						waited.Add(1)
					default:
						t.Errorf("unexpected %v", err)
					}
				}
			})
		}
		wg.Wait()
		st, err := s.Status(t.Context())
		if err != nil || st.Stock+st.Lucky != 1000 || st.Lucky != sold.Load() {
			t.Fatalf("shed=%v: books %+v (%v), %d sold", shed, st, err, sold.Load())
		}
		t.Logf("shed=%v: %d sold, %d shed, %d busy after the wait", shed, sold.Load(), shedN.Load(), waited.Load())
		if shed && shedN.Load() == 0 {
			t.Error("40 buyers on a lock held 20ms with a 100ms wait: none shed")
		}
		if !shed && shedN.Load() != 0 {
			t.Errorf("%d shed with Shed off", shedN.Load())
		}
	}
}

// A stock key deleted between a lease's read and its write is a lost sale:
// the write refuses (503 store_lost), and does not write a stock back out
// of nothing.
func TestWriteRefusesALostStockKey(t *testing.T) {
	for _, m := range ledgerModes {
		if m.name == "atomic" || m.segments > 1 {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			s, rdb := ledgerStore(t, 5, 1)
			l := newFakeLease(1)
			l.onDone = func() {
				// After the read, before the write.
				if err := rdb.Del(context.Background(), "stock").Err(); err != nil {
					t.Error(err)
				}
			}
			svc := newService(s, one(l), func(c *stock.ServiceConfig) { m.cfg(c) })
			_, err := svc.Reduce(t.Context())
			if !errors.Is(err, stock.ErrStoreLost) || errors.Is(err, stock.ErrUnconfirmed) {
				t.Fatalf("got %v, want a definite ErrStoreLost", err)
			}
			if n, err := rdb.Exists(t.Context(), "stock").Result(); err != nil || n != 0 {
				t.Fatalf("stock key exists %d (%v): written back", n, err)
			}
			if lucky, _ := rdb.Get(t.Context(), "lucky").Int(); lucky != 0 {
				t.Fatalf("lucky %d, want 0", lucky)
			}
		})
	}
}
