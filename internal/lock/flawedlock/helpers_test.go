//go:build lab

package flawedlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/failpoint"
	"seckill/internal/lock"
	"seckill/internal/lock/flawedlock"
	"seckill/internal/servers"
)

// backend is one constructor under test.
type backend struct {
	name string
	new  func(redis.UniversalClient, flawedlock.Options) *flawedlock.Locker
}

var allBackends = []backend{
	{flawedlock.NameSetNX, flawedlock.NewSetNX},
	{flawedlock.NameNoCheck, flawedlock.NewNoCheck},
	{flawedlock.NameCheckDel, flawedlock.NewCheckDel},
}

// newClient returns a client of its own, as a separate process would have,
// closed when t ends.
func newClient(t testing.TB, srv *servers.Process) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// armed makes sure no failpoint outlives the test that enabled it; the
// registry is process-wide, so these tests do not run in parallel.
func armed(t *testing.T) {
	t.Helper()
	failpoint.DisableAll()
	t.Cleanup(failpoint.DisableAll)
}

func acquire(t *testing.T, lk lock.Locker, key string, within time.Duration) lock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	l, err := lk.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return l
}

// mustNotAcquire asserts that lk cannot get key within d.
func mustNotAcquire(t *testing.T, lk lock.Locker, key string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	l, err := lk.Acquire(ctx, key)
	if err == nil {
		_ = l.Release(t.Context())
		t.Fatalf("Acquire(%q) succeeded, want it to time out", key)
	}
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire(%q) = %v, want ErrNotObtained wrapping DeadlineExceeded", key, err)
	}
}

func assertOpen(t *testing.T, l lock.Lease, who string) {
	t.Helper()
	select {
	case <-l.Done():
		t.Fatalf("%s: Done closed (%v); these leases are not supposed to notice anything", who, l.Err())
	default:
	}
}

// room records who is inside the critical section, standing in for the
// stock a sale reads and writes: anyone entering while another is inside is
// the overlap that oversells.
type room struct {
	mu sync.Mutex
	in []string
}

// enter records who as inside and returns who was already there.
func (r *room) enter(who string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	already := slices.Clone(r.in)
	r.in = append(r.in, who)
	return already
}

func (r *room) leave(who string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.in = slices.DeleteFunc(r.in, func(s string) bool { return s == who })
}
