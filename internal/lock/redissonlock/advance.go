package redissonlock

import (
	"context"
	"fmt"
	"log/slog"

	"seckill/internal/lock"
	"seckill/internal/lock/rediscounter"
)

var _ lock.TokenAdvancer = (*Locker)(nil)

// ErrTokenRange is returned by AdvanceTokens for a value no token of this
// backend can exceed exactly (see maxAdvance).
var ErrTokenRange = rediscounter.ErrRange

// maxAdvance is the largest mark AdvanceTokens accepts. acquire.lua and
// transfer.lua return INCR's reply through a Lua number, a double, exact
// only up to 2^53, so the token after the mark must not pass 2^53-1.
const maxAdvance = 1<<53 - 2

// AdvanceTokens moves key's token sequence past above (see
// lock.TokenAdvancer). A token of this backend is the "<key>:fence" counter
// itself, so the counter is set to at least above, never lowered, and the
// next acquisition or local hand-off, each of which INCRs it, gets a token
// greater than above. It is idempotent and safe to call concurrently with
// anything, from any number of processes.
//
// Every acquisition of key that starts after it returns nil gets a token
// above `above`: there is no in-memory token here, a hand-off between
// goroutines mints its token in Redis too. Leases from before the call
// (and their re-entries, which keep the token) may carry low tokens; a fence
// refuses them, as it should refuse anything from before the lock server
// forgot.
//
// The counter is moved by rediscounter.Advance, exact for any counter.
// Since tokens themselves pass through Lua numbers, an above
// greater than 2^53-2 returns an error wrapping ErrTokenRange; a Redis
// failure, or a counter that is not a non-negative integer, one wrapping
// lock.ErrUnavailable.
func (lk *Locker) AdvanceTokens(ctx context.Context, key string, above uint64) error {
	if above > maxAdvance {
		return fmt.Errorf("redissonlock: advance tokens of %q past %d: %w", key, above, ErrTokenRange)
	}
	moved, err := rediscounter.Advance(ctx, lk.rdb, key+fenceSuffix, above)
	if err != nil {
		return fmt.Errorf("redissonlock: advance tokens of %q: %w", key, err)
	}
	if moved {
		slog.Info("fencing counter advanced", "lock", "redisson", "key", key, "counter", above)
	}
	return nil
}
