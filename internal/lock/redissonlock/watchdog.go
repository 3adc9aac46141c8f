package redissonlock

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/lock"
)

// renew is the watchdog's renewal (package watchdog): renew.lua extends
// the TTL only while this owner holds the lock.
func (h *hold) renew(ctx context.Context) (bool, error) {
	ok, err := renewScript.Run(ctx, h.lk.rdb, h.names.keys[:1], h.owner, h.lk.ttlArg).Int64()
	return ok == 1, err
}

// watchLost ends h as lost on the watchdog's report: not renewed in time,
// or Redis shows another owner (expired, deleted or force-unlocked).
func (h *hold) watchLost(err error) {
	h.lose(fmt.Errorf("redissonlock: %q: %w", h.names.key, err))
}

// expire ends a fixed-LeaseTime hold when its time is up. The deadline is
// re-checked because a re-entry may have extended it while this waited for mu.
func (h *hold) expire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended || time.Now().Before(h.deadline) {
		return
	}
	h.loseLocked(fmt.Errorf("redissonlock: lease time %v of %q elapsed: %w", h.lk.opts.LeaseTime, h.names.key, lock.ErrLost))
}
