package redislock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"seckill/internal/lock"
)

// renewRetry is how soon the watchdog tries again after a renewal failed for
// a reason other than losing ownership (a timeout, a reconnect).
const renewRetry = 100 * time.Millisecond

// lease is one held Redis lock, kept alive by its watchdog goroutine.
type lease struct {
	l        *Locker
	key      string
	k        keys
	owner    string
	token    uint64
	sig      *lock.Signal
	released atomic.Bool
	stop     chan struct{} // closed by Release: the watchdog must not renew
}

// newLease starts the watchdog for a lock held until validUntil unless renewed.
func (l *Locker) newLease(key string, k keys, owner string, token uint64, validUntil time.Time) lock.Lease {
	l.acquired.Add(1)
	s := &lease{l: l, key: key, k: k, owner: owner, token: token, sig: lock.NewSignal(), stop: make(chan struct{})}
	if !l.spawn(func() { s.watch(validUntil) }) {
		// Closed between acquiring and here: behave as the lease would have
		// a moment later, lost with its Locker.
		s.sig.Close(fmt.Errorf("redislock: %q: %w: %w", key, lock.ErrLost, lock.ErrClosed))
	}
	return s
}

func (s *lease) Key() string           { return s.key }
func (s *lease) Token() uint64         { return s.token }
func (s *lease) Done() <-chan struct{} { return s.sig.Done() }
func (s *lease) Err() error            { return s.sig.Err() }

// Release hands the lock to the next waiter, or frees it. The first call
// talks to Redis; later calls return lock.ErrNotHeld.
func (s *lease) Release(ctx context.Context) error {
	if !s.released.CompareAndSwap(false, true) {
		return fmt.Errorf("redislock: release %q: %w", s.key, lock.ErrNotHeld)
	}
	// Stop the watchdog first: a renewal racing the release script would
	// otherwise see "not owner" and report a loss that did not happen.
	close(s.stop)
	res, err := releaseScript.Run(ctx, s.l.rdb, s.k, s.owner).Int64()
	switch {
	case err != nil:
		s.sig.Close(fmt.Errorf("redislock: %q: %w: release failed, the lock expires after its TTL: %w", s.key, lock.ErrLost, err))
		return fmt.Errorf("redislock: release %q: %w: %w", s.key, lock.ErrUnavailable, err)
	case res < 0:
		s.sig.Close(fmt.Errorf("redislock: %q: %w: expired or taken before release", s.key, lock.ErrLost))
		return fmt.Errorf("redislock: release %q: %w", s.key, lock.ErrNotHeld)
	}
	s.sig.Close(lock.ErrReleased)
	return nil
}

// watch renews the lock every TTL/3 until Release or Close. It closes Done
// when Redis says the lock is someone else's, or when validUntil (last
// confirmed renewal + TTL) passes with every renewal since having failed.
func (s *lease) watch(validUntil time.Time) {
	l := s.l
	interval := l.ttl / 3
	next := time.Now().Add(interval)
	if validUntil.Before(next) {
		next = validUntil
	}
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-l.done:
			s.lost(fmt.Errorf("%w: %w", lock.ErrLost, lock.ErrClosed))
			return
		case <-timer.C:
		}
		if !time.Now().Before(validUntil) {
			s.lost(fmt.Errorf("%w: not renewed within its TTL", lock.ErrLost))
			return
		}
		sent := time.Now()
		// A renewal that answers after validUntil is worthless: the lock may
		// be someone else's by then.
		ctx, cancel := context.WithDeadline(l.ctx, validUntil)
		ok, err := renewScript.Run(ctx, l.rdb, s.k[:1], s.owner, l.ttl.Milliseconds()).Bool()
		cancel()
		switch {
		case err != nil:
			l.log.Debug("renewal failed, retrying", "key", s.key, "err", err, "valid_for", time.Until(validUntil))
			next = time.Now().Add(min(interval, renewRetry))
		case !ok:
			select {
			case <-s.stop: // our own Release got there first
				return
			default:
			}
			s.lost(fmt.Errorf("%w: expired or taken by another owner", lock.ErrLost))
			return
		default:
			l.renewals.Add(1)
			validUntil = sent.Add(l.ttl)
			next = sent.Add(interval)
		}
		if validUntil.Before(next) {
			next = validUntil
		}
		timer.Reset(time.Until(next))
	}
}

func (s *lease) lost(err error) {
	if s.sig.Close(fmt.Errorf("redislock: %q: %w", s.key, err)) {
		s.l.log.Warn("lock lost", "key", s.key, "token", s.token, "err", err)
	}
}
