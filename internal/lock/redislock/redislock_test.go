package redislock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
	"seckill/internal/lock/redislock"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// newClient returns a client of its own, like a separate process would have,
// closed when t ends. ContextTimeoutEnabled lets a ctx cut a hung call short.
func newClient(t testing.TB, srv *servers.Process) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newLocker returns a Locker on a client of its own, both closed when t ends.
func newLocker(t testing.TB, srv *servers.Process, ttl time.Duration) (*redislock.Locker, *redis.Client) {
	t.Helper()
	return newLockerOpts(t, srv, redislock.Options{TTL: ttl})
}

// newLockerOpts is newLocker with every option.
func newLockerOpts(t testing.TB, srv *servers.Process, opts redislock.Options) (*redislock.Locker, *redis.Client) {
	t.Helper()
	c := newClient(t, srv)
	lk := redislock.New(c, opts)
	t.Cleanup(func() { _ = lk.Close() })
	return lk, c
}

func TestConformance(t *testing.T) {
	srv := servertest.Redis(t)
	admin := newClient(t, srv)
	var (
		mu      sync.Mutex
		clients = map[lock.Locker]*redis.Client{}
	)
	locktest.Run(t, locktest.Env{
		New: func(t *testing.T, opts lock.Options) lock.Locker {
			c := newClient(t, srv)
			lk := redislock.New(c, redislock.Options{TTL: opts.TTL})
			mu.Lock()
			clients[lk] = c
			mu.Unlock()
			return lk
		},
		Exclusive: true,
		Processes: true,
		Expiry:    true,
		TTL:       500 * time.Millisecond,
		// Closing the client is a crash: renewals fail, nothing is released,
		// and the lock must expire by its TTL.
		Crash: func(t *testing.T, lk lock.Locker) {
			mu.Lock()
			c := clients[lk]
			mu.Unlock()
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		},
		Steal: func(t *testing.T, l lock.Lease) {
			if n, err := admin.Del(t.Context(), redislock.LockKey(l.Key())).Result(); err != nil || n != 1 {
				t.Fatalf("DEL lock key: deleted %d, %v; want 1", n, err)
			}
		},
	})
}

func TestDescribe(t *testing.T) {
	lk := redislock.New(redis.NewClient(&redis.Options{}), redislock.Options{})
	if got, want := lk.Describe(), (lock.Info{Name: "redis", Safe: true}); got != want {
		t.Fatalf("Describe() = %+v, want %+v", got, want)
	}
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	if err := lk.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil", err)
	}
	if _, err := lk.Acquire(context.Background(), "k"); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
}
