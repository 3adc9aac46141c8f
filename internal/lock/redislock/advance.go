package redislock

import (
	"context"
	"fmt"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
	"seckill/internal/lock/rediscounter"
)

var _ lock.TokenAdvancer = (*Locker)(nil)

// ErrTokenRange is returned by AdvanceTokens for a value no token of this
// backend can exceed: the counter part of a token (its top 48 bits) would
// overflow.
var ErrTokenRange = rediscounter.ErrRange

// maxCounter is the largest {K}:fence value whose token (cohort.Token)
// still fits in a uint64. AdvanceTokens leaves room for the INCR after it.
const maxCounter = cohort.MaxBase

// AdvanceTokens moves key's token sequence past above (see
// lock.TokenAdvancer): it sets {K}:fence to at least above>>16 + 1, never
// lowering it, so the next acquisition from Redis, which INCRs the counter,
// gets a token (counter<<16 | 0) greater than above. It is idempotent and
// safe to call concurrently with anything, from any number of processes.
//
// Every acquisition of key through this Locker that starts after it returns
// nil gets a token above `above`: a lock this Locker holds from before the
// call is no longer passed in memory (its passes would keep the old counter),
// so local waiters go to Redis for a new one. Leases passed or acquired
// before the call keep their tokens, which may be low; a fence refuses them,
// as it should refuse anything from before the lock server forgot. Other
// Lockers holding key from before the call likewise pass their old counter
// to their own goroutines until their hold goes back to Redis; only a call
// on each of them (each stock service instance calls it when its own fence
// refuses) stops that.
//
// The counter is moved by rediscounter.Advance, exact for any counter;
// counters of this backend stay below 2^48. An above so large that
// the next counter would not fit in a token returns an error wrapping
// ErrTokenRange; a Redis failure, or a counter that is not a non-negative
// integer, one wrapping lock.ErrUnavailable.
func (l *Locker) AdvanceTokens(ctx context.Context, key string, above uint64) error {
	floor := cohort.BaseOf(above) + 1
	if floor >= maxCounter {
		return fmt.Errorf("redislock: advance tokens of %q past %d: %w", key, above, ErrTokenRange)
	}
	k := keysFor(key)
	moved, err := rediscounter.Advance(ctx, l.rdb, k[1], floor)
	if err != nil {
		return fmt.Errorf("redislock: advance tokens of %q: %w", key, err)
	}
	if moved {
		l.log.Info("fencing counter advanced", "key", key, "above", above, "counter", floor)
	}
	// A hold acquired before the advance may be in place, or about to be
	// (its acquire.lua ran before ours): no more passes on it. The floor is
	// kept per key for the Locker's life: only keys a fence refused are
	// advanced, and a floor only grows.
	l.hmu.Lock()
	if l.floors[key] < floor {
		l.floors[key] = floor
	}
	l.hmu.Unlock()
	return nil
}
