package zklock

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"seckill/internal/lock/locktest"
	"seckill/internal/servers/servertest"
	"seckill/internal/zksess"
	"seckill/internal/zksess/zksesstest"
)

// Contended benchmarks use the same shape for zklock and the raw zk.Lock
// baseline: benchContenders goroutines spread over benchSessions sessions
// ("processes"), all on one key, each doing its share of b.N
// acquire/release cycles. lock/s is the figure to compare (the goal asks for
// ≥1.5× raw zk.Lock).
const (
	benchSessions   = 4
	benchContenders = 16
)

func benchSessionsFor(b *testing.B, addr string) []*zksess.Session {
	b.Helper()
	ss := make([]*zksess.Session, benchSessions)
	for i := range ss {
		ss[i] = zksesstest.Dial(b, addr, 10*time.Second)
	}
	return ss
}

func BenchmarkAcquireRelease(b *testing.B) {
	srv := servertest.ZooKeeper(b)
	ss := benchSessionsFor(b, srv.Addr())

	b.Run("uncontended", func(b *testing.B) {
		lk := New(ss[0], Options{})
		defer lk.Close()
		key := locktest.Key(b)
		serverCPU := servertest.ServerCPU(b, srv)
		for b.Loop() {
			l, err := lk.Acquire(b.Context(), key)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lock/s")
		serverCPU()
	})

	// The same loop on go-zookeeper's own Lock, side by side: the goal is
	// zklock ≥ 1.0× this uncontended.
	b.Run("raw-zk.Lock-uncontended", func(b *testing.B) {
		m := zk.NewLock(ss[0].Conn(), "/bench-raw/"+locktest.Key(b), zk.WorldACL(zk.PermAll))
		serverCPU := servertest.ServerCPU(b, srv)
		for b.Loop() {
			if err := m.Lock(); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lock/s")
		serverCPU()
	})

	b.Run(fmt.Sprintf("contended-%dx%d", benchSessions, benchContenders/benchSessions), func(b *testing.B) {
		lockers := make([]*Locker, len(ss))
		for i, s := range ss {
			lockers[i] = New(s, Options{})
			defer lockers[i].Close()
		}
		key := locktest.Key(b)
		runContended(b, func(g int) (func() error, func() error) {
			lk := lockers[g%len(lockers)]
			var release func() error
			return func() error {
					l, err := lk.Acquire(b.Context(), key)
					if err == nil {
						release = func() error { return l.Release(b.Context()) }
					}
					return err
				}, func() error {
					return release()
				}
		})
	})

	b.Run(fmt.Sprintf("raw-zk.Lock-contended-%dx%d", benchSessions, benchContenders/benchSessions), func(b *testing.B) {
		path := "/bench-raw/" + locktest.Key(b)
		runContended(b, func(g int) (func() error, func() error) {
			m := zk.NewLock(ss[g%len(ss)].Conn(), path, zk.WorldACL(zk.PermAll))
			return m.Lock, m.Unlock
		})
	})
}

// runContended runs b.N lock/unlock cycles over benchContenders goroutines;
// mk returns the lock and unlock functions of goroutine g.
func runContended(b *testing.B, mk func(g int) (lock, unlock func() error)) {
	b.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		left = b.N
	)
	take := func() bool {
		mu.Lock()
		defer mu.Unlock()
		left--
		return left >= 0
	}
	b.ResetTimer()
	start := time.Now()
	for g := range benchContenders {
		lockFn, unlockFn := mk(g)
		wg.Go(func() {
			for take() {
				if err := lockFn(); err != nil {
					b.Error(err)
					return
				}
				if err := unlockFn(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lock/s")
}
