package redislock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/lock"
)

// renewRetry is how soon the watchdog tries again after a renewal failed for
// a reason other than losing ownership (a timeout, a reconnect).
const renewRetry = 100 * time.Millisecond

// hold is one acquisition of the Redis lock by this Locker: the owner value
// in Redis, the fencing counter it got, and the watchdog that renews it. Up
// to Options.LocalHandoffs leases follow one another on a hold before it is
// released to Redis. Fields below c are guarded by Locker.cmu.
type hold struct {
	l     *Locker
	c     *cohort
	owner string
	base  uint64 // {K}:fence value of this acquisition

	passes     uint64    // leases passed in memory so far; token low bits
	validUntil time.Time // last confirmed renewal (or acquisition) + TTL
	current    *lease    // the lease that holds it now
	timer      *time.Timer
	lost       error // non-nil once the lock is, or may be, gone
	ended      bool  // released to Redis: the watchdog must not renew
}

// lease is one holder's turn on a hold.
type lease struct {
	h        *hold
	token    uint64
	released atomic.Bool

	// The lease's end, as lock.Signal does it, but with the channel made
	// only when Done is called: most holders never call it, and under
	// contention a lease is made per sale.
	mu     sync.Mutex
	done   chan struct{}
	err    error
	closed bool
}

// closedChan is Done of a lease that ended before anyone asked for Done.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// end records err and closes Done; it reports whether this call did, so
// the first reason is the one kept.
func (s *lease) end(err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.closed, s.err = true, err
	if s.done != nil {
		close(s.done)
	} else {
		s.done = closedChan
	}
	return true
}

func (s *lease) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
	}
	return s.done
}

func (s *lease) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// newHoldLocked records a Redis acquisition for c and returns its first
// lease. l.cmu must be held, c.busy must be the caller's, and the Locker
// must not be closed.
func (l *Locker) newHoldLocked(c *cohort, owner string, base uint64, validUntil time.Time) *lease {
	h := &hold{l: l, c: c, owner: owner, base: base, validUntil: validUntil}
	c.busy = false
	c.hold = h
	s := l.newLeaseLocked(h)
	h.timer = time.AfterFunc(l.nextRenewal(time.Now(), validUntil), func() { l.renew(h) })
	return s
}

// newLeaseLocked starts the next lease on h. Its token is the acquisition's
// counter value shifted left 16 bits, plus the number of passes so far: a
// later Redis acquisition INCRs the counter, so its token exceeds them all.
func (l *Locker) newLeaseLocked(h *hold) *lease {
	l.acquired.Add(1)
	s := &lease{h: h, token: h.base<<tokenShift | h.passes}
	h.current = s
	return s
}

func (s *lease) Key() string   { return s.h.c.key }
func (s *lease) Token() uint64 { return s.token }

// Release passes the lock to the next goroutine of this Locker waiting for
// it, without a round trip, while the local bound and the lock's validity
// allow; otherwise it hands the lock to the next waiter in Redis, or frees
// it. The first call does that; later calls return lock.ErrNotHeld.
func (s *lease) Release(ctx context.Context) error {
	if !s.released.CompareAndSwap(false, true) {
		return fmt.Errorf("redislock: release %q: %w", s.h.c.key, lock.ErrNotHeld)
	}
	h, c := s.h, s.h.c
	l := h.l
	l.cmu.Lock()
	if l.passLocked(h, s, time.Now()) {
		l.cmu.Unlock()
		return nil
	}
	// Stop the watchdog first: a renewal racing the release script would
	// otherwise see "not owner" and report a loss that did not happen.
	h.ended = true
	if h.timer != nil {
		h.timer.Stop()
	}
	c.hold = nil
	c.busy = true
	l.cmu.Unlock()

	res, err := releaseScript.Run(ctx, l.rdb, c.k, h.owner).Int64()

	l.cmu.Lock()
	l.handOnBusyLocked(c)
	l.cmu.Unlock()
	switch {
	case err != nil:
		s.end(fmt.Errorf("redislock: %q: %w: release failed, the lock expires after its TTL: %w", c.key, lock.ErrLost, err))
		return fmt.Errorf("redislock: release %q: %w: %w", c.key, lock.ErrUnavailable, err)
	case res < 0:
		s.end(fmt.Errorf("redislock: %q: %w: expired or taken before release", c.key, lock.ErrLost))
		return fmt.Errorf("redislock: release %q: %w", c.key, lock.ErrNotHeld)
	}
	s.end(lock.ErrReleased)
	return nil
}

// nextRenewal is how long from now the watchdog should run, given when the
// last renewal (or the acquisition) was sent: TTL/3 later, and never after
// the lock's validity ends, so that a lapse is reported on time.
func (l *Locker) nextRenewal(sent, validUntil time.Time) time.Duration {
	next := sent.Add(l.ttl / 3)
	if validUntil.Before(next) {
		next = validUntil
	}
	return time.Until(next)
}

// renew is h's watchdog, run by its timer: one timer per hold, not a
// goroutine per lease. It extends the lock by TTL, and reports the loss to
// the current holder when Redis says the lock is someone else's or when the
// validity passes with every renewal since having failed.
func (l *Locker) renew(h *hold) {
	if !l.track() {
		return // closing: Close marks every hold lost
	}
	defer l.wg.Done()
	l.cmu.Lock()
	if h.ended || h.lost != nil {
		l.cmu.Unlock()
		return
	}
	validUntil := h.validUntil
	if !time.Now().Before(validUntil) {
		l.loseLocked(h, fmt.Errorf("%w: not renewed within its TTL", lock.ErrLost))
		l.cmu.Unlock()
		return
	}
	l.cmu.Unlock()

	sent := time.Now()
	// A renewal that answers after validUntil is worthless: the lock may be
	// someone else's by then.
	ctx, cancel := context.WithDeadline(l.ctx, validUntil)
	ok, err := renewScript.Run(ctx, l.rdb, h.c.k[:1], h.owner, l.ttl.Milliseconds()).Bool()
	cancel()

	l.cmu.Lock()
	defer l.cmu.Unlock()
	if h.ended || h.lost != nil {
		return // released meanwhile (a "not owner" is our own release), or closed
	}
	var wait time.Duration
	switch {
	case err != nil:
		l.log.Debug("renewal failed, retrying", "key", h.c.key, "err", err, "valid_for", time.Until(validUntil))
		wait = min(l.ttl/3, renewRetry)
		if left := time.Until(validUntil); left < wait {
			wait = left
		}
	case !ok:
		l.loseLocked(h, fmt.Errorf("%w: expired or taken by another owner", lock.ErrLost))
		return
	default:
		l.renewals.Add(1)
		h.validUntil = sent.Add(l.ttl)
		wait = l.nextRenewal(sent, h.validUntil)
	}
	h.timer.Reset(wait)
}

// loseLocked marks h lost: no more passes, no more renewals, and the current
// holder's Done closes. Releasing that lease still ends the hold in Redis
// (owner-checked). l.cmu must be held.
func (l *Locker) loseLocked(h *hold, err error) {
	if h.lost != nil {
		return
	}
	h.lost = err
	if h.timer != nil {
		h.timer.Stop()
	}
	if h.current.end(fmt.Errorf("redislock: %q: %w", h.c.key, err)) {
		l.log.Warn("lock lost", "key", h.c.key, "token", h.current.token, "err", err)
	}
}
