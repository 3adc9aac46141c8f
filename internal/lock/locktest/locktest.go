// Package locktest is the conformance suite every lock backend passes against
// a real server: mutual exclusion under contention, release semantics, context
// deadlines and cancellation, expiry of a crashed holder, renewal, the
// lock-loss signal and fencing-token monotonicity.
//
// A backend's test builds an Env and calls Run:
//
//	func TestConformance(t *testing.T) {
//		rdb := ... // real server from servertest
//		locktest.Run(t, locktest.Env{New: ..., TTL: 300 * time.Millisecond, ...})
//	}
package locktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/lock"
)

// Env tells the suite how to drive one backend.
type Env struct {
	// New returns a fresh Locker with the given options. Separate calls must
	// behave like separate processes where the backend allows it (own client
	// or session), so exclusion is tested across "processes" too. The suite
	// closes lockers that implement lock.Closer.
	New func(t *testing.T, opts lock.Options) lock.Locker

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

	// Local marks in-process backends: no TTL, no crash, no steal. Exclusion
	// is tested within one Locker only.
	Local bool
}

// Run runs the whole suite as subtests.
func Run(t *testing.T, env Env) {
	t.Helper()
	t.Run("MutualExclusion", func(t *testing.T) { testMutualExclusion(t, env) })
	t.Run("ReleaseSemantics", func(t *testing.T) { testRelease(t, env) })
	t.Run("ContextDeadline", func(t *testing.T) { testDeadline(t, env) })
	t.Run("ContextCancel", func(t *testing.T) { testCancel(t, env) })
	t.Run("TokensIncrease", func(t *testing.T) { testTokens(t, env) })
	if env.Local {
		return
	}
	t.Run("NonOwnerRelease", func(t *testing.T) { testNonOwner(t, env) })
	t.Run("CrashedHolderExpires", func(t *testing.T) { testCrash(t, env) })
	t.Run("RenewalKeepsLock", func(t *testing.T) { testRenewal(t, env) })
	t.Run("DoneOnLoss", func(t *testing.T) { testDoneOnLoss(t, env) })
}

// Key returns a lock key unique to the running test.
func Key(t testing.TB) string {
	return "locktest/" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()) + fmt.Sprintf("-%d", time.Now().UnixNano())
}

func newLocker(t *testing.T, env Env) lock.Locker {
	t.Helper()
	lk := env.New(t, lock.Options{TTL: env.TTL})
	if c, ok := lk.(lock.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	return lk
}

func acquire(t *testing.T, lk lock.Locker, key string, timeout time.Duration) lock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	l, err := lk.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	if l.Key() != key {
		t.Fatalf("Key() = %q, want %q", l.Key(), key)
	}
	return l
}

// 50 goroutines spread over three lockers increment a counter that is not
// atomic; any overlap of critical sections loses an increment or is seen by
// the inside counter.
func testMutualExclusion(t *testing.T, env Env) {
	const goroutines, rounds = 50, 4
	lockers := []lock.Locker{newLocker(t, env)}
	if !env.Local {
		lockers = append(lockers, newLocker(t, env), newLocker(t, env))
	}
	key := Key(t)
	var (
		counter int // guarded only by the distributed lock
		inside  atomic.Int32
		overlap atomic.Int32
		wg      sync.WaitGroup
		errs    = make(chan error, goroutines)
	)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lk := lockers[g%len(lockers)]
			for range rounds {
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				l, err := lk.Acquire(ctx, key)
				cancel()
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) != 1 {
					overlap.Add(1)
				}
				v := counter
				time.Sleep(50 * time.Microsecond) // widen the race window
				counter = v + 1
				inside.Add(-1)
				if err := l.Release(t.Context()); err != nil {
					errs <- fmt.Errorf("release: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := overlap.Load(); got != 0 {
		t.Errorf("%d critical sections overlapped, want 0", got)
	}
	if want := goroutines * rounds; counter != want {
		t.Errorf("counter = %d, want %d", counter, want)
	}
}

func testRelease(t *testing.T, env Env) {
	lk := newLocker(t, env)
	key := Key(t)
	l := acquire(t, lk, key, 10*time.Second)
	select {
	case <-l.Done():
		t.Fatalf("Done closed while held: %v", l.Err())
	default:
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err() while held = %v, want nil", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("first Release: %v", err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after Release")
	}
	if err := l.Err(); !errors.Is(err, lock.ErrReleased) {
		t.Fatalf("Err() after Release = %v, want ErrReleased", err)
	}
	// Released means free: another acquisition is immediate.
	l2 := acquire(t, lk, key, 5*time.Second)
	_ = l2.Release(t.Context())
}

