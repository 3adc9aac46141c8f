package redissonlock

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/lock"
)

// defaultYieldFallback bounds how long a queue head holds back after its
// own Locker yielded the lock to other processes. Their release message is
// the real wake-up; the bound only matters when a listener PUBSUB NUMSUB
// counted never takes the lock (its waiter gave up, or it was unsubscribing).
const defaultYieldFallback = 50 * time.Millisecond

// Waiter states, guarded by Locker.mu. Only an idle waiter may be handed a
// lease: a head running the acquire script, or a waiter on its way out, is
// not.
const (
	waitIdle   = iota // queued, blocked on its turn or a release note
	waitTrying        // the head, running the acquire script
	waitLeft          // gave up, or is returning with a lock of its own
	waitHanded        // a lease was put in its handed channel
)

// hasIdleWaiter reports whether a goroutine of this Locker waits for key
// and could take the lock at once.
func (lk *Locker) hasIdleWaiter(key string) bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if q := lk.queues[key]; q != nil {
		for _, w := range q.waiters {
			if w.state == waitIdle {
				return true
			}
		}
	}
	return false
}

// handOffLocked ends l's last hold by passing the lock to a new owner of
// this Locker in one script call (transfer.lua) and gives the new lease to
// the first idle waiter. At the end of a run of Options.LocalHandoffs
// hand-offs the script releases instead when other processes listen, and
// this Locker's waiters hold back so one of them goes first. Called with l.mu
// held and l.holds == 1.
func (l *Lease) handOffLocked(ctx context.Context) error {
	lk := l.lk
	streakEnd := l.streak >= lk.maxHandoffs
	limited := "0"
	if streakEnd {
		limited = "1"
		// Set before the script runs: a release message from the process
		// we yield to may arrive before our reply, and it clears this.
		lk.holdBack(l.key, time.Now().Add(lk.yieldFallback))
	}
	owner := lk.newOwner()
	sent := time.Now()
	v, err := transferScript.Run(ctx, lk.rdb, l.names.keys,
		l.owner, owner, lk.ttlArg, l.names.channel, lk.yieldArg, limited).Result()
	var status, n int64
	if err == nil {
		status, n, err = pair(v)
	}
	if err != nil {
		if streakEnd {
			lk.holdBack(l.key, time.Time{})
		}
		// Either owner may hold the lock now; nobody would release it.
		lk.abandon(l.names, owner)
		l.abandonLocked(fmt.Errorf("release failed: %w", err))
		return unavailable("release", l.key, err)
	}
	if streakEnd && status != xferYield {
		lk.holdBack(l.key, time.Time{})
	}
	switch status {
	case xferDone:
		l.endLocked(lock.ErrReleased)
		lk.handoffs.Add(1)
		nl, err := lk.newLease(ctx, l.names, owner, uint64(n), sent, l.streak+1)
		if err != nil {
			return nil // closed meanwhile: newLease gave the lock back
		}
		if !lk.deliver(nl) {
			// Every waiter left or got busy during the round trip.
			nl.mu.Lock()
			defer nl.mu.Unlock()
			_ = nl.releaseLocked(ctx)
		}
		return nil
	case xferYield:
		l.endLocked(lock.ErrReleased)
		lk.yields.Add(1)
		lk.nudge(l.key) // the head re-arms its timer to the hold-back
		return nil
	case xferKept:
		// Redis had more holds than the lease knew (a Reacquire whose reply
		// was lost): nothing was handed over.
		l.holds = int(n)
		l.extendLocked(sent)
		return nil
	case xferNotOwner:
		l.endLocked(fmt.Errorf("redisson: %q was taken over before release: %w", l.key, lock.ErrLost))
		return fmt.Errorf("redisson: release %q: %w", l.key, lock.ErrNotHeld)
	default:
		err := fmt.Errorf("unexpected transfer status %d", status)
		lk.abandon(l.names, owner)
		l.abandonLocked(err)
		return unavailable("release", l.key, err)
	}
}

// deliver hands nl to the first idle waiter for its key, oldest first. It
// reports false when there is none.
func (lk *Locker) deliver(nl *Lease) bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	q := lk.queues[nl.key]
	if q == nil {
		return false
	}
	for _, w := range q.waiters {
		if w.state == waitIdle {
			w.state = waitHanded
			w.handed <- nl // cap 1, and only one lease is ever handed
			// The next head sleeps until a release note, or until this
			// holder's TTL would run out, not a stale earlier estimate.
			q.expires = time.Now().Add(lk.ttl)
			return true
		}
	}
	return false
}

// holdBack sets until when the head of key's queue must not run the acquire
// script on a release note (zero: no hold-back).
func (lk *Locker) holdBack(key string, until time.Time) {
	lk.mu.Lock()
	if q := lk.queues[key]; q != nil {
		q.holdBack = until
	}
	lk.mu.Unlock()
}

// nudge wakes the head of key's queue, if any.
func (lk *Locker) nudge(key string) {
	lk.mu.Lock()
	q := lk.queues[key]
	lk.mu.Unlock()
	if q != nil {
		q.nudge()
	}
}

// takeHanded is called by a waiter about to act on its own (run the acquire
// script, or give up). It returns the lease handed to w, if one was, or else
// moves w to state next so no lease is handed to it meanwhile.
func (lk *Locker) takeHanded(w *waiter, next int) *Lease {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if w.state == waitHanded {
		return <-w.handed
	}
	w.state = next
	return nil
}
