package redissonlock

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/lock"
)

// Lease is one acquisition of a lock, identified by its owner id. Besides the
// lock.Lease contract it is reentrant: Reacquire adds a hold, Release drops
// one, and the lock is freed, or handed to a waiting goroutine of the same
// Locker, when the last hold is released (Done then closes with
// lock.ErrReleased). Its methods are safe for concurrent use, but a Lease is
// meant to be used by the one flow of work that acquired it.
type Lease struct {
	lock.Lease // the cohort's lease: Key, Token, Done, Err, the last Release
	h          *hold
}

// HoldCount is the number of holds not yet released: 1 after Acquire, plus
// one per Reacquire, minus one per Release; 0 once the lease has ended.
func (l *Lease) HoldCount() int {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	if l.Err() != nil || l.h.lost != nil || l.h.ended {
		return 0
	}
	return l.h.count
}

// Reacquire takes the lock once more for the same owner, as a reentrant
// lock() on a thread that holds it. It refreshes the TTL and never waits.
// It fails with lock.ErrNotHeld once the lease has ended or Redis shows the
// owner no longer holds the lock (which also ends the lease), and with
// lock.ErrUnavailable on a Redis failure (lock.ErrNotObtained and ctx.Err()
// when ctx ended first), after either of which the server-side count may be
// one higher than HoldCount: the next Reacquire adopts that hold instead of
// adding another (each call names the count it makes, so a retried or
// repeated run is idempotent), and the final Release finds it. An answer
// Redis should never give ends the lease as lost and drops its holds.
func (l *Lease) Reacquire(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("redissonlock: reacquire on a nil lease: %w", lock.ErrNotHeld)
	}
	h, lk, key := l.h, l.h.lk, l.Key()
	h.mu.Lock()
	if l.Err() != nil || h.lost != nil || h.ended {
		h.mu.Unlock()
		return l.endedErr("reacquire")
	}
	lk.acquireScripts.Add(1)
	sent := time.Now()
	v, err := acquireScript.Run(ctx, lk.rdb, h.names.keys, lk.ttlArg, h.owner, "1", h.count+1).Result()
	if err != nil {
		h.unsure = true
		h.mu.Unlock()
		if ctx.Err() != nil {
			return fmt.Errorf("redissonlock: reacquire %q: %w: %w", key, lock.ErrNotObtained, ctx.Err())
		}
		return lock.Unavailable("redissonlock", fmt.Sprintf("reacquire %q", key), err)
	}
	status, n, err := pair(v)
	switch {
	case err == nil && status == acqReentry:
		h.count, h.unsure = int(n), false
		h.extendLocked(sent)
		h.mu.Unlock()
		return nil
	case err == nil && status == acqNotOwner:
		l.loseLocked(fmt.Errorf("redissonlock: %q is no longer held by this lease: %w", key, lock.ErrLost))
		return fmt.Errorf("redissonlock: reacquire %q: %w", key, lock.ErrNotHeld)
	default:
		if err == nil {
			err = fmt.Errorf("unexpected status %d for a re-entry", status)
		}
		// The cohort gives the lost hold back, which drops all its holds.
		l.loseLocked(fmt.Errorf("redissonlock: %q: %w: %w", key, lock.ErrLost, err))
		return lock.Unavailable("redissonlock", fmt.Sprintf("reacquire %q", key), err)
	}
}

// loseLocked ends the lease as lost and returns once its Done is closed
// (the cohort closes it on the hold's loss). Called with h.mu held; it
// unlocks it.
func (l *Lease) loseLocked(err error) {
	l.h.loseLocked(err)
	l.h.mu.Unlock()
	<-l.Done()
}

// Release drops one hold. The last one goes to the cohort, which hands the
// lock to a goroutine of the same Locker waiting for the key (see
// Options.LocalHandoffs) or frees it and wakes the waiters; Done then
// closes with lock.ErrReleased. Once the lease has ended (released or lost),
// Release returns lock.ErrNotHeld without touching Redis; it does too when
// Redis shows the lock was taken away. A Redis failure returns an error
// wrapping lock.ErrUnavailable and ends the lease as lost, since whether
// the hold was dropped is unknown: the watchdog stops, and the lease's holds
// are dropped in the background under a bounded deadline (abandon.lua), or
// expire by TTL if Redis stays unreachable.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("redissonlock: release on a nil lease: %w", lock.ErrNotHeld)
	}
	h, lk, key := l.h, l.h.lk, l.Key()
	h.mu.Lock()
	if l.Err() != nil || h.lost != nil || h.ended || (h.count <= 1 && !h.unsure) {
		h.mu.Unlock()
		return l.Lease.Release(ctx)
	}
	// Not the last hold, or maybe not (a re-entry's reply was lost): count
	// down in Redis, which knows.
	sent := time.Now()
	n, err := releaseScript.Run(ctx, lk.rdb, h.names.keys[:1], h.owner, lk.ttlArg, h.names.channel, msgUnlock, "").Int64()
	switch {
	case err != nil:
		l.loseLocked(fmt.Errorf("redissonlock: %q: release failed: %w: %w", key, lock.ErrLost, err))
		return lock.Unavailable("redissonlock", fmt.Sprintf("release %q", key), err)
	case n > 0:
		h.count, h.unsure = int(n), false
		h.extendLocked(sent)
		h.mu.Unlock()
		return nil
	case n == 0: // that was the last hold after all, and the lock is free
		h.freed = true
		h.mu.Unlock()
		return l.Lease.Release(ctx)
	default:
		l.loseLocked(fmt.Errorf("redissonlock: %q was taken over before release: %w", key, lock.ErrLost))
		return fmt.Errorf("redissonlock: release %q: %w", key, lock.ErrNotHeld)
	}
}

// endedErr explains a call on an ended lease.
func (l *Lease) endedErr(op string) error {
	return fmt.Errorf("redissonlock: %s %q: %w (lease ended: %v)", op, l.Key(), lock.ErrNotHeld, l.Err())
}
