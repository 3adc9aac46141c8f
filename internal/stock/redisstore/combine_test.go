package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/locallock"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
	"seckill/internal/testwait"
)

// writeCounter counts the fenced writes (and atomic sells) a client sends:
// the scripts that name the lucky key.
type writeCounter struct{ n atomic.Int64 }

func countWrites(t *testing.T, rdb *redis.Client, s *redisstore.Store) *writeCounter {
	t.Helper()
	// Loaded first, so a NOSCRIPT fallback does not count a write twice.
	if err := s.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := &writeCounter{}
	rdb.AddHook(c)
	return c
}

func (c *writeCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *writeCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (c *writeCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmd.Name(), "eval") && slices.Contains(cmd.Args(), any("lucky")) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// gatedLocker holds the first Acquire until open is closed, so a test can
// queue buyers behind the first one; then it is the Locker it wraps.
type gatedLocker struct {
	lock.Locker
	open  chan struct{}
	first atomic.Bool
}

func gated(lk lock.Locker) *gatedLocker { return &gatedLocker{Locker: lk, open: make(chan struct{})} }

func (g *gatedLocker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	if g.first.CompareAndSwap(false, true) {
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Locker.Acquire(ctx, key)
}

// waitQueued waits until n requests are queued behind segment seg's gatherer.
func waitQueued(t *testing.T, svc *stock.Service, seg, n int) {
	t.Helper()
	until := testwait.Until(t)
	for svc.Queued(seg) != n {
		if until.Err() != nil {
			t.Fatalf("got %d requests queued, want %d", svc.Queued(seg), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// outcome is one buyer's answer.
type outcome struct {
	sale stock.Sale
	err  error
}

// buyQueued starts n buyers on svc behind a gated first Acquire, waits until
// the other n-1 are queued, opens the gate and returns every answer.
func buyQueued(t *testing.T, ctx context.Context, svc *stock.Service, g *gatedLocker, n int) []outcome {
	t.Helper()
	out := make([]outcome, n)
	var wg sync.WaitGroup
	wg.Go(func() { out[0].sale, out[0].err = svc.Reduce(ctx) })
	until := testwait.Until(t)
	for !svc.Gathering(0) && until.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	for i := 1; i < n; i++ {
		wg.Go(func() { out[i].sale, out[i].err = svc.Reduce(ctx) })
	}
	waitQueued(t, svc, 0, n-1)
	close(g.open)
	wg.Wait()
	return out
}

// batchOf is the batch attempt id a member's attempt id names.
func batchOf(attempt string) string {
	b, _, _ := strings.Cut(attempt, ".")
	return b
}

// n buyers queued behind one lock holder are sold min(n, stock) units in
// one read and one write; the rest are told sold out; each sale reports
// its own stock-after and attempt, and its receipt says so.
func TestCombineSellsABatchInOneWrite(t *testing.T) {
	for _, tc := range []struct {
		name         string
		stock, n     int
		sold, writes int
	}{
		{"more buyers than stock", 5, 8, 5, 1},
		{"fewer buyers than stock", 20, 8, 8, 1},
		// A sale already sold out queues no one: TestSoldOutAnsweredWithoutTheLock.
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rdb := newStore(t, int64(tc.stock))
			writes := countWrites(t, rdb, s)
			g := gated(locallock.New())
			svc := newService(s, g, func(c *stock.ServiceConfig) { c.Fencing, c.Combine = true, true })
			out := buyQueued(t, t.Context(), svc, g, tc.n)
			var sold, soldOut int
			afters := map[int64]bool{}
			batches := map[string]bool{}
			for i, o := range out {
				switch {
				case o.err == nil:
					sold++
					if afters[o.sale.StockAfter] || o.sale.StockAfter < 0 {
						t.Errorf("buyer %d: stock after %d repeated or negative", i, o.sale.StockAfter)
					}
					afters[o.sale.StockAfter] = true
					batches[batchOf(o.sale.Attempt)] = true
					after, ok, err := s.Receipt(t.Context(), o.sale.Attempt)
					if err != nil || !ok || after != o.sale.StockAfter {
						t.Errorf("receipt of %s: got (%d, %v, %v), want (%d, true, nil)", o.sale.Attempt, after, ok, err, o.sale.StockAfter)
					}
				case errors.Is(o.err, stock.ErrSoldOut):
					soldOut++
				default:
					t.Errorf("buyer %d: %v", i, o.err)
				}
			}
			if sold != tc.sold || soldOut != tc.n-tc.sold {
				t.Fatalf("got sold %d sold_out %d, want %d %d", sold, soldOut, tc.sold, tc.n-tc.sold)
			}
			if got := writes.n.Load(); got != int64(tc.writes) || len(batches) != tc.writes {
				t.Fatalf("got %d writes over %d batches, want %d", got, len(batches), tc.writes)
			}
			storetest.WantStatus(t, s, stock.Status{Stock: int64(tc.stock - tc.sold), Lucky: int64(tc.sold)})
		})
	}
}

// A batch never holds more than CombineMax buyers, the holder included;
// the rest are served by the next holder.
func TestCombineMaxBoundsTheBatch(t *testing.T) {
	const n, most = 10, 4
	s, rdb := newStore(t, 100)
	writes := countWrites(t, rdb, s)
	g := gated(locallock.New())
	svc := newService(s, g, func(c *stock.ServiceConfig) { c.Fencing, c.Combine, c.CombineMax = true, true, most })
	out := buyQueued(t, t.Context(), svc, g, n)
	sizes := map[string]int{}
	for i, o := range out {
		if o.err != nil {
			t.Fatalf("buyer %d: %v", i, o.err)
		}
		sizes[batchOf(o.sale.Attempt)]++
	}
	for b, size := range sizes {
		if size > most {
			t.Errorf("batch %s sold %d, want at most %d", b, size, most)
		}
	}
	// The gated holder takes 3 of the 9 queued; 6 stay: batches 4, 4, 2.
	if got, want := writes.n.Load(), int64(len(sizes)); got != want || got != 3 {
		t.Fatalf("got %d writes for %d batches, want 3", got, want)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 100 - n, Lucky: n})
}

// Uncontended, combining changes nothing: one write per sale, and the
// attempt is the sale's own (no member suffix).
func TestCombineUncontendedIsAPlainSale(t *testing.T) {
	s, rdb := newStore(t, 3)
	writes := countWrites(t, rdb, s)
	svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) { c.Fencing, c.Combine = true, true })
	for i := range 3 {
		sale, err := svc.Reduce(t.Context())
		if err != nil || sale.StockAfter != int64(2-i) || strings.Contains(sale.Attempt, ".") {
			t.Fatalf("sale %d: got %+v, %v; want stock %d and a plain attempt id", i, sale, err, 2-i)
		}
	}
	if _, err := svc.Reduce(t.Context()); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("fourth sale: got %v, want ErrSoldOut", err)
	}
	if got := writes.n.Load(); got != 3 {
		t.Fatalf("got %d writes, want 3", got)
	}
	if svc.Gathering(0) || svc.Queued(0) != 0 {
		t.Fatal("combiner not idle after the sales")
	}
}

