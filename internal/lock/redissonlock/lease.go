package redissonlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"seckill/internal/lock"
)

var _ lock.Lease = (*Lease)(nil)

// Lease is one acquisition of a lock, identified by its owner id. Besides the
// lock.Lease contract it is reentrant: Reacquire adds a hold, Release drops
// one, and the lock is freed (Done closed with lock.ErrReleased) when the
// last hold is released. Its methods are safe for concurrent use, but a
// Lease is meant to be used by the one flow of work that acquired it.
type Lease struct {
	lk    *Locker
	key   string
	names *keyNames
	owner string
	token uint64
	sig   *lock.Signal

	mu     sync.Mutex // held across Acquire/Release scripts so holds matches Redis
	holds  int        // hold count; 0 once the lease has ended
	streak int        // local hand-offs in a row that led to this lease

	// Watchdog mode (LeaseTime 0).
	renewTimer *time.Timer // next renewal
	valid      time.Time   // lower bound of the server-side expiry
	lastErr    error       // last failed renewal, for the loss message

	// LeaseTime mode.
	deadline time.Time   // earliest server-side expiry
	expiry   *time.Timer // closes Done at deadline
}

// Key is the lock's name as passed to Acquire.
func (l *Lease) Key() string { return l.key }

// Token is the fencing token minted by the first acquisition; re-entries
// keep it.
func (l *Lease) Token() uint64 { return l.token }

// Done is closed when the last hold is released or the lock is, or may be,
// lost.
func (l *Lease) Done() <-chan struct{} { return l.sig.Done() }

// Err is nil while held, then lock.ErrReleased or an error wrapping
// lock.ErrLost.
func (l *Lease) Err() error { return l.sig.Err() }

// HoldCount is the number of holds not yet released: 1 after Acquire, plus
// one per Reacquire, minus one per Release; 0 once the lease has ended.
func (l *Lease) HoldCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holds
}

// Reacquire takes the lock once more for the same owner, as a reentrant
// lock() on a thread that holds it. It refreshes the TTL and never waits.
// It fails with lock.ErrNotHeld once the lease has ended or Redis shows the
// owner no longer holds the lock (which also ends the lease), and with
// lock.ErrUnavailable on a Redis failure (lock.ErrNotObtained and ctx.Err()
// when ctx ended first), after either of which the server-side count may be
// one higher than HoldCount: the next Reacquire adopts that hold instead of
// adding another (each call names the count it makes, so a retried or
// repeated run is idempotent), and if none comes the lock outlives the
// final Release by at most one TTL. An answer Redis should never give ends
// the lease as lost and drops its holds.
func (l *Lease) Reacquire(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("redisson: reacquire on a nil lease: %w", lock.ErrNotHeld)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds == 0 {
		return l.endedErr("reacquire")
	}
	l.lk.acquireScripts.Add(1)
	sent := time.Now()
	v, err := acquireScript.Run(ctx, l.lk.rdb, l.names.keys, l.lk.ttlArg, l.owner, "1", l.holds+1).Result()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("redisson: reacquire %q: %w: %w", l.key, lock.ErrNotObtained, ctx.Err())
		}
		return unavailable("reacquire", l.key, err)
	}
	status, n, err := pair(v)
	if err != nil {
		l.abandonLocked(err)
		return unavailable("reacquire", l.key, err)
	}
	switch status {
	case acqReentry:
		l.holds = int(n)
		l.extendLocked(sent)
		return nil
	case acqNotOwner:
		l.endLocked(fmt.Errorf("redisson: %q is no longer held by this lease: %w", l.key, lock.ErrLost))
		return fmt.Errorf("redisson: reacquire %q: %w", l.key, lock.ErrNotHeld)
	default:
		err := fmt.Errorf("unexpected status %d for a re-entry", status)
		l.abandonLocked(err)
		return unavailable("reacquire", l.key, err)
	}
}

// abandonLocked ends the lease as lost after Redis answered in a way that
// leaves its holds unknown, and drops them, so the lock is not left held
// by an owner nobody renews or releases. Called with l.mu held.
func (l *Lease) abandonLocked(cause error) {
	l.endLocked(fmt.Errorf("redisson: %q: %w: %w", l.key, lock.ErrLost, cause))
	l.lk.abandon(l.names, l.owner)
}

