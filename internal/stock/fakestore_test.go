package stock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/locallock"
	"seckill/internal/stock"
	"seckill/internal/testwait"
)

// The Service sells through stock.Store alone, so it runs on a store in
// memory: these tests need no Redis. What the store itself promises (the
// scripts, the fence, exactly-once) is tested on a real Redis in
// package redisstore.

// memStore is a stock.Store in memory: one segment, no ledger.
type memStore struct{ seg *memSegment }

func (m *memStore) Segments() int             { return 1 }
func (m *memStore) Segment(int) stock.Segment { return m.seg }
func (m *memStore) Ledger() bool              { return false }
func (m *memStore) SegmentStocks(context.Context) ([]int64, error) {
	m.seg.mu.Lock()
	defer m.seg.mu.Unlock()
	return []int64{m.seg.stock}, nil
}

// memSegment keeps the stock, the units sold and the fence's highest
// token: a read under a token below it, or a write under any other, is
// refused, as the fenced scripts refuse them.
type memSegment struct {
	mu           sync.Mutex
	stock, lucky int64
	highest      uint64
	reader       string // the lease of the last accepted read
	peeks        int    // reads without the lock
}

func (g *memSegment) Read(_ context.Context, f stock.Fence, _ bool) (stock.Reading, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f.Token < g.highest {
		return stock.Reading{}, &stock.FencedError{Lock: f.Lock, Token: f.Token, Highest: g.highest}
	}
	g.highest, g.reader = f.Token, f.Lease
	return stock.Reading{Stock: g.stock}, nil
}

func (g *memSegment) Write(_ context.Context, f stock.Fence, newStock int64, units int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f.Token != g.highest || f.Lease != g.reader {
		return &stock.FencedError{Lock: f.Lock, Token: f.Token, Highest: g.highest}
	}
	g.stock, g.lucky = newStock, g.lucky+int64(max(units, 1))
	return nil
}

func (g *memSegment) WriteLedger(context.Context, stock.Fence, int64, []stock.Member, stock.LedgerArgs) ([]stock.Verdict, error) {
	return nil, errors.New("memSegment: no ledger")
}

func (g *memSegment) ReadUnfenced(context.Context) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stock, nil
}

func (g *memSegment) WriteUnfenced(_ context.Context, newStock int64, units int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stock, g.lucky = newStock, g.lucky+int64(units)
	return nil
}

func (g *memSegment) SellAtomic(context.Context, string) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stock <= 0 {
		return 0, stock.ErrSoldOut
	}
	g.stock--
	g.lucky++
	return g.stock, nil
}

func (g *memSegment) SellLedger(context.Context, string, stock.Buyer, stock.LedgerArgs) (stock.Verdict, error) {
	return stock.Verdict{}, errors.New("memSegment: no ledger")
}

func (g *memSegment) Peek(ctx context.Context, _ stock.Buyer) (int64, bool, error) {
	g.mu.Lock()
	g.peeks++
	g.mu.Unlock()
	n, err := g.ReadUnfenced(ctx)
	return n, false, err
}

func (g *memSegment) AwaitWitness(context.Context) error           { return nil }
func (g *memSegment) HaltWitnessLost(context.Context, error) error { return nil }

