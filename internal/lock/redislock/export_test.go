package redislock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
)

// ShortenValidity makes the lock behind l look confirmed for only left more,
// as if renewals had been failing, so that a test can check that a lock
// short of validity is not passed on. l must come from this package.
func ShortenValidity(l lock.Lease, left time.Duration) {
	hd, _ := cohort.HoldOf(l)
	h := hd.(*hold)
	h.l.hmu.Lock()
	defer h.l.hmu.Unlock()
	h.dog.SetValidUntil(time.Now().Add(left))
}

// LockKey is the Redis key holding key's owner, for tests that delete it.
func LockKey(key string) string { return keysFor(key)[0] }

// QueueKey is the Redis sorted set of key's remote waiters.
func QueueKey(key string) string { return keysFor(key)[2] }

// Waiting reports how many goroutines of l are queued locally for key
// behind the one holding it or contending in Redis.
func Waiting(l *Locker, key string) int { return l.co.Waiting(key) }

// FenceKey is the Redis key of key's fencing counter, for tests that wipe it.
func FenceKey(key string) string { return keysFor(key)[1] }

// Scripts run one script call as the Locker does, for tests that repeat a
// call the way a client retry after a lost reply would.
type Scripts struct {
	Rdb redis.UniversalClient
	TTL time.Duration
}

// Acquire runs acquire.lua for owner.
func (s Scripts) Acquire(ctx context.Context, key, owner string) ([]int64, error) {
	return acquireScript.Run(ctx, s.Rdb, keysFor(key), owner, s.TTL.Milliseconds(), entryLife.Milliseconds()).Int64Slice()
}

// Release runs release.lua for owner.
func (s Scripts) Release(ctx context.Context, key, owner string) (int64, error) {
	return releaseScript.Run(ctx, s.Rdb, keysFor(key), owner).Int64()
}

// Renew runs renew.lua for owner.
func (s Scripts) Renew(ctx context.Context, key, owner string) (int64, error) {
	return renewScript.Run(ctx, s.Rdb, keysFor(key)[:1], owner, s.TTL.Milliseconds()).Int64()
}

// EntriesKey is the Redis hash of key's remote waiters' entries.
func EntriesKey(key string) string { return keysFor(key)[3] }
