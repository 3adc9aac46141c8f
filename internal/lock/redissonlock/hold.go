package redissonlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
	"seckill/internal/lock/watchdog"
)

// hold is one owner id holding a lock in Redis, the cohort.Hold of this
// backend. Every lease has a hold of its own: a hand-off is a Transfer,
// which replaces the owner field in Redis and mints the next token there,
// so the hash always names the goroutine's lease that holds the lock, and
// tokens are the "<key>:fence" counter itself.
type hold struct {
	lk    *Locker
	names *keyNames
	owner string
	token uint64
	loss  *lock.Signal // closed on loss

	// mu is held across the scripts that change the owner's count, so
	// count matches Redis. It comes after the cohort's mutex (Passable)
	// and before Locker.mu.
	mu     sync.Mutex
	count  int        // the owner's holds in Redis, as far as known
	unsure bool       // a re-entry's reply was lost: Redis may hold one more
	freed  bool       // nothing left in Redis to release (freed or abandoned)
	ended  bool       // released, transferred or freed: nothing renews it
	lost   error      // why it was, or may have been, lost
	ls     lock.Lease // the lease lent it, once Acquire has returned it

	dog      *watchdog.Dog // renews it, unless a LeaseTime is set
	timer    *time.Timer   // LeaseTime: closes Done at deadline
	deadline time.Time     // LeaseTime: earliest server-side expiry
}

var (
	_ cohort.Hold       = (*hold)(nil)
	_ cohort.Transferer = (*hold)(nil)
)

// newHold records a hold Redis granted to owner (with token, at sent) and
// starts keeping it alive. If Close came first the lock is dropped at once.
func (lk *Locker) newHold(names *keyNames, owner string, token uint64, sent time.Time) (*hold, error) {
	h := &hold{lk: lk, names: names, owner: owner, token: token, count: 1, loss: lock.NewSignal()}
	h.mu.Lock()
	defer h.mu.Unlock()
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		lk.abandonNow(names, owner)
		return nil, lock.ErrClosed
	}
	lk.holds[h] = struct{}{}
	if ks := lk.keys[names.key]; ks != nil {
		ks.holder = h
	}
	if lt := lk.opts.LeaseTime; lt > 0 {
		h.deadline = sent.Add(lt)
		h.timer = time.AfterFunc(time.Until(h.deadline), h.expire)
	} else {
		h.dog = lk.dog.Start(sent.Add(lk.ttl), h.renew, h.watchLost)
	}
	lk.mu.Unlock()
	return h, nil
}

// Base is the fencing token acquire.lua or transfer.lua minted for this
// owner: the cohort uses it as the lease's token as is.
func (h *hold) Base() uint64 { return h.token }

// Done closes when the lock is, or may be, lost.
func (h *hold) Done() <-chan struct{} { return h.loss.Done() }

// AfterFunc runs f once Done closes (the cohort's loss watch).
func (h *hold) AfterFunc(f func()) func() bool { return h.loss.AfterFunc(f) }

// Err says why Done closed.
func (h *hold) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// Passable: still held as far as this process knows. Validity does not
// matter: a transfer gives the new owner a fresh TTL, and fails if the old
// one no longer holds the lock.
func (h *hold) Passable() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost == nil && !h.ended && !h.freed
}

// lose ends h as lost unless it ended already, and returns its lease.
func (h *hold) lose(err error) lock.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.loseLocked(err)
	return h.ls
}

func (h *hold) loseLocked(err error) {
	if h.lost != nil || h.ended {
		return
	}
	h.lost = err
	h.stopLocked()
	h.loss.Close(err)
}

// stopLocked stops the watchdog or the LeaseTime expiry.
func (h *hold) stopLocked() {
	if h.dog != nil {
		h.dog.Stop()
	} else {
		h.timer.Stop()
	}
}

// endLocked stops keeping h alive.
func (h *hold) endLocked() {
	h.ended = true
	h.stopLocked()
	h.lk.mu.Lock()
	delete(h.lk.holds, h)
	h.lk.mu.Unlock()
}

