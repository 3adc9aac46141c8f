package mysqllock

import (
	"testing"
	"time"

	"seckill/internal/lock/locktest"
)

// BenchmarkAcquireRelease is one uncontended acquisition and release per
// iteration, through the server each time (no local waiter to pass to):
// GET_LOCK or the locking read, the token mint (an fsynced commit), and
// RELEASE_LOCK or ROLLBACK.
func BenchmarkAcquireRelease(b *testing.B) {
	srv := newServer(b)
	for _, backend := range backends {
		b.Run(backend, func(b *testing.B) {
			lk := newLocker(b, backend, srv.dsn, Config{})
			key := locktest.Key(b)
			var acquire time.Duration
			for b.Loop() {
				start := time.Now()
				l, err := lk.Acquire(b.Context(), key)
				if err != nil {
					b.Fatal(err)
				}
				acquire += time.Since(start)
				if err := l.Release(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(acquire.Microseconds())/float64(b.N), "acquire-µs")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lock/s")
		})
	}
}
