package redissonlock

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"seckill/internal/lock/locktest"
)

// BenchmarkUncontended is one Acquire+Release pair with no one waiting: two
// script round trips and a watchdog timer armed and stopped.
func BenchmarkUncontended(b *testing.B) {
	addr := startRedis(b)
	lk := newLocker(b, addr, Options{})
	key := locktest.Key(b)
	ctx := context.Background()
	for b.Loop() {
		l, err := lk.Acquire(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkContended50 is the flash sale: 50 goroutines over 3 lockers
// ("processes") on one key, b.N sales in total.
func BenchmarkContended50(b *testing.B) {
	addr := startRedis(b)
	lockers := []*Locker{newLocker(b, addr, Options{}), newLocker(b, addr, Options{}), newLocker(b, addr, Options{})}
	key := locktest.Key(b)
	contend(b, func(g int) (func(context.Context) error, error) {
		lk := lockers[g%len(lockers)]
		return func(ctx context.Context) error {
			l, err := lk.Acquire(ctx, key)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}, nil
	})
	var scripts uint64
	for _, lk := range lockers {
		scripts += lk.Stats().AcquireScripts
	}
	b.ReportMetric(float64(scripts)/float64(b.N), "scripts/sale")
}

// BenchmarkRedsyncContended50 is the same sale through redsync with its
// default polling retry, the bar to clear.
func BenchmarkRedsyncContended50(b *testing.B) {
	addr := startRedis(b)
	var rss []*redsync.Redsync
	for range 3 {
		rss = append(rss, redsync.New(goredis.NewPool(newClient(b, addr))))
	}
	key := locktest.Key(b)
	contend(b, func(g int) (func(context.Context) error, error) {
		m := rss[g%len(rss)].NewMutex(key, redsync.WithTries(math.MaxInt32), redsync.WithExpiry(30*time.Second))
		return func(ctx context.Context) error {
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			_, err := m.UnlockContext(ctx)
			return err
		}, nil
	})
}

// contend runs b.N sales spread over 50 goroutines and reports sales/s.
func contend(b *testing.B, newSale func(g int) (func(context.Context) error, error)) {
	b.Helper()
	const goroutines = 50
	ctx := context.Background()
	var (
		left atomic.Int64
		wg   sync.WaitGroup
		errs = make(chan error, goroutines)
	)
	sales := make([]func(context.Context) error, goroutines)
	for g := range sales {
		sale, err := newSale(g)
		if err != nil {
			b.Fatal(err)
		}
		sales[g] = sale
	}
	left.Store(int64(b.N))
	b.ResetTimer()
	for _, sale := range sales {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := sale(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sales/s")
}
