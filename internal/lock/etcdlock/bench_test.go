package etcdlock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"seckill/internal/lock/etcdlock"
	"seckill/internal/servers/servertest"
)

// Acquire+Release of a free lock: one enqueue Txn and one guarded delete.
func BenchmarkAcquireUncontended(b *testing.B) {
	c := newCluster(b)
	lk := c.locker(b, 10*time.Second)
	key := testKey(b)
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

// 16 contenders hand one lock around. "raw" is the baseline: one plain
// concurrency.Mutex per contender, each on its own session, as a user of
// etcd's package would write it. The others spread the contenders over 1, 4
// or 16 Lockers (processes); "cohort=K" spreads them over 3 Lockers with
// Options.LocalHandoffs K (-1: no hand-over). Reported
// as handoffs/s.
func BenchmarkContended(b *testing.B) {
	const contenders = 16
	c := newCluster(b)
	b.Run("raw", func(b *testing.B) {
		key := "/bench/raw/" + testKey(b)
		mutexes := make([]*concurrency.Mutex, contenders)
		for i := range mutexes {
			s, err := concurrency.NewSession(servertest.EtcdClient(b, c.addr), concurrency.WithTTL(10))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			mutexes[i] = concurrency.NewMutex(s, key)
		}
		run(b, contenders, func(ctx context.Context, i int) error {
			m := mutexes[i]
			if err := m.Lock(ctx); err != nil {
				return err
			}
			return m.Unlock(ctx)
		})
	})
	type variant struct {
		name     string
		lockers  int
		handoffs int
	}
	variants := []variant{{"lockers=1", 1, 0}, {"lockers=4", 4, 0}, {"lockers=16", 16, 0}}
	for _, k := range []int{-1, 1, 8, 32} {
		variants = append(variants, variant{fmt.Sprintf("lockers=3/cohort=%d", k), 3, k})
	}
	for _, v := range variants {
		nl := v.lockers
		b.Run(v.name, func(b *testing.B) {
			key := testKey(b)
			lockers := make([]*etcdlock.Locker, nl)
			for i := range lockers {
				lockers[i] = c.lockerWith(b, 10*time.Second, etcdlock.Options{LocalHandoffs: v.handoffs})
			}
			run(b, contenders, func(ctx context.Context, i int) error {
				l, err := lockers[i%nl].Acquire(ctx, key)
				if err != nil {
					return err
				}
				return l.Release(ctx)
			})
		})
	}
}

// run has n goroutines call once until b.N calls are done in total.
func run(b *testing.B, n int, once func(ctx context.Context, i int) error) {
	b.Helper()
	ctx := b.Context()
	var (
		left atomic.Int64
		wg   sync.WaitGroup
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := once(ctx, i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "handoffs/s")
}