// extendLocked follows a PEXPIRE done by a re-entry or partial release. The
// watchdog needs nothing: its next renewal is due anyway.
func (h *hold) extendLocked(sent time.Time) {
	if lt := h.lk.opts.LeaseTime; lt > 0 && h.timer != nil {
		h.deadline = sent.Add(lt)
		h.timer.Reset(time.Until(h.deadline))
	}
}

// Release drops the owner's last hold: release.lua deletes the lock and
// publishes. When a goroutine of this Locker goes on waiting for the key
// (the cohort did not pass: the bound was reached), the release yields: it
// publishes this Locker's yield message, and when other connections listen
// the Locker holds its next attempt back until one of them released (or a
// short fallback passed), so another process goes first. A lost hold's
// owner is dropped whatever its count (abandon.lua). After Close nothing is
// sent: the lock expires after its TTL, as if the process had died.
func (h *hold) Release(ctx context.Context) error {
	lk := h.lk
	h.mu.Lock()
	defer h.mu.Unlock()
	lost, freed := h.lost, h.freed
	h.endLocked()
	if lk.isClosed() {
		return fmt.Errorf("%w: locker closed, the lock expires after its TTL", lock.ErrNotHeld)
	}
	holdBack := false
	defer func() { lk.settled(h, holdBack) }()
	switch {
	case freed:
		return nil
	case lost != nil:
		rctx, cancel := context.WithTimeout(ctx, abandonTimeout)
		defer cancel()
		_ = abandonScript.Run(rctx, lk.rdb, h.names.keys[:1], h.owner, h.names.channel, msgUnlock).Err()
		return fmt.Errorf("%w: %w", lock.ErrNotHeld, lost)
	}
	msg, self := lk.yielding(h.names.key)
	n, err := releaseScript.Run(ctx, lk.rdb, h.names.keys[:1], h.owner, lk.ttlArg, h.names.channel, msg, self).Int64()
	switch {
	case err != nil:
		lk.abandon(h.names, h.owner) // whether it was dropped is unknown
		return fmt.Errorf("%w: release failed, dropping the hold in the background: %w", lock.ErrUnavailable, err)
	case n == relYielded:
		lk.yields.Add(1)
		holdBack = true
	case n > 0:
		lk.abandon(h.names, h.owner) // holds nobody knew of: nobody would release them
	case n < 0:
		return fmt.Errorf("%w: expired or taken before release", lock.ErrNotHeld)
	}
	return nil
}

// Transfer hands the lock to a new owner of this Locker in one script call
// (transfer.lua: the owner field replaced, the TTL reset, the fence INCRed)
// and returns the new owner's hold: a hand-off. A reply that never came
// leaves either owner possibly holding the lock, so both are dropped in the
// background; the cohort then treats this hold as lost.
func (h *hold) Transfer(ctx context.Context) (cohort.Hold, error) {
	lk := h.lk
	h.mu.Lock()
	defer h.mu.Unlock()
	owner := lk.newOwner()
	sent := time.Now()
	v, err := transferScript.Run(ctx, lk.rdb, h.names.keys, h.owner, owner, lk.ttlArg).Result()
	var status, n int64
	if err == nil {
		status, n, err = pair(v)
	}
	if err == nil && status == xferDone {
		h.endLocked()
		nh, err := lk.newHold(h.names, owner, uint64(n), sent)
		if err != nil {
			return nil, err // closed meanwhile: newHold dropped the lock
		}
		return nh, nil
	}
	h.freed = true
	h.endLocked()
	if err == nil && status == xferNotOwner {
		return nil, fmt.Errorf("%w: expired or taken before the hand-off", lock.ErrNotHeld)
	}
	if err == nil {
		err = fmt.Errorf("unexpected transfer status %d", status)
	}
	lk.abandon(h.names, owner)
	lk.abandon(h.names, h.owner)
	return nil, fmt.Errorf("%w: hand-off: %w", lock.ErrUnavailable, err)
}