// Many concurrent buyers with a lock held through a work delay: exactly
// min(n, stock) sold, far fewer writes than sales, and the queue idle after.
func TestCombineConcurrentBuyers(t *testing.T) {
	const units, buyers = 60, 150
	s, rdb := newStore(t, units)
	writes := countWrites(t, rdb, s)
	svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) {
		c.Fencing, c.Combine, c.CombineMax = true, true, 16
		c.Delay = stock.Delay{Min: 2 * time.Millisecond, Max: 2 * time.Millisecond}
	})
	sold, soldOut := sellAll(t, svc, buyers)
	if sold != units || soldOut != buyers-units {
		t.Fatalf("got sold %d sold_out %d, want %d %d", sold, soldOut, units, buyers-units)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 0, Lucky: units})
	w := writes.n.Load()
	if w >= units/2 || w < units/16 {
		t.Fatalf("got %d writes for %d sales, want between %d and %d", w, units, units/16, units/2-1)
	}
	t.Logf("%d sales in %d writes (%.1f sales per write)", units, w, float64(units)/float64(w))
	if svc.Gathering(0) || svc.Queued(0) != 0 {
		t.Fatal("combiner not idle after the sale")
	}
}

// A lease lost during the batch's critical section sells nothing, and every
// member is told the lock was lost.
func TestCombineLostLeaseSellsNothing(t *testing.T) {
	s, _ := newStore(t, 10)
	l := newFakeLease(1)
	l.onDone = func() { l.sig.Close(fmt.Errorf("%w: test stole it", lock.ErrLost)) }
	g := gated(one(l))
	svc := newService(s, g, func(c *stock.ServiceConfig) {
		c.Fencing, c.Combine = true, true
		c.Delay = stock.Delay{Min: time.Hour, Max: time.Hour} // only loss can end it
	})
	for i, o := range buyQueued(t, t.Context(), svc, g, 5) {
		if !errors.Is(o.err, stock.ErrLockLost) {
			t.Errorf("buyer %d: got %v, want ErrLockLost", i, o.err)
		}
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 10})
}

