package redissonlock

import (
	"sync"
	"testing"
	"time"

	"seckill/internal/lock/locktest"
	"seckill/internal/testwait"
)

// Each release must wake one waiter per process, not every waiting
// goroutine: with 30 goroutines on 3 lockers a herd costs about 30 acquire
// attempts per sale; the per-key FIFO costs about 3 (one head per locker).
func TestOneWakeupPerProcess(t *testing.T) {
	const (
		perLocker = 10
		rounds    = 15
	)
	addr := startRedis(t)
	lockers := []*Locker{
		newLocker(t, addr, Options{}),
		newLocker(t, addr, Options{}),
		newLocker(t, addr, Options{}),
	}
	key := locktest.Key(t)
	until := testwait.Until(t)
	var wg sync.WaitGroup
	errs := make(chan error, len(lockers)*perLocker)
	for _, lk := range lockers {
		for range perLocker {
			wg.Go(func() {
				for range rounds {
					l, err := lk.Acquire(until, key)
					if err != nil {
						errs <- err
						return
					}
					time.Sleep(200 * time.Microsecond) // the sale's work
					if err := l.Release(t.Context()); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var scripts, acquired, wakeups uint64
	for i, lk := range lockers {
		s := lk.Stats()
		t.Logf("locker %d: %+v (%.2f attempts per own sale)", i, s, float64(s.AcquireScripts)/float64(s.Acquired))
		scripts += s.AcquireScripts
		acquired += s.Acquired
		wakeups += s.Wakeups
	}
	sales := uint64(len(lockers) * perLocker * rounds)
	if acquired != sales {
		t.Fatalf("Acquired = %d, want %d", acquired, sales)
	}
	perSale := float64(scripts) / float64(sales)
	t.Logf("%d sales: %d acquire scripts (%.2f per sale), %d wake-ups (%.2f per sale)",
		sales, scripts, perSale, wakeups, float64(wakeups)/float64(sales))
	// One head per locker gives ≈ len(lockers); allow stale notes and
	// fast-path attempts, but stay far below a herd of 30.
	if limit := 2.0 * float64(len(lockers)); perSale > limit {
		t.Fatalf("%.2f acquire attempts per sale, want ≤ %.1f (one waiter woken per process)", perSale, limit)
	}
	if wakeups > sales*uint64(len(lockers))+10 {
		t.Fatalf("%d wake-ups for %d sales, want at most one per locker per release", wakeups, sales)
	}
}
