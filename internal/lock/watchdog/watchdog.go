// Package watchdog keeps a lock with a TTL alive for the lock backends that
// renew one (redislock, redissonlock): a timer per lock, not a goroutine,
// since most locks are released before their first renewal is due. It
// renews every TTL/3 and reports the lock lost when the server says it is
// someone else's, or when its validity passes without a renewal: the
// validity is when the last confirmed renewal (or the acquisition) was sent
// plus the TTL, a lower bound of the server-side expiry, so a slow reply
// only shortens it and from then on another process may hold the lock.
package watchdog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"seckill/internal/lock"
)

// Config is what a backend's Locker shares among its locks' watchdogs.
type Config struct {
	// TTL is what a renewal extends the lock by.
	TTL time.Duration
	// Retry bounds the wait before the next attempt after a failed
	// renewal; never later than the validity. The default is TTL/3.
	Retry time.Duration
	// Ctx cuts renewals in flight short when the Locker closes.
	Ctx context.Context
	// Track, called before each renewal, registers it with the Locker's
	// Close and reports false once the Locker is closed (no renewal then);
	// the returned done is called when the renewal is over.
	Track func() (done func(), ok bool)
	// Renewed, if set, is called after each confirmed renewal.
	Renewed func()
	// Log receives failed renewals. The default is slog.Default().
	Log *slog.Logger
}

// Dog watches one lock. Its methods are safe for concurrent use.
type Dog struct {
	cfg   *Config
	renew func(ctx context.Context) (held bool, err error)
	lost  func(err error)

	mu      sync.Mutex
	timer   *time.Timer
	valid   time.Time
	lastErr error
	stopped bool
}

// Start watches a lock valid until valid. renew extends it by TTL on the
// server (held false: it is someone else's), within a ctx that ends at the
// validity, since a renewal that answers later is worthless. lost is
// called at most once, without the Dog's lock, when the lock is or may be
// lost; it may race with Stop, so it must check that the lock is still
// wanted.
func (cfg *Config) Start(valid time.Time, renew func(ctx context.Context) (bool, error), lost func(error)) *Dog {
	d := &Dog{cfg: cfg, renew: renew, lost: lost, valid: valid}
	d.mu.Lock()
	d.timer = time.AfterFunc(d.next(time.Now()), d.tick)
	d.mu.Unlock()
	return d
}

// Stop ends the renewals: the lock was released, handed over or lost.
func (d *Dog) Stop() {
	d.mu.Lock()
	d.stopped = true
	d.timer.Stop()
	d.mu.Unlock()
}

// ValidUntil is the lower bound of the lock's server-side expiry.
func (d *Dog) ValidUntil() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.valid
}

// SetValidUntil replaces the validity, for tests that make a lock look as
// if its renewals had been failing.
func (d *Dog) SetValidUntil(t time.Time) {
	d.mu.Lock()
	d.valid = t
	d.mu.Unlock()
}

// next is how long from now the next renewal is due, given when the last
// one was sent: TTL/3 later, never after the validity, so a lapse is
// reported on time.
func (d *Dog) next(sent time.Time) time.Duration {
	next := sent.Add(d.cfg.TTL / 3)
	if d.valid.Before(next) {
		next = d.valid
	}
	return time.Until(next)
}

// tick is one renewal, run by the timer.
func (d *Dog) tick() {
	done, ok := d.cfg.Track()
	if !ok {
		return // closing: the Locker ends every lease
	}
	defer done()
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	valid := d.valid
	if !time.Now().Before(valid) {
		d.stopped = true
		err := fmt.Errorf("%w: not renewed within its TTL %v (last error: %v)", lock.ErrLost, d.cfg.TTL, d.lastErr)
		d.mu.Unlock()
		d.lost(err)
		return
	}
	d.mu.Unlock()

	sent := time.Now()
	ctx, cancel := context.WithDeadline(d.cfg.Ctx, valid)
	held, err := d.renew(ctx)
	cancel()

	d.mu.Lock()
	if d.stopped { // released meanwhile (a "not held" is our own release), or lost
		d.mu.Unlock()
		return
	}
	switch {
	case err == nil && held:
		d.valid = sent.Add(d.cfg.TTL)
		d.timer.Reset(d.next(sent))
		d.mu.Unlock()
		if d.cfg.Renewed != nil {
			d.cfg.Renewed()
		}
	case err == nil:
		d.stopped = true
		d.mu.Unlock()
		d.lost(fmt.Errorf("%w: expired, deleted or taken by another owner", lock.ErrLost))
	case d.cfg.Ctx.Err() != nil:
		d.mu.Unlock()
	default:
		d.lastErr = err
		retry := d.cfg.Retry
		if retry <= 0 {
			retry = d.cfg.TTL / 3
		}
		// Retry, but wake no later than the validity to declare the loss.
		d.timer.Reset(min(retry, max(time.Until(valid), 0)))
		d.mu.Unlock()
		log := d.cfg.Log
		if log == nil {
			log = slog.Default()
		}
		log.Warn("lock renewal failed, retrying", "err", err, "valid_for", time.Until(valid).Round(time.Millisecond))
	}
}
