package peers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// NaivePoll is the naive lock's fixed retry interval.
const NaivePoll = 10 * time.Millisecond

// naiveRelease deletes the lock only if it still holds our token, so the
// baseline is unsafe only in the way the articles' lock is (no fencing, no
// renewal), not in releasing someone else's lock.
//
// KEYS[1] lock key; ARGV[1] our token. Returns 1 if deleted, 0 otherwise.
var naiveRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// Naive is the baseline the flash-sale articles start from: SET key token NX
// PX ttl, and on failure sleep a fixed 10 ms and try again. It is what
// seckill's redis backend is measured against, kept deliberately plain: no
// queue, no notification, no renewal, no fencing token.
type Naive struct {
	rdb redis.UniversalClient
	key string
	ttl time.Duration
}

// NewNaive returns a naive lock on key with the given TTL.
func NewNaive(rdb redis.UniversalClient, key string, ttl time.Duration) *Naive {
	return &Naive{rdb: rdb, key: key, ttl: ttl}
}

// Lock polls SET NX every NaivePoll until it succeeds or ctx is done.
func (n *Naive) Lock(ctx context.Context) (Unlock, error) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	token := hex.EncodeToString(b[:])
	for {
		ok, err := n.rdb.SetNX(ctx, n.key, token, n.ttl).Result()
		if err != nil {
			return nil, fmt.Errorf("naive lock: setnx %q: %w", n.key, err)
		}
		if ok {
			return func(ctx context.Context) error {
				if err := naiveRelease.Run(ctx, n.rdb, []string{n.key}, token).Err(); err != nil {
					return fmt.Errorf("naive lock: release %q: %w", n.key, err)
				}
				return nil
			}, nil
		}
		select {
		case <-time.After(NaivePoll):
		case <-ctx.Done():
			return nil, fmt.Errorf("naive lock: %q: %w", n.key, ctx.Err())
		}
	}
}