// A newer holder reads during the batch: the batch's write is fenced,
// nothing is sold, and every member is told so.
func TestCombineFencedBatchSellsNothing(t *testing.T) {
	s, _ := newStore(t, 10)
	l := newFakeLease(1)
	l.onDone = func() {
		if _, err := s.Read(t.Context(), stock.Fence{Lock: "test/seckill:lock", Token: 2, Lease: "newer"}); err != nil {
			t.Errorf("newer holder's read: %v", err)
		}
	}
	g := gated(one(l))
	svc := newService(s, g, func(c *stock.ServiceConfig) {
		c.Fencing, c.Combine = true, true
		c.Delay = stock.Delay{Min: time.Millisecond, Max: time.Millisecond}
	})
	for i, o := range buyQueued(t, t.Context(), svc, g, 4) {
		if !errors.Is(o.err, stock.ErrFenced) {
			t.Errorf("buyer %d: got %v, want ErrFenced", i, o.err)
		}
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 10})
}

// The batch write's reply is lost after it ran: the retry (go-redis's or
// the service's) finds the receipt, so the batch sells once and every
// member is told it sold.
func TestCombineLostBatchReplySellsOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries int
	}{{"client retries", 3}, {"service retries", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 6
			s, hop := lossyStore(t, 10, tc.retries)
			hop.Lose([]byte("lucky"), 1)
			g := gated(locallock.New())
			svc := newService(s, g, func(c *stock.ServiceConfig) { c.Fencing, c.Combine = true, true })
			for i, o := range buyQueued(t, t.Context(), svc, g, n) {
				if o.err != nil {
					t.Fatalf("buyer %d: got %v, want a confirmed sale", i, o.err)
				}
			}
			if hop.Lost() != 1 {
				t.Fatalf("lost %d replies, want 1: the fault did not happen", hop.Lost())
			}
			storetest.WantStatus(t, s, stock.Status{Stock: 10 - n, Lucky: n})
		})
	}
}

// No reply at all to the batch write: every member is unconfirmed with its
// own attempt, and the receipts settle it — the first k sold, in order, the
// rest did not.
func TestCombineUnconfirmedBatchSettledByReceipts(t *testing.T) {
	const units, n = 3, 5
	s, hop := lossyStore(t, units, -1)
	hop.Lose([]byte("lucky"), 1<<30)
	g := gated(locallock.New())
	svc := newService(s, g, func(c *stock.ServiceConfig) {
		c.Fencing, c.Combine = true, true
		c.ConfirmTimeout = 300 * time.Millisecond
	})
	out := buyQueued(t, t.Context(), svc, g, n)
	hop.Lose(nil, 0)
	var sold int
	seen := map[string]bool{}
	for i, o := range out {
		var ue *stock.UnconfirmedError
		if !errors.As(o.err, &ue) {
			t.Fatalf("buyer %d: got %v, want an UnconfirmedError", i, o.err)
		}
		if seen[ue.Attempt] {
			t.Fatalf("attempt %s given to two buyers", ue.Attempt)
		}
		seen[ue.Attempt] = true
		after, ok, err := s.Receipt(t.Context(), ue.Attempt)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			sold++
			if after < 0 || after >= units {
				t.Errorf("receipt of %s: stock after %d, want in [0, %d)", ue.Attempt, after, units)
			}
		}
	}
	if sold != units {
		t.Fatalf("got %d receipts saying sold, want %d", sold, units)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 0, Lucky: units})
}

