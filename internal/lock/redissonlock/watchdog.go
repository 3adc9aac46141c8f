package redissonlock

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"seckill/internal/lock"
)

// The watchdog is a timer per lease, not a goroutine: most flash-sale locks
// are released long before the first renewal is due, and a parked goroutine
// plus ticker per lease would be paid on every sale.

// startWatchdogLocked schedules the first renewal. Called with l.mu held.
func (l *Lease) startWatchdogLocked(sent time.Time) {
	l.valid = sent.Add(l.lk.ttl)
	l.renewTimer = time.AfterFunc(l.lk.ttl/3, l.renew)
}

// renew is one watchdog tick. It extends the TTL when this lease still owns
// the lock and schedules the next tick. The lease is lost when Redis shows
// another owner, or when the validity (start of the last successful renewal
// plus the TTL, a lower bound of the server-side expiry) passes without a
// renewal: from then on another process may hold the lock.
func (l *Lease) renew() {
	lk := l.lk
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		return
	}
	lk.wg.Add(1) // under mu, so Close's Wait covers a tick in flight
	lk.mu.Unlock()
	defer lk.wg.Done()

	l.mu.Lock()
	if l.holds == 0 {
		l.mu.Unlock()
		return
	}
	valid := l.valid
	if !time.Now().Before(valid) {
		l.endLocked(fmt.Errorf("redisson: %q not renewed within %v (last error: %v): %w", l.key, lk.ttl, l.lastErr, lock.ErrLost))
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()

	// A renewal that answers after the validity is worthless. l.mu is not
	// held here, so Release never waits for a renewal round trip.
	ctx, cancel := context.WithDeadline(lk.ctx, valid)
	start := time.Now()
	ok, err := renewScript.Run(ctx, lk.rdb, l.names.keys[:1], l.owner, lk.ttlArg).Int64()
	cancel()

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds == 0 { // released, lost or closed meanwhile
		return
	}
	switch {
	case err == nil && ok == 1:
		lk.renewals.Add(1)
		l.valid = start.Add(lk.ttl)
		l.renewTimer.Reset(lk.ttl / 3)
	case err == nil:
		l.endLocked(fmt.Errorf("redisson: %q is no longer held by this lease (expired, deleted or force-unlocked): %w", l.key, lock.ErrLost))
	case lk.ctx.Err() != nil:
	default:
		l.lastErr = err
		slog.Warn("redisson: watchdog renewal failed", "key", l.key, "err", err)
		// Retry, but wake no later than the validity to declare the loss.
		l.renewTimer.Reset(min(lk.ttl/3, max(time.Until(l.valid), 0)))
	}
}
