package redissonlock

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
	"seckill/internal/lock/redissub"
)

const (
	// maxWait caps one sleep of the goroutine acquiring for the Locker.
	// Release messages are the wake-up; the cap only bounds the damage of
	// one lost in a pub/sub reconnect, or of a key with no TTL.
	maxWait = time.Second

	// defaultYieldFallback bounds how long the Locker holds back after it
	// yielded a lock to other processes. Their release message is the real
	// wake-up; the bound only matters when a listener never takes the lock
	// (its waiter gave up, or it was unsubscribing).
	defaultYieldFallback = 50 * time.Millisecond
)

// server is the Locker's Redis side as the cohort sees it: the cohort
// queues the goroutines of this Locker per key, and only its front calls
// Acquire, so a release costs one acquire attempt per process, not one per
// waiting goroutine.
type server struct{ lk *Locker }

var (
	_ cohort.Server      = server{}
	_ cohort.KeyObserver = server{}
)

// keyState is a key in use by this Locker's goroutines: from the first
// front or queued waiter until the cohort reports it idle. Fields are
// guarded by Locker.mu, except timer (only the front touches it). Its
// channel is subscribed once someone waits (redissub), unsubscribed when
// the key goes idle.
type keyState struct {
	names   *keyNames
	notify  chan struct{} // cap 1: a release (or a resubscription) since the front last looked
	expires time.Time     // best-known expiry of the current holder
	// holder is this Locker's hold of the key while Redis may still have
	// it: the front does not race its own Locker's release, which nudges
	// it when done.
	holder *hold
	// holdBack is set while this Locker yields the lock to other
	// processes: until then (or until another process's release message
	// clears it) the front does not run the acquire script.
	holdBack time.Time
	timer    *time.Timer   // the front's sleep, reused by each next front
	sub      *redissub.Sub // the channel's subscription, once asked for
}

// nudge wakes the front, or leaves a note for whoever is front next.
func (ks *keyState) nudge() {
	select {
	case ks.notify <- struct{}{}:
	default:
	}
}

// subscribedLocked reports whether the subscription is confirmed.
func (ks *keyState) subscribedLocked() bool { return ks.sub != nil && ks.sub.Confirmed() }

// stateLocked returns key's state, made if needed.
func (lk *Locker) stateLocked(key string) *keyState {
	ks := lk.keys[key]
	if ks == nil {
		ks = &keyState{names: newKeyNames(key), notify: make(chan struct{}, 1)}
		lk.keys[key] = ks
	}
	return ks
}

// subscribeLocked makes sure a SUBSCRIBE for ks goes out.
func (lk *Locker) subscribeLocked(ks *keyState) {
	if ks.sub == nil {
		ks.sub = lk.pubsub.Subscribe(ks.names.channel.(string))
	}
}

// Queued: goroutines wait for key locally, so listen for its releases
// (and let a yield count this Locker among the listeners).
func (s server) Queued(key string) {
	s.lk.mu.Lock()
	s.lk.subscribeLocked(s.lk.stateLocked(key))
	s.lk.mu.Unlock()
}

// Idle: nobody here wants key any more.
func (s server) Idle(key string) {
	lk := s.lk
	lk.mu.Lock()
	if ks := lk.keys[key]; ks != nil {
		delete(lk.keys, key)
		if ks.sub != nil {
			lk.pubsub.Unsubscribe(ks.names.channel.(string))
		}
	}
	lk.mu.Unlock()
}

// Acquire takes key for the cohort's front: Redisson's semaphore-latch
// loop, with one latch per process. It runs the acquire script and, while
// another owner holds the lock, sleeps until a release message or the
// holder's TTL; it first subscribes, then tries once more at once, since a
// release published before the subscription would go unseen.
func (s server) Acquire(ctx context.Context, key string) (cohort.Hold, error) {
	lk := s.lk
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		return nil, lock.ErrClosed
	}
	ks := lk.stateLocked(key)
	lk.mu.Unlock()
	defer func() {
		if ks.timer != nil {
			ks.timer.Stop()
		}
	}()
	owner := lk.newOwner() // one per front: a busy attempt makes no hold
	sleep := false
	for {
		lk.mu.Lock()
		d, blocked := ks.waitLocked()
		lk.mu.Unlock()
		if blocked || sleep {
			if err := lk.sleep(ctx, ks, d); err != nil {
				return nil, err
			}
			sleep = false
			continue
		}
		sent := time.Now()
		h, pttl, err := lk.try(ctx, ks.names, owner)
		if err != nil {
			return nil, err
		}
		if h != nil {
			// A note left now announces a release from before we took the
			// lock; it would only cost the next front a futile attempt.
			select {
			case <-ks.notify:
			default:
			}
			return h, nil
		}
		lk.mu.Lock()
		if pttl < 0 {
			pttl = maxWait
		}
		ks.expires = sent.Add(pttl)
		subscribed := ks.subscribedLocked()
		lk.mu.Unlock()
		sleep = true
		if !subscribed {
			if err := lk.subscribeWait(ctx, ks); err != nil {
				return nil, err
			}
			sleep = false
		}
	}
}

