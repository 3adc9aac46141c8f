package redislock

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
	"seckill/internal/lock/watchdog"
)

// renewRetry is how soon the watchdog tries again after a renewal failed for
// a reason other than losing ownership (a timeout, a reconnect).
const renewRetry = 100 * time.Millisecond

// hold is one acquisition of the Redis lock by this Locker, the cohort.Hold
// of this backend: the owner value in Redis, the fencing counter it got, and
// the watchdog that renews it. Up to Options.LocalHandoffs leases follow one
// another on a hold before it is released to Redis. Its Signal (Done) closes
// when the lock is, or may be, gone: Redis says it is someone else's, or its
// validity passed with every renewal since having failed. dog and ended are
// guarded by Locker.hmu.
type hold struct {
	l            *Locker
	key          string
	k            keys
	owner        string
	base         uint64 // {K}:fence value of this acquisition
	*lock.Signal        // Done, Err, AfterFunc: see above

	dog   *watchdog.Dog // renews it; its validity bounds passing
	ended bool          // released to Redis: the watchdog must not renew
}

var _ cohort.Hold = (*hold)(nil)

// Base is the {K}:fence value: tokens are base<<16 | passes. A later Redis
// acquisition INCRs the counter, so its tokens exceed them all.
func (h *hold) Base() uint64 { return h.base }

// Passable: not lost, more than TTL/3 of confirmed validity left (a pass
// never extends a lock past what Redis granted), and the counter not below
// the floor AdvanceTokens set for the key.
func (h *hold) Passable() bool {
	l := h.l
	l.hmu.Lock()
	defer l.hmu.Unlock()
	return h.Err() == nil && !h.ended && h.base >= l.floors[h.key] && time.Until(h.dog.ValidUntil()) > l.passMargin
}

// Release stops the watchdog and runs release.lua, which hands the lock to
// the head of Redis's queue or frees it (owner-checked: a lock that expired
// or was taken is not touched). After Close it sends nothing: the lock is
// left to expire after its TTL, as if the process had died.
func (h *hold) Release(ctx context.Context) error {
	l := h.l
	// Stop the watchdog first: a renewal racing the release script would
	// otherwise see "not owner" and report a loss that did not happen.
	l.hmu.Lock()
	h.ended = true
	h.dog.Stop()
	l.hmu.Unlock()
	if l.isClosed() {
		return fmt.Errorf("%w: locker closed, the lock expires after its TTL", lock.ErrNotHeld)
	}
	res, err := releaseScript.Run(ctx, l.rdb, h.k, h.owner).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("%w: release failed, the lock expires after its TTL: %w", lock.ErrUnavailable, err)
	case res < 0:
		return fmt.Errorf("%w: expired or taken before release", lock.ErrNotHeld)
	}
	return nil
}

// renew is h's watchdog renewal: renew.lua extends the owner's lock.
func (l *Locker) renew(h *hold) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		return renewScript.Run(ctx, l.rdb, h.k[:1], h.owner, l.ttl.Milliseconds()).Bool()
	}
}

// watchLost is h's watchdog's report of a loss.
func (l *Locker) watchLost(h *hold) func(error) {
	return func(err error) {
		l.hmu.Lock()
		defer l.hmu.Unlock()
		if !h.ended { // else our own release ended it
			l.loseLocked(h, err)
		}
	}
}

// loseLocked marks h lost: no more passes, no more renewals, and Done
// closes (the cohort then ends the current lease and gives the hold back,
// which runs the owner-checked release.lua). l.hmu must be held.
func (l *Locker) loseLocked(h *hold, err error) {
	if h.Close(err) {
		h.dog.Stop()
	}
}
