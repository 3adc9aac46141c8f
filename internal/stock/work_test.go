package stock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"seckill/internal/stock"
	"seckill/internal/stock/storetest"
)

// A combined batch does the business work of each buyer it may sell to,
// as the articles' sale does once per request: a batch of 4 with units
// for 3 works 3 times. Without that, combining would win by skipping the
// work, not by saving the lock's round trips. (A lower bound on the time:
// no machine finishes timers early.)
func TestCombinedBatchWorksForEachBuyer(t *testing.T) {
	const work = 30 * time.Millisecond
	store := &gatedStore{memStore: memStore{seg: &memSegment{stock: 4}}, gate: make(chan struct{})}
	lk := storetest.NewTurnLocker()
	svc := stock.NewService(stock.ServiceConfig{Store: store, Locker: lk, Mode: stock.ModeLocked, Fencing: true,
		Combine: true, Backend: "turn", LockKey: "k", WaitTimeout: time.Hour, Delay: stock.FixedDelay(work)})
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	buy := func() {
		wg.Go(func() {
			_, err := svc.Reduce(context.Background())
			errs <- err
		})
	}
	buy() // sells 1 of 4, held at the gate
	until(t, "the first buyer at the gate", func() bool { return store.atGate.Load() == 1 })
	for range 4 {
		buy()
	}
	until(t, "a gatherer and 3 queued", func() bool { return lk.Waiting.Load() == 1 && svc.Queued(0) == 3 })
	start := time.Now()
	close(store.gate) // the batch of 4 reads 3 units left
	wg.Wait()
	took := time.Since(start)
	close(errs)
	sold := 0
	for err := range errs {
		if err == nil {
			sold++
		}
	}
	if sold != 4 {
		t.Fatalf("sold %d, want the 4 units", sold)
	}
	if took < 3*work {
		t.Fatalf("the batch of 4 for 3 units took %v, want at least 3 × %v of work", took, work)
	}
}
