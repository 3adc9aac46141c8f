package redissonlock

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
	"seckill/internal/testwait"
)

// ForceUnlock frees a lock held elsewhere, wakes its waiters at once, and the
// holder's Done closes at its next renewal.
func TestForceUnlock(t *testing.T) {
	const watchdog = 3 * time.Second // > maxWait: only the publish can wake the waiter in time
	addr := startRedis(t)
	rdb := newClient(t, addr)
	holder := newLocker(t, addr, Options{Watchdog: watchdog})
	waiter := newLocker(t, addr, Options{Watchdog: watchdog})
	admin := newLocker(t, addr, Options{})
	key := locktest.Key(t)

	l := mustAcquire(t, holder, key)
	type result struct {
		l   *Lease
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	until := testwait.Until(t)
	go func() {
		l, err := waiter.Acquire(until, key)
		r := result{err: err, at: time.Now()}
		if err == nil {
			r.l = l.(*Lease)
		}
		got <- r
	}()
	// Let the waiter subscribe and go to sleep on the holder's TTL.
	mustNotAcquire(t, admin, key, 200*time.Millisecond)

	forced := time.Now()
	if err := admin.ForceUnlock(t.Context(), key); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	// Woken by ForceUnlock's publish, not by its fallback timer: a wake-up
	// was delivered, and it came sooner than the fallback's cap.
	if w := waiter.Stats().Wakeups; w == 0 {
		t.Fatal("waiter acquired without a pub/sub wake-up, want woken by ForceUnlock's publish")
	}
	if woke := r.at.Sub(forced); woke >= maxWait {
		t.Fatalf("waiter acquired %v after ForceUnlock, want before the %v fallback (woken by the publish)", woke, maxWait)
	}
	// Closed by the next renewal, which finds another owner, not by the
	// lease running out a watchdog TTL after the last renewal: the error
	// says which (package watchdog's words), where a duration would also
	// measure the machine.
	took := waitDone(t, l)
	if err := l.Err(); !errors.Is(err, lock.ErrLost) || !strings.Contains(err.Error(), "taken by another owner") {
		t.Fatalf("holder Err() = %v, want ErrLost from a renewal that found another owner, not from the lease running out", err)
	}
	t.Logf("holder's Done closed %v after ForceUnlock (renewal every %v)", took.Round(time.Millisecond), watchdog/3)
	if err := l.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("holder Release = %v, want ErrNotHeld", err)
	}
	if n, _ := rdb.Exists(t.Context(), key).Result(); n != 1 {
		t.Fatalf("EXISTS = %d, want 1: the waiter holds it now", n)
	}

	// A holder in the admin's own Locker loses its lease at once.
	if err := r.l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	own := mustAcquireAtOnce(t, admin, key)
	if err := admin.ForceUnlock(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if isOpen(own) || !errors.Is(own.Err(), lock.ErrLost) {
		t.Fatalf("local holder: Done open=%v Err=%v, want closed with ErrLost", isOpen(own), own.Err())
	}
	if err := admin.ForceUnlock(t.Context(), key); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("ForceUnlock of a free lock = %v, want ErrNotHeld", err)
	}
}

// With Redis gone every call fails fast with ErrUnavailable, waiters
// included, and held leases report the loss.
func TestRedisDown(t *testing.T) {
	const watchdog = 600 * time.Millisecond
	p := servertestRedis(t)
	holder := newLocker(t, p.Addr(), Options{Watchdog: watchdog})
	waiter := newLocker(t, p.Addr(), Options{Watchdog: watchdog})
	key := locktest.Key(t)

	l := mustAcquire(t, holder, key)
	waitErr := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := waiter.Acquire(ctx, key)
		if err == nil {
			_ = l.Release(context.Background())
		}
		waitErr <- err
	}()
	mustNotAcquire(t, waiter, key, 100*time.Millisecond) // the waiter is queued by now

	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	// ErrUnavailable (not ErrNotObtained wrapping DeadlineExceeded) is what
	// proves it failed on the dead server rather than waiting out its ctx;
	// the duration is logged, not asserted: tests do not judge speed.
	_, err := holder.Acquire(ctx, locktest.Key(t))
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Acquire with Redis down = %v, want ErrUnavailable", err)
	}
	t.Logf("Acquire failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if err := holder.Ping(ctx); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Ping = %v, want ErrUnavailable", err)
	}
	select {
	case err := <-waitErr:
		if !errors.Is(err, lock.ErrUnavailable) {
			t.Fatalf("queued waiter = %v, want ErrUnavailable", err)
		}
		t.Logf("queued waiter failed %v after Redis stopped: %v", time.Since(stopped).Round(time.Millisecond), err)
	case <-testwait.Until(t).Done():
		// A waiter that only ended by timing out, not by noticing Redis is
		// gone, would have said ErrNotObtained wrapping DeadlineExceeded at
		// its 30s ctx, refused above.
		t.Fatalf("queued waiter still blocked %v after Redis stopped", time.Since(stopped).Round(time.Second))
	}
	waitDone(t, l)
	if err := l.Err(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("holder Err() = %v, want ErrLost", err)
	}
}

// Close ends waiters and leases and stops every goroutine the Locker started.
func TestCloseStopsEverything(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	if err := rdb.Ping(t.Context()).Err(); err != nil { // pool warmed before the baseline
		t.Fatal(err)
	}
	other := newLocker(t, addr, Options{})
	key := locktest.Key(t)
	held := mustAcquire(t, other, key)
	defer held.Release(context.Background())
	baseline := runtime.NumGoroutine()

	lk := New(rdb, Options{Watchdog: 600 * time.Millisecond})
	mine := mustAcquire(t, lk, locktest.Key(t)) // arms a watchdog timer
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 { // queue up, which starts the pub/sub goroutines
		wg.Go(func() {
			_, err := lk.Acquire(context.Background(), key)
			errs <- err
		})
	}
	mustNotAcquire(t, lk, key, 200*time.Millisecond)

	if err := lk.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, lock.ErrClosed) {
			t.Errorf("waiter after Close = %v, want ErrClosed", err)
		}
	}
	if isOpen(mine) || !errors.Is(mine.Err(), lock.ErrLost) || !errors.Is(mine.Err(), lock.ErrClosed) {
		t.Fatalf("lease after Close: open=%v Err=%v, want closed with ErrLost and ErrClosed", isOpen(mine), mine.Err())
	}
	if _, err := lk.Acquire(t.Context(), key); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	if err := lk.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
	// go-redis's pub/sub health checker exits on its own schedule after
	// PubSub.Close and offers no event; everything of ours is gone already.
	until := testwait.Until(t)
	for runtime.NumGoroutine() > baseline && until.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Close, want ≤ %d\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
	}
}
