package locktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/testwait"
)

// MutualExclusion: 50 goroutines spread over three lockers increment a counter that is not
// atomic; any overlap of critical sections loses an increment or is seen by
// the inside counter.
func MutualExclusion(t *testing.T, env Env) {
	const goroutines, rounds = 50, 4
	lockers := lockers(t, env, 3)
	key := Key(t)
	var (
		counter int // guarded only by the distributed lock
		inside  atomic.Int32
		overlap atomic.Int32
		wg      sync.WaitGroup
		errs    = make(chan error, goroutines)
		until   = testwait.Until(t) // every round's grant must come
	)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lk := lockers[g%len(lockers)]
			for range rounds {
				l, err := lk.Acquire(until, key)
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

// ReleaseSemantics: Done and Err while held and after Release; a second
// Release says ErrNotHeld; the key is free again at once.
func ReleaseSemantics(t *testing.T, env Env) {
	lk := NewLocker(t, env)
	key := Key(t)
	l := MustAcquire(t, lk, key)
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
	l2 := MustAcquire(t, lk, key)
	_ = l2.Release(t.Context())
}

// ContextDeadline: a contender's Acquire ends with its ctx's deadline,
// wrapping ErrNotObtained and DeadlineExceeded.
func ContextDeadline(t *testing.T, env Env) {
	lk := NewLocker(t, env)
	key := Key(t)
	holder := MustAcquire(t, lk, key)
	defer holder.Release(context.Background())

	other := other(t, env, lk)
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
	// How promptly it returned is a note: DeadlineExceeded above already
	// says it honoured its ctx, and a busy machine may return it late.
	t.Logf("Acquire returned %v after a 300ms deadline", time.Since(start).Round(time.Millisecond))
}

// ContextCancel: a waiting Acquire returns when its ctx is cancelled and
// leaves nothing behind that blocks the queue.
func ContextCancel(t *testing.T, env Env) {
	lk := NewLocker(t, env)
	key := Key(t)
	holder := MustAcquire(t, lk, key)

	other := other(t, env, lk)
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
	case <-testwait.Until(t).Done():
		t.Fatal("Acquire did not return after cancel")
	}
	// The cancelled waiter must leave nothing behind that blocks the queue.
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := MustAcquire(t, other, key)
	_ = l.Release(t.Context())
}

// TokensIncrease: successive acquisitions, alternating between Lockers,
// get strictly increasing tokens.
func TokensIncrease(t *testing.T, env Env) {
	lockers := lockers(t, env, 2)
	key := Key(t)
	var last uint64
	for i := range 10 {
		l := MustAcquire(t, lockers[i%len(lockers)], key)
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

// NonOwnerRelease: a lease whose lock was taken over must not be able to
// release the new holder's lock.
func NonOwnerRelease(t *testing.T, env Env) {
	a, b := NewLocker(t, env), NewLocker(t, env)
	key := Key(t)
	la := MustAcquire(t, a, key)
	env.Steal(t, la)
	lb := MustAcquire(t, b, key)
	if err := la.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release by the old owner = %v, want ErrNotHeld", err)
	}
	// b must still hold it: a third contender times out.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if l, err := NewLocker(t, env).Acquire(ctx, key); err == nil {
		_ = l.Release(t.Context())
		t.Fatal("lock was free after a non-owner Release: the old owner deleted the new holder's lock")
	}
	if err := lb.Release(t.Context()); err != nil {
		t.Fatalf("Release by the real owner: %v", err)
	}
}

// CrashedHolderExpires: another Locker acquires within about TTL after the
// holder crashed.
func CrashedHolderExpires(t *testing.T, env Env) {
	dead, alive := NewLocker(t, env), NewLocker(t, env)
	key := Key(t)
	_ = MustAcquire(t, dead, key)
	env.Crash(t, dead)
	start := time.Now()
	l := MustAcquire(t, alive, key)
	t.Logf("lock of a crashed holder taken over after %v (TTL %v)", time.Since(start).Round(time.Millisecond), env.TTL)
	_ = l.Release(t.Context())
}

// RenewalKeepsLock: a holder keeps the lock for three TTLs.
func RenewalKeepsLock(t *testing.T, env Env) {
	holder, other := NewLocker(t, env), NewLocker(t, env)
	key := Key(t)
	l := MustAcquire(t, holder, key)
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

// DoneOnLoss: Done closes with ErrLost when the server drops the lock, and
// Release then says ErrNotHeld.
func DoneOnLoss(t *testing.T, env Env) {
	lk := NewLocker(t, env)
	key := Key(t)
	l := MustAcquire(t, lk, key)
	env.Steal(t, l)
	select {
	case <-l.Done():
	case <-testwait.Until(t).Done():
		t.Fatal("Done not closed after the lock was taken away")
	}
	if err := l.Err(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Err() = %v, want ErrLost", err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release of a lost lease = %v, want ErrNotHeld", err)
	}
}

// Reentry: a re-entered lease stays held, excluding other Lockers, until
// its last Release; another Release then says ErrNotHeld.
func Reentry(t *testing.T, env Env) {
	lk := NewLocker(t, env)
	key := Key(t)
	l, ok := MustAcquire(t, lk, key).(Reentrant)
	if !ok {
		t.Fatal("Reentrant set, but the lease has no Reacquire")
	}
	if err := l.Reacquire(t.Context()); err != nil {
		t.Fatalf("Reacquire: %v", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("Release of one of two holds: %v", err)
	}
	select {
	case <-l.Done():
		t.Fatalf("Done closed with a hold left: %v", l.Err())
	default:
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if l2, err := other(t, env, lk).Acquire(ctx, key); err == nil {
		_ = l2.Release(t.Context())
		t.Fatal("another contender acquired a lock with a hold left")
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("last Release: %v", err)
	}
	if err := l.Err(); !errors.Is(err, lock.ErrReleased) {
		t.Fatalf("Err() after the last Release = %v, want ErrReleased", err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release beyond the holds = %v, want ErrNotHeld", err)
	}
}