// A buyer whose context ends while it is queued leaves the queue at once
// and is in no batch; the others are sold.
func TestCombineCancelWhileQueued(t *testing.T) {
	s, _ := newStore(t, 10)
	g := gated(locallock.New())
	svc := newService(s, g, func(c *stock.ServiceConfig) { c.Fencing, c.Combine = true, true })
	var wg sync.WaitGroup
	var first, last outcome
	wg.Go(func() { first.sale, first.err = svc.Reduce(t.Context()) })
	for !svc.Gathering(0) {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(t.Context())
	left := make(chan error, 1)
	go func() { _, err := svc.Reduce(ctx); left <- err }()
	waitQueued(t, svc, 0, 1)
	wg.Go(func() { last.sale, last.err = svc.Reduce(t.Context()) })
	waitQueued(t, svc, 0, 2)
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled buyer: got %v, want context.Canceled", err)
	}
	waitQueued(t, svc, 0, 1)
	close(g.open)
	wg.Wait()
	if first.err != nil || last.err != nil {
		t.Fatalf("got %v and %v, want two sales", first.err, last.err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 8, Lucky: 2})
	if svc.Gathering(0) || svc.Queued(0) != 0 {
		t.Fatal("combiner not idle after the sale")
	}
}

// The gatherer's own context ending while it waits for the lock passes the
// role to the first queued buyer, who sells to the rest.
func TestCombineGathererCancelPassesOn(t *testing.T) {
	s, _ := newStore(t, 10)
	g := gated(locallock.New())
	svc := newService(s, g, func(c *stock.ServiceConfig) { c.Fencing, c.Combine = true, true })
	ctx, cancel := context.WithCancel(t.Context())
	gone := make(chan error, 1)
	go func() { _, err := svc.Reduce(ctx); gone <- err }()
	for !svc.Gathering(0) {
		time.Sleep(time.Millisecond)
	}
	out := make([]outcome, 3)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { out[i].sale, out[i].err = svc.Reduce(t.Context()) })
	}
	waitQueued(t, svc, 0, 3)
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled gatherer: got %v, want context.Canceled", err)
	}
	wg.Wait()
	for i, o := range out {
		if o.err != nil {
			t.Fatalf("buyer %d: %v", i, o.err)
		}
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 7, Lucky: 3})
}

// A buyer whose context ends after its batch was taken still gets the
// batch's answer: the batch runs on, detached from any one member.
func TestCombineCancelAfterTakenGetsTheAnswer(t *testing.T) {
	s, _ := newStore(t, 10)
	ctx, cancel := context.WithCancel(t.Context())
	l := newFakeLease(1)
	l.onDone = cancel // in the batch's work delay: every member is taken
	g := gated(one(l))
	svc := newService(s, g, func(c *stock.ServiceConfig) {
		c.Fencing, c.Combine = true, true
		c.Delay = stock.Delay{Min: 5 * time.Millisecond, Max: 5 * time.Millisecond}
	})
	for i, o := range buyQueued(t, ctx, svc, g, 3) {
		if o.err != nil {
			t.Fatalf("buyer %d: got %v, want its sale", i, o.err)
		}
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 7, Lucky: 3})
}

// failFirst fails its first Acquire, once open is closed, with the lock
// server unreachable; then it is the Locker it wraps.
type failFirst struct {
	lock.Locker
	open  chan struct{}
	first atomic.Bool
}

func (f *failFirst) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	if f.first.CompareAndSwap(false, true) {
		<-f.open
		return nil, fmt.Errorf("%w: test", lock.ErrUnavailable)
	}
	return f.Locker.Acquire(ctx, key)
}

// The gatherer's acquire fails: it gets the error, and the first queued
// buyer acquires for itself and sells to the rest.
func TestCombineFailedAcquirePassesOn(t *testing.T) {
	s, _ := newStore(t, 10)
	f := &failFirst{Locker: locallock.New(), open: make(chan struct{})}
	svc := newService(s, f, func(c *stock.ServiceConfig) { c.Fencing, c.Combine = true, true })
	out := make([]outcome, 4)
	var wg sync.WaitGroup
	wg.Go(func() { out[0].sale, out[0].err = svc.Reduce(t.Context()) })
	for !svc.Gathering(0) {
		time.Sleep(time.Millisecond)
	}
	for i := 1; i < len(out); i++ {
		wg.Go(func() { out[i].sale, out[i].err = svc.Reduce(t.Context()) })
	}
	waitQueued(t, svc, 0, len(out)-1)
	close(f.open)
	wg.Wait()
	if !errors.Is(out[0].err, lock.ErrUnavailable) {
		t.Fatalf("gatherer: got %v, want lock.ErrUnavailable", out[0].err)
	}
	for i, o := range out[1:] {
		if o.err != nil {
			t.Fatalf("buyer %d: %v", i+1, o.err)
		}
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 7, Lucky: 3})
	if svc.Gathering(0) || svc.Queued(0) != 0 {
		t.Fatal("combiner not idle after the sale")
	}
}