// waitLocked says how long the front should sleep before its next attempt,
// and whether it must not try before then (this Locker's own release is in
// flight, or it yields).
func (ks *keyState) waitLocked() (d time.Duration, blocked bool) {
	d = min(max(time.Until(ks.expires), 0), maxWait)
	if ks.holder != nil {
		d, blocked = maxWait, true
	}
	if hb := time.Until(ks.holdBack); hb > 0 {
		d, blocked = hb, true
	}
	return d, blocked
}

// sleep waits for a release note, d, ctx or Close.
func (lk *Locker) sleep(ctx context.Context, ks *keyState, d time.Duration) error {
	if ks.timer == nil {
		ks.timer = time.NewTimer(d)
	} else {
		ks.timer.Reset(d)
	}
	select {
	case <-ks.notify:
	case <-ks.timer.C:
	case <-ctx.Done():
		return ctx.Err()
	case <-lk.ctx.Done():
		return lock.ErrClosed
	}
	return nil
}

// subscribeWait subscribes to ks's channel and waits for the confirmation.
func (lk *Locker) subscribeWait(ctx context.Context, ks *keyState) error {
	lk.mu.Lock()
	lk.subscribeLocked(ks)
	lk.mu.Unlock()
	select {
	case <-ks.sub.Ready():
	case <-ctx.Done():
		return ctx.Err()
	case <-lk.ctx.Done():
		return lock.ErrClosed
	}
	if err := ks.sub.Err(); err != nil {
		return fmt.Errorf("%w: subscribe: %w", lock.ErrUnavailable, err)
	}
	return nil
}

// try runs the acquire script once for a new owner. It returns the hold
// when it got the lock, else the holder's remaining TTL (negative when the
// key has none).
func (lk *Locker) try(ctx context.Context, names *keyNames, owner string) (*hold, time.Duration, error) {
	lk.acquireScripts.Add(1)
	sent := time.Now()
	v, err := acquireScript.Run(ctx, lk.rdb, names.keys, lk.ttlArg, owner, "0", "1").Result()
	var status, n int64
	if err == nil {
		status, n, err = pair(v)
	}
	switch {
	case err != nil:
		// The script may have run before the reply was lost, or answered
		// in a shape nobody will release: give that hold back now.
		lk.abandon(names, owner)
		return nil, 0, fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
	case status == acqFirst:
		h, err := lk.newHold(names, owner, uint64(n), sent)
		return h, 0, err
	case status == acqBusy:
		return nil, time.Duration(n) * time.Millisecond, nil
	default:
		// The owner id is new, so nothing but this attempt made whatever
		// hold Redis shows; left alone, it would block everyone for a TTL.
		lk.abandon(names, owner)
		return nil, 0, fmt.Errorf("%w: unexpected status %d for a new owner", lock.ErrUnavailable, status)
	}
}

// yielding is called before a final release of key: if goroutines of this
// Locker still want the key, the release yields. It returns the message to
// publish and release.lua's "own listeners" argument ("" for no yield),
// and starts the hold-back first, since a release message of the process
// yielded to may arrive before the reply.
func (lk *Locker) yielding(key string) (msg, self string) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	ks := lk.keys[key]
	if ks == nil {
		return msgUnlock, ""
	}
	ks.holdBack = time.Now().Add(lk.yieldFallback)
	if ks.subscribedLocked() {
		return lk.yieldMsg, "1"
	}
	return lk.yieldMsg, "0"
}

// settled records that h's release reached Redis (or gave up): the front,
// if any, may try, unless holdBack keeps it waiting for another process.
func (lk *Locker) settled(h *hold, holdBack bool) {
	lk.mu.Lock()
	ks := lk.keys[h.names.key]
	if ks != nil {
		if ks.holder == h {
			ks.holder = nil
		}
		if !holdBack {
			ks.holdBack = time.Time{}
		}
	}
	lk.mu.Unlock()
	if ks != nil {
		ks.nudge() // the front re-arms its timer, to the hold-back if any
	}
}

// released handles a message on a lock's channel, or its resubscription
// after a reconnect (a message may have been missed): the key's front tries
// again, and a hold-back ends, unless it is this Locker's own yield.
func (lk *Locker) released(channel, payload string) {
	if payload == lk.yieldMsg {
		return // our own yield: our front lets the others go first
	}
	key, ok := keyOfChannel(channel)
	if !ok {
		return
	}
	lk.mu.Lock()
	ks := lk.keys[key]
	if ks != nil {
		ks.holdBack = time.Time{}
	}
	lk.mu.Unlock()
	if ks != nil {
		lk.wakeups.Add(1)
		ks.nudge()
	}
}
