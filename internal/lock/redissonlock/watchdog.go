package redissonlock

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"seckill/internal/lock"
)

// watchdog renews the lease's TTL every Watchdog/3 until ctx ends (final
// Release, loss, Close). It ends the lease as lost when a renewal finds
// another owner, or when the validity (start of the last successful renewal
// plus the TTL, a lower bound of the server-side expiry) passes without one:
// after that moment another process may hold the lock.
func (l *Lease) watchdog(ctx context.Context, sent time.Time) {
	ttl := l.lk.ttl
	valid := sent.Add(ttl)
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	expired := time.NewTimer(time.Until(valid))
	defer expired.Stop()
	var lastErr error
	for {
		select {
		case <-ctx.Done():
			return
		case <-expired.C:
			l.lose(fmt.Errorf("redisson: %q not renewed within %v (last error: %v): %w", l.key, ttl, lastErr, lock.ErrLost))
			return
		case <-tick.C:
		}
		// A renewal that answers after the validity is worthless.
		rctx, cancel := context.WithDeadline(ctx, valid)
		start := time.Now()
		ok, err := renewScript.Run(rctx, l.lk.rdb, []string{l.key}, l.owner, millis(ttl)).Int64()
		cancel()
		switch {
		case err == nil && ok == 1:
			l.lk.renewals.Add(1)
			valid = start.Add(ttl)
			expired.Reset(time.Until(valid))
		case err == nil:
			l.lose(fmt.Errorf("redisson: %q is no longer held by this lease (expired, deleted or force-unlocked): %w", l.key, lock.ErrLost))
			return
		case ctx.Err() != nil:
			return
		default:
			lastErr = err
			slog.Warn("redisson: watchdog renewal failed", "key", l.key, "err", err)
		}
	}
}
