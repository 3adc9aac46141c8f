package redislock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"seckill/internal/lock/locktest"
	"seckill/internal/lock/redislock"
	"seckill/internal/servers/servertest"
)

// BenchmarkAcquireRelease is the uncontended cost: one acquire and one
// release round trip, beside redsync's (SET NX PX, then a GET/DEL script)
// on the same server, with what each costs Redis per cycle (the goal is
// redislock ≥ 1.0× redsync with one contender).
func BenchmarkAcquireRelease(b *testing.B) {
	srv := servertest.Redis(b)
	b.Run("redislock", func(b *testing.B) {
		lk, _ := newLocker(b, srv, 10*time.Second)
		key := locktest.Key(b)
		ctx := context.Background()
		serverCPU := servertest.ServerCPU(b, srv)
		for b.Loop() {
			l, err := lk.Acquire(ctx, key)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		serverCPU()
		reportStats(b, lk)
	})
	b.Run("redsync", func(b *testing.B) {
		c := newClient(b, srv)
		m := redsync.New(goredis.NewPool(c)).NewMutex(locktest.Key(b))
		ctx := context.Background()
		serverCPU := servertest.ServerCPU(b, srv)
		for b.Loop() {
			if err := m.LockContext(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := m.UnlockContext(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		serverCPU()
	})
}

// BenchmarkContended50 is the flash sale: 50 goroutines over three Lockers
// (three "processes" with their own connections) on one key. It reports
// acquisitions per second, acquire calls per acquisition, and the share of
// the busiest goroutine relative to a fair share.
func BenchmarkContended50(b *testing.B) {
	const goroutines, lockers = 50, 3
	srv := servertest.Redis(b)
	lks := make([]*redislock.Locker, lockers)
	for i := range lks {
		lks[i], _ = newLocker(b, srv, 10*time.Second)
	}
	key := locktest.Key(b)
	ctx := context.Background()
	var (
		left  atomic.Int64
		wg    sync.WaitGroup
		share = make([]int64, goroutines)
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lk := lks[g%lockers]
			for {
				l, err := lk.Acquire(ctx, key)
				if err != nil {
					b.Error(err)
					return
				}
				n := left.Add(-1)
				if n >= 0 {
					share[g]++
				}
				_ = l.Release(ctx)
				if n <= 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "sales/s")
	var most int64
	for _, n := range share {
		most = max(most, n)
	}
	b.ReportMetric(float64(most)/(float64(b.N)/goroutines), "max/fair")
	reportStats(b, lks...)
}

func reportStats(b *testing.B, lks ...*redislock.Locker) {
	var s redislock.Stats
	for _, lk := range lks {
		st := lk.Stats()
		s.Acquired += st.Acquired
		s.AcquireCalls += st.AcquireCalls
		s.Handoffs += st.Handoffs
		s.LocalHandoffs += st.LocalHandoffs
	}
	b.ReportMetric(float64(s.AcquireCalls)/float64(s.Acquired), "acquirecalls/acq")
	b.ReportMetric(float64(s.Handoffs)/float64(s.Acquired), "handoffs/acq")
	b.ReportMetric(float64(s.LocalHandoffs)/float64(s.Acquired), "localhandoffs/acq")
}
