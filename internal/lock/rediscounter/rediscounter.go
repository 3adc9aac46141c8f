// Package rediscounter is the fencing counter the Redis lock backends
// (redislock, redissonlock) keep in Redis per lock: their scripts INCR it
// once per acquisition (and redissonlock's once per hand-off), it never
// expires, and it only moves forward. Advance moves it past a fence's
// high-water mark after a Redis that lost its state restarted it low
// (lock.TokenAdvancer); each backend maps its token layout onto it.
package rediscounter

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
)

var (
	//go:embed advance.lua
	advanceLua    string
	advanceScript = redis.NewScript(advanceLua)
)

// ErrRange: no token of the backend can exceed the value asked for. The
// backends export it as their ErrTokenRange.
var ErrRange = errors.New("fencing token out of range")

// Advance sets the counter at key to at least min, never lowering it, and
// reports whether it moved. It is idempotent and safe to call concurrently
// with anything. The counter is compared as a decimal string in Lua, not as
// a Lua number (a double, exact only below 2^53), so a counter of any size
// is judged exactly. A Redis failure, or a counter that is not a
// non-negative integer (left alone), returns an error wrapping
// lock.ErrUnavailable.
func Advance(ctx context.Context, rdb redis.Scripter, key string, min uint64) (bool, error) {
	moved, err := advanceScript.Run(ctx, rdb, []string{key}, strconv.FormatUint(min, 10)).Int64()
	if err != nil {
		return false, fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
	}
	return moved == 1, nil
}