// Release drops one hold. The last one deletes the lock, wakes the waiters
// and closes Done with lock.ErrReleased; when a goroutine of the same Locker
// waits for the key, it instead hands the lock to that goroutine in the same
// script call (see Options.LocalHandoffs). Once the lease has ended (released
// or lost), Release returns lock.ErrNotHeld without touching Redis; it does
// too when Redis shows the lock was taken away. A Redis failure returns an
// error wrapping lock.ErrUnavailable and ends the lease as lost, since
// whether the hold was dropped is unknown: the watchdog stops, and the
// lease's holds are dropped in the background under a bounded deadline
// (abandon.lua), or expire by TTL if Redis stays unreachable.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("redisson: release on a nil lease: %w", lock.ErrNotHeld)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds == 0 {
		return l.endedErr("release")
	}
	if l.holds == 1 && l.lk.maxHandoffs > 0 && l.lk.hasIdleWaiter(l.key) {
		return l.handOffLocked(ctx)
	}
	return l.releaseLocked(ctx)
}

// releaseLocked runs the release script for one hold. Called with l.mu held
// and l.holds > 0.
func (l *Lease) releaseLocked(ctx context.Context) error {
	sent := time.Now()
	n, err := releaseScript.Run(ctx, l.lk.rdb, l.names.keys[:1], l.owner, l.lk.ttlArg, l.names.channel, msgUnlock).Int64()
	switch {
	case err != nil:
		// The lease ends, so nobody would release what is left: drop it.
		l.abandonLocked(fmt.Errorf("release failed: %w", err))
		return unavailable("release", l.key, err)
	case n > 0:
		l.holds = int(n)
		l.extendLocked(sent)
		return nil
	case n == 0:
		l.endLocked(lock.ErrReleased)
		return nil
	default:
		l.endLocked(fmt.Errorf("redisson: %q was taken over before release: %w", l.key, lock.ErrLost))
		return fmt.Errorf("redisson: release %q: %w", l.key, lock.ErrNotHeld)
	}
}

// endedErr explains a call on an ended lease.
func (l *Lease) endedErr(op string) error {
	return fmt.Errorf("redisson: %s %q: %w (lease ended: %v)", op, l.key, lock.ErrNotHeld, l.sig.Err())
}

// startLocked starts keeping a new lease alive: the watchdog, or the expiry
// timer of a fixed LeaseTime. Called with l.mu and Locker.mu held, so Close
// cannot slip in between and miss the lease.
func (l *Lease) startLocked(sent time.Time) {
	if lt := l.lk.opts.LeaseTime; lt > 0 {
		l.deadline = sent.Add(lt)
		l.expiry = time.AfterFunc(time.Until(l.deadline), l.expire)
		return
	}
	l.startWatchdogLocked(sent)
}

// extendLocked follows a PEXPIRE done by a re-entry or partial release. The
// watchdog needs nothing: its next renewal is due anyway.
func (l *Lease) extendLocked(sent time.Time) {
	if l.expiry != nil {
		l.deadline = sent.Add(l.lk.opts.LeaseTime)
		l.expiry.Reset(time.Until(l.deadline))
	}
}

// expire ends a fixed-LeaseTime lease when its time is up. The deadline is
// re-checked because a re-entry may have extended it while this waited for mu.
func (l *Lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds == 0 || time.Now().Before(l.deadline) {
		return
	}
	l.endLocked(fmt.Errorf("redisson: lease time %v of %q elapsed: %w", l.lk.opts.LeaseTime, l.key, lock.ErrLost))
}

// lose ends the lease with err unless it has ended already.
func (l *Lease) lose(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds > 0 {
		l.endLocked(err)
	}
}

// endLocked stops keeping the lease alive and closes Done with err.
func (l *Lease) endLocked(err error) {
	l.holds = 0
	if l.renewTimer != nil {
		l.renewTimer.Stop()
	}
	if l.expiry != nil {
		l.expiry.Stop()
	}
	l.lk.forget(l)
	l.sig.Close(err)
}
