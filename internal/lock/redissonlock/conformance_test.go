package redissonlock

import (
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
)

// TestConformance runs the shared lock contract against a real redis-server.
// The short watchdog makes the suite's three-TTL holds exercise renewal.
func TestConformance(t *testing.T) {
	addr := startRedis(t)
	admin := newClient(t, addr)
	var (
		mu      sync.Mutex
		clients = map[lock.Locker]*redis.Client{}
	)
	locktest.Run(t, locktest.Env{
		New: func(t *testing.T, o lock.Options) lock.Locker {
			c := newClient(t, addr)
			lk := New(c, Options{Watchdog: o.TTL})
			mu.Lock()
			clients[lk] = c
			mu.Unlock()
			return lk
		},
		Exclusive: true,
		Processes: true,
		Expiry:    true,
		Reentrant: true,
		TTL:       600 * time.Millisecond,
		// A dead process neither renews nor releases: cut its connection.
		Crash: func(t *testing.T, lk lock.Locker) {
			mu.Lock()
			c := clients[lk]
			mu.Unlock()
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		},
		Steal: func(t *testing.T, l lock.Lease) {
			if n, err := admin.Del(t.Context(), l.Key()).Result(); err != nil || n != 1 {
				t.Fatalf("DEL %q = %d, %v; want 1", l.Key(), n, err)
			}
		},
	})
}

// The cohort contract: the bound, FIFO order and tokens one apart (each
// hand-off INCRs the fence), with the other process asleep on the channel.
func TestCohort(t *testing.T) {
	addr := startRedis(t)
	admin := newClient(t, addr)
	locktest.RunCohort(t, locktest.Cohort{
		New: func(t *testing.T, k int) lock.Locker {
			lk := newLocker(t, addr, Options{LocalHandoffs: k})
			// The fallback must not fire while the other process takes its
			// turn, however slow the machine: here it would only hide a
			// fairness bug.
			lk.yieldFallback = 5 * time.Second
			return lk
		},
		ServerQueued: func(t *testing.T, key string, n int) {
			// The other process's front listens on the channel once it
			// found the lock busy; nobody else listens yet.
			eventually(t, "a listener on the channel", func() bool {
				m, err := admin.PubSubNumSub(t.Context(), channelOf(key)).Result()
				return err == nil && m[channelOf(key)] >= int64(n)
			})
		},
		Settled: func(t *testing.T, key string) {
			eventually(t, "the lock freed", func() bool {
				return admin.Exists(t.Context(), key).Val() == 0
			})
		},
		Minted: true,
	})
}