func testDeadline(t *testing.T, env Env) {
	lk := newLocker(t, env)
	key := Key(t)
	holder := acquire(t, lk, key, 10*time.Second)
	defer holder.Release(context.Background())

	other := lk
	if !env.Local {
		other = newLocker(t, env)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	l, err := other.Acquire(ctx, key)
	if err == nil {
		_ = l.Release(t.Context())
		t.Fatal("Acquire succeeded while the lock was held")
	}
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want ErrNotObtained wrapping DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("Acquire returned %v after a 300ms deadline, want promptly", waited)
	}
}

func testCancel(t *testing.T, env Env) {
	lk := newLocker(t, env)
	key := Key(t)
	holder := acquire(t, lk, key, 10*time.Second)

	other := lk
	if !env.Local {
		other = newLocker(t, env)
	}
	ctx, cancel := context.WithCancel(t.Context())
	res := make(chan error, 1)
	go func() {
		l, err := other.Acquire(ctx, key)
		if err == nil {
			_ = l.Release(context.Background())
		}
		res <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the waiter queue up; nothing to observe from outside
	cancel()
	select {
	case err := <-res:
		if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire = %v, want ErrNotObtained wrapping Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return after cancel")
	}
	// The cancelled waiter must leave nothing behind that blocks the queue.
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, other, key, 5*time.Second)
	_ = l.Release(t.Context())
}

func testTokens(t *testing.T, env Env) {
	lockers := []lock.Locker{newLocker(t, env)}
	if !env.Local {
		lockers = append(lockers, newLocker(t, env))
	}
	key := Key(t)
	var last uint64
	for i := range 10 {
		l := acquire(t, lockers[i%len(lockers)], key, 10*time.Second)
		if tok := l.Token(); tok <= last {
			t.Fatalf("acquisition %d: token %d, want > %d", i, tok, last)
		} else {
			last = tok
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// A lease whose lock was taken over must not be able to release the new
// holder's lock.
func testNonOwner(t *testing.T, env Env) {
	a, b := newLocker(t, env), newLocker(t, env)
	key := Key(t)
	la := acquire(t, a, key, 10*time.Second)
	env.Steal(t, la)
	lb := acquire(t, b, key, 10*env.TTL+10*time.Second)
	if err := la.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release by the old owner = %v, want ErrNotHeld", err)
	}
	// b must still hold it: a third contender times out.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if l, err := newLocker(t, env).Acquire(ctx, key); err == nil {
		_ = l.Release(t.Context())
		t.Fatal("lock was free after a non-owner Release: the old owner deleted the new holder's lock")
	}
	if err := lb.Release(t.Context()); err != nil {
		t.Fatalf("Release by the real owner: %v", err)
	}
}

func testCrash(t *testing.T, env Env) {
	dead, alive := newLocker(t, env), newLocker(t, env)
	key := Key(t)
	_ = acquire(t, dead, key, 10*time.Second)
	env.Crash(t, dead)
	start := time.Now()
	l := acquire(t, alive, key, 10*env.TTL+10*time.Second)
	t.Logf("lock of a crashed holder taken over after %v (TTL %v)", time.Since(start).Round(time.Millisecond), env.TTL)
	_ = l.Release(t.Context())
}

func testRenewal(t *testing.T, env Env) {
	holder, other := newLocker(t, env), newLocker(t, env)
	key := Key(t)
	l := acquire(t, holder, key, 10*time.Second)
	// Holding for three TTLs is the point of the test, not synchronisation.
	ctx, cancel := context.WithTimeout(t.Context(), 3*env.TTL)
	defer cancel()
	if l2, err := other.Acquire(ctx, key); err == nil {
		_ = l2.Release(t.Context())
		t.Fatal("another locker acquired a lock whose holder was renewing it")
	} else if !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("contender: %v, want ErrNotObtained", err)
	}
	select {
	case <-l.Done():
		t.Fatalf("Done closed while renewing: %v", l.Err())
	default:
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("Release after 3×TTL: %v", err)
	}
}

func testDoneOnLoss(t *testing.T, env Env) {
	lk := newLocker(t, env)
	key := Key(t)
	l := acquire(t, lk, key, 10*time.Second)
	env.Steal(t, l)
	select {
	case <-l.Done():
	case <-time.After(3*env.TTL + 5*time.Second):
		t.Fatal("Done not closed after the lock was taken away")
	}
	if err := l.Err(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Err() = %v, want ErrLost", err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release of a lost lease = %v, want ErrNotHeld", err)
	}
}
