package redissonlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// startRedis runs a real redis-server for the test and returns its address.
func startRedis(t testing.TB) string {
	t.Helper()
	return servertest.Redis(t).Addr()
}

// newClient returns a client of its own, closed after the test (and after
// any Locker created later, since cleanups run last-in first-out).
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newLocker returns a Locker on a client of its own: a separate "process".
func newLocker(t testing.TB, addr string, opts Options) *Locker {
	t.Helper()
	lk := New(newClient(t, addr), opts)
	t.Cleanup(func() { _ = lk.Close() })
	return lk
}

// mustAcquire acquires key, which must become free, and returns the
// concrete lease.
func mustAcquire(t testing.TB, lk *Locker, key string) *Lease {
	t.Helper()
	l, err := lk.Acquire(testwait.Until(t), key)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return l.(*Lease)
}

// mustAcquireAtOnce is mustAcquire for a key that is free now: the first
// run of the acquire script takes it. A hold left behind (a key not
// deleted, a leaked hold) would make that run fail and the Locker wait for
// the hold to expire; the count tells the two apart where a duration would
// also count how busy the machine is. The wait itself is bounded by the
// test's deadline only.
func mustAcquireAtOnce(t testing.TB, lk *Locker, key string) *Lease {
	t.Helper()
	before := lk.Stats().AcquireScripts
	l := mustAcquire(t, lk, key)
	if n := lk.Stats().AcquireScripts - before; n != 1 {
		_ = l.Release(context.Background())
		t.Fatalf("Acquire(%q) ran the acquire script %d times, want once: the key was not free", key, n)
	}
	return l
}

// mustNotAcquire checks that key stays unavailable for d.
func mustNotAcquire(t testing.TB, lk *Locker, key string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	l, err := lk.Acquire(ctx, key)
	if err == nil {
		_ = l.Release(context.Background())
		t.Fatalf("Acquire(%q) succeeded, want it blocked", key)
	}
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire(%q) = %v, want ErrNotObtained wrapping DeadlineExceeded", key, err)
	}
}

// waitDone waits for l.Done, which must close, and returns how long it
// took.
func waitDone(t testing.TB, l lock.Lease) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-l.Done():
		return time.Since(start)
	case <-testwait.Until(t).Done():
		t.Fatalf("Done not closed within %v", time.Since(start).Round(time.Millisecond))
		return 0
	}
}

// isOpen reports whether l.Done is still open.
func isOpen(l lock.Lease) bool {
	select {
	case <-l.Done():
		return false
	default:
		return true
	}
}

// servertestRedis returns the process itself, for tests that stop it.
func servertestRedis(t testing.TB) *servers.Process {
	t.Helper()
	return servertest.Redis(t)
}
