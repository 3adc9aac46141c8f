// Package locktest is the conformance suite every lock backend passes against
// a real server: mutual exclusion under contention, release semantics, context
// deadlines and cancellation, expiry of a crashed holder, renewal, the
// lock-loss signal, fencing-token monotonicity, re-entry, and (RunCohort)
// the bounded local passing of cohort backends.
//
// A backend states what it can do in Env's capability flags and calls Run,
// which runs every subtest those capabilities call for; the subtests are
// exported too, for a backend that needs to compose its own selection:
//
//	func TestConformance(t *testing.T) {
//		rdb := ... // real server from servertest
//		locktest.Run(t, locktest.Env{New: ..., Exclusive: true, Processes: true,
//			Expiry: true, TTL: 300 * time.Millisecond, Crash: ..., Steal: ...})
//	}
package locktest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/testwait"
)

// Env tells the suite how to drive one backend and what it can do.
type Env struct {
	// New returns a fresh Locker with the given options. With Processes,
	// separate calls must behave like separate processes (own client or
	// session). The suite closes lockers that implement lock.Closer.
	New func(t *testing.T, opts lock.Options) lock.Locker

	// Exclusive: Acquire waits while another lease holds the key. Enables
	// MutualExclusion, ContextDeadline and ContextCancel. Only the lab's
	// "none" backend lacks it.
	Exclusive bool

	// Processes: Lockers from separate New calls exclude each other, as
	// separate processes do; the exclusion, deadline, cancel and token
	// subtests then spread their contenders over several Lockers.
	// Without it (an in-process lock) they use one Locker.
	Processes bool

	// Expiry: leases live TTL past a holder that stops renewing, and are
	// renewed while held. Enables NonOwnerRelease, CrashedHolderExpires,
	// RenewalKeepsLock and DoneOnLoss, which need TTL, Crash and Steal.
	Expiry bool

	// TTL is the short lease the suite uses for expiry and renewal tests.
	TTL time.Duration

	// Crash makes lk behave like a process that died: it stops renewing and
	// never releases, but its lease is not revoked early. The suite then
	// expects another Locker to acquire within about TTL.
	Crash func(t *testing.T, lk lock.Locker)

	// Steal makes the server drop the lock held by l behind the holder's back
	// (delete the key, revoke the lease, expire the session). The suite then
	// expects l.Done to close.
	Steal func(t *testing.T, l lock.Lease)

	// Reentrant: leases implement Reentrant. Enables Reentry.
	Reentrant bool
}

// Reentrant is a lease that its holder can take again: each Reacquire adds
// a hold that a Release undoes; the lock is free after the last one.
type Reentrant interface {
	lock.Lease
	Reacquire(ctx context.Context) error
}

// Run runs every subtest env's capabilities call for.
func Run(t *testing.T, env Env) {
	t.Helper()
	if env.Expiry && (env.TTL <= 0 || env.Crash == nil || env.Steal == nil) {
		t.Fatal("locktest: Expiry needs TTL, Crash and Steal")
	}
	if !env.Expiry && (env.Crash != nil || env.Steal != nil) {
		t.Fatal("locktest: Crash and Steal are given but Expiry is not set: the subtests using them would not run")
	}
	t.Run("ReleaseSemantics", func(t *testing.T) { ReleaseSemantics(t, env) })
	t.Run("TokensIncrease", func(t *testing.T) { TokensIncrease(t, env) })
	if env.Exclusive {
		t.Run("MutualExclusion", func(t *testing.T) { MutualExclusion(t, env) })
		t.Run("ContextDeadline", func(t *testing.T) { ContextDeadline(t, env) })
		t.Run("ContextCancel", func(t *testing.T) { ContextCancel(t, env) })
	}
	if env.Expiry {
		t.Run("NonOwnerRelease", func(t *testing.T) { NonOwnerRelease(t, env) })
		t.Run("CrashedHolderExpires", func(t *testing.T) { CrashedHolderExpires(t, env) })
		t.Run("RenewalKeepsLock", func(t *testing.T) { RenewalKeepsLock(t, env) })
		t.Run("DoneOnLoss", func(t *testing.T) { DoneOnLoss(t, env) })
	}
	if env.Reentrant {
		t.Run("Reentry", func(t *testing.T) { Reentry(t, env) })
	}
}

// Key returns a lock key unique to the running test.
func Key(t testing.TB) string {
	return "locktest/" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()) + fmt.Sprintf("-%d", time.Now().UnixNano())
}

// NewLocker calls env.New and closes the Locker when the test ends.
func NewLocker(t *testing.T, env Env) lock.Locker {
	t.Helper()
	lk := env.New(t, lock.Options{TTL: env.TTL})
	if c, ok := lk.(lock.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	return lk
}

// lockers returns n Lockers with Processes, else one.
func lockers(t *testing.T, env Env, n int) []lock.Locker {
	t.Helper()
	if !env.Processes {
		n = 1
	}
	lks := make([]lock.Locker, n)
	for i := range lks {
		lks[i] = NewLocker(t, env)
	}
	return lks
}

// other returns a second "process" with Processes, else lk itself.
func other(t *testing.T, env Env, lk lock.Locker) lock.Locker {
	t.Helper()
	if env.Processes {
		return NewLocker(t, env)
	}
	return lk
}

// MustAcquire acquires key on lk and checks the lease's Key; it fails the
// test otherwise.
func MustAcquire(t *testing.T, lk lock.Locker, key string) lock.Lease {
	t.Helper()
	// A must-happen grant: bounded by the test's deadline, never by a
	// number a busy machine can outrun.
	l, err := lk.Acquire(testwait.Until(t), key)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	if l.Key() != key {
		t.Fatalf("Key() = %q, want %q", l.Key(), key)
	}
	return l
}