// Every mode of the sale on a store in memory: 50 buyers at once for 20
// units sell exactly 20, and the other 30 are answered sold out.
func TestServiceSellsExactlyOnAStoreInMemory(t *testing.T) {
	const units, buyers = 20, 50
	for _, tc := range []struct {
		name string
		cfg  stock.ServiceConfig
	}{
		{"locked, fenced", stock.ServiceConfig{Mode: stock.ModeLocked, Fencing: true}},
		{"locked, combined", stock.ServiceConfig{Mode: stock.ModeLocked, Fencing: true, Combine: true}},
		{"atomic", stock.ServiceConfig{Mode: stock.ModeAtomic}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seg := &memSegment{stock: units}
			cfg := tc.cfg
			cfg.Store, cfg.Locker, cfg.Backend, cfg.LockKey = &memStore{seg: seg}, locallock.New(), "local", "k"
			svc := stock.NewService(cfg)
			var wg sync.WaitGroup
			errs := make(chan error, buyers)
			for range buyers {
				wg.Go(func() {
					_, err := svc.Reduce(t.Context())
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			sold, soldOut := 0, 0
			for err := range errs {
				switch {
				case err == nil:
					sold++
				case errors.Is(err, stock.ErrSoldOut):
					soldOut++
				default:
					t.Errorf("a buyer got %v", err)
				}
			}
			if sold != units || soldOut != buyers-units || seg.stock != 0 || seg.lucky != units {
				t.Fatalf("sold %d, sold out %d, store stock %d lucky %d; want %d, %d, 0, %d",
					sold, soldOut, seg.stock, seg.lucky, units, buyers-units, units)
			}
		})
	}
}

// A store that refuses the read as fenced (a newer holder has read) sells
// nothing, and the buyer is told it was fenced.
func TestServiceAnswersAFencedRead(t *testing.T) {
	seg := &memSegment{stock: 5, highest: 1 << 40}
	svc := stock.NewService(stock.ServiceConfig{Store: &memStore{seg: seg}, Locker: locallock.New(),
		Mode: stock.ModeLocked, Fencing: true, Backend: "local", LockKey: "k"})
	_, err := svc.Reduce(t.Context())
	var fe *stock.FencedError
	if !errors.Is(err, stock.ErrFenced) || !errors.As(err, &fe) || !fe.Stale() {
		t.Fatalf("sale under a stale token: %v; want a stale *FencedError", err)
	}
	if seg.stock != 5 || seg.lucky != 0 {
		t.Fatalf("store after a fenced sale: stock %d lucky %d; want 5, 0", seg.stock, seg.lucky)
	}
}

// countingLocker counts the leases it grants.
type countingLocker struct {
	lock.Locker
	grants atomic.Int64
}

func (c *countingLocker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	c.grants.Add(1)
	return c.Locker.Acquire(ctx, key)
}

// While this process's last section left units, a winner goes to the lock
// without reading the stock first (peek.go); once a section left 0 the
// next buyer reads, and is answered sold out without the lock. A hint gone
// stale (another replica sold the rest) costs one turn at the lock, whose
// read answers sold out and sets the hint to 0.
func TestWinnersSkipTheReadWithoutTheLock(t *testing.T) {
	for _, tc := range []struct {
		name    string
		combine bool
	}{{"locked", false}, {"combined", true}} {
		t.Run(tc.name, func(t *testing.T) {
			seg := &memSegment{stock: 3}
			lk := &countingLocker{Locker: locallock.New()}
			svc := stock.NewService(stock.ServiceConfig{Store: &memStore{seg: seg}, Locker: lk,
				Mode: stock.ModeLocked, Fencing: true, Combine: tc.combine, Backend: "local", LockKey: "k"})
			step := func(what string, wantErr error, peeks int, grants int64) {
				t.Helper()
				_, err := svc.Reduce(t.Context())
				if !errors.Is(err, wantErr) && !(wantErr == nil && err == nil) {
					t.Fatalf("%s: got %v, want %v", what, err, wantErr)
				}
				seg.mu.Lock()
				got := seg.peeks
				seg.mu.Unlock()
				if got != peeks || lk.grants.Load() != grants {
					t.Fatalf("%s: %d reads without the lock, %d grants; want %d, %d", what, got, lk.grants.Load(), peeks, grants)
				}
			}
			step("the first buyer (nothing known)", nil, 1, 1)
			step("a buyer after a section that left 2", nil, 1, 2)
			seg.mu.Lock()
			seg.stock = 0 // another replica sold the last unit
			seg.mu.Unlock()
			step("a buyer on a stale hint", stock.ErrSoldOut, 1, 3)
			step("the buyer after the section that read 0", stock.ErrSoldOut, 2, 3)
		})
	}
}

// A buyer the lock's queue is too full for is told busy only while units
// remain: one who skipped the read on a stale hint reads before it is
// shed, and is answered sold out.
func TestShedOnAStaleHintReadsFirst(t *testing.T) {
	seg := &memSegment{stock: 3}
	inner := locallock.New()
	lk := &countingLocker{Locker: inner}
	svc := stock.NewService(stock.ServiceConfig{Store: &memStore{seg: seg}, Locker: lk,
		Mode: stock.ModeLocked, Fencing: true, Backend: "local", LockKey: "k",
		Shed: true, MaxQueue: 1, WaitTimeout: time.Minute})
	ctx := t.Context()
	if _, err := svc.Reduce(ctx); err != nil {
		t.Fatal(err) // the hint: 2 left
	}
	seg.mu.Lock()
	seg.stock = 0 // another replica sold the rest
	seg.mu.Unlock()
	hold, err := inner.Acquire(ctx, stock.SegmentKey("k", 0))
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan error, 1)
	go func() {
		_, err := svc.Reduce(ctx) // admitted: the queue's one place
		queued <- err
	}()
	until := testwait.Until(t)
	for lk.grants.Load() != 2 {
		if until.Err() != nil {
			t.Fatal("the second buyer never asked for the lock")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := svc.Reduce(ctx); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("a buyer shed on a stale hint: got %v, want sold out", err)
	}
	select {
	case err := <-queued:
		t.Fatalf("the queued buyer answered (%v) while the lock was held", err)
	default:
	}
	if err := hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-queued; !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("the queued buyer: got %v, want sold out from its read under the lock", err)
	}
}
