package stock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/stock"
	"seckill/internal/stock/storetest"
	"seckill/internal/testwait"
)

// gatedStore holds every write until its gate opens, and counts the
// writes waiting at it.
type gatedStore struct {
	memStore
	gate   chan struct{}
	atGate atomic.Int64
}

type gatedSegment struct {
	*memSegment
	s *gatedStore
}

func (g *gatedStore) Segment(int) stock.Segment { return gatedSegment{g.seg, g} }

func (g gatedSegment) Write(ctx context.Context, f stock.Fence, newStock int64, units int) error {
	g.s.atGate.Add(1)
	<-g.s.gate
	return g.memSegment.Write(ctx, f, newStock, units)
}

// until polls cond until it holds, failing the test at its deadline.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := testwait.Until(t)
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// bellSale is a locked, fenced sale of units on a gated store, whose
// first buyer holds the lock at the gate while n others queue behind it.
type bellSale struct {
	svc   *stock.Service
	store *gatedStore
	lk    *storetest.TurnLocker
	errs  chan error
	wg    sync.WaitGroup
}

func queueBehindAHolder(t *testing.T, units int64, n int, combine bool) *bellSale {
	x := &bellSale{
		store: &gatedStore{memStore: memStore{seg: &memSegment{stock: units}}, gate: make(chan struct{})},
		lk:    storetest.NewTurnLocker(),
		errs:  make(chan error, n+1),
	}
	x.svc = stock.NewService(stock.ServiceConfig{Store: x.store, Locker: x.lk, Mode: stock.ModeLocked,
		Fencing: true, Combine: combine, Backend: "turn", LockKey: "k", WaitTimeout: time.Hour})
	buy := func() {
		x.wg.Go(func() {
			_, err := x.svc.Reduce(context.Background())
			x.errs <- err
		})
	}
	buy()
	until(t, "the first buyer holds the lock at the gate", func() bool { return x.store.atGate.Load() == 1 })
	for range n {
		buy()
	}
	if combine {
		// One gatherer waits for the lock; the rest queue behind it.
		until(t, fmt.Sprintf("%d queued to combine", n-1), func() bool {
			return x.lk.Waiting.Load() == 1 && x.svc.Queued(0) == n-1
		})
	} else {
		until(t, fmt.Sprintf("%d waiting for the lock", n), func() bool { return x.lk.Waiting.Load() == int64(n) })
	}
	return x
}

// results opens the gate and counts the answers.
func (x *bellSale) results(t *testing.T) (sold, soldOut int) {
	close(x.store.gate)
	x.wg.Wait()
	close(x.errs)
	for err := range x.errs {
		switch {
		case err == nil:
			sold++
		case errors.Is(err, stock.ErrSoldOut):
			soldOut++
		default:
			t.Errorf("a buyer got %v", err)
		}
	}
	return sold, soldOut
}

// When the holder sells the last unit, the buyers queued behind it are
// answered sold out without taking the lock: one grant in all, not one
// per buyer (without the bell each of the 20 takes its turn to read 0).
func TestSoldOutReachesTheQueueAtOnce(t *testing.T) {
	for _, combine := range []bool{false, true} {
		t.Run(fmt.Sprintf("combine=%v", combine), func(t *testing.T) {
			const n = 20
			x := queueBehindAHolder(t, 1, n, combine)
			sold, soldOut := x.results(t)
			if sold != 1 || soldOut != n {
				t.Fatalf("sold %d, sold out %d; want 1, %d", sold, soldOut, n)
			}
			if g := x.lk.Granted.Load(); g != 1 {
				t.Fatalf("the lock was granted %d times; want 1: the queue took turns to read 0", g)
			}
			if x.store.seg.stock != 0 || x.store.seg.lucky != 1 {
				t.Fatalf("store: stock %d lucky %d; want 0, 1", x.store.seg.stock, x.store.seg.lucky)
			}
		})
	}
}

// A ring with units left (a bell gone wrong) decides nothing: the woken
// buyers read the stock again, find units, go back to the lock and buy
// them, and every unit sells.
func TestBellRungWithStockLeftSellsEveryUnit(t *testing.T) {
	for _, combine := range []bool{false, true} {
		t.Run(fmt.Sprintf("combine=%v", combine), func(t *testing.T) {
			const units, n = 5, 20
			x := queueBehindAHolder(t, units, n, combine)
			before := x.lk.Acquires.Load()
			stock.RingForTest(x.svc, 0)
			if !combine {
				// Every waiter woke, read 5 left, and came back to the lock.
				until(t, "the woken buyers back at the lock", func() bool {
					return x.lk.Acquires.Load() == before+n && x.lk.Waiting.Load() == n
				})
			}
			sold, soldOut := x.results(t)
			if sold != units || soldOut != n+1-units {
				t.Fatalf("sold %d, sold out %d; want %d, %d", sold, soldOut, units, n+1-units)
			}
			if x.store.seg.stock != 0 || x.store.seg.lucky != units {
				t.Fatalf("store: stock %d lucky %d; want 0, %d", x.store.seg.stock, x.store.seg.lucky, units)
			}
		})
	}
}
