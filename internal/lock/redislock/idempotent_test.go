package redislock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locktest"
	"seckill/internal/lock/redislock"
	"seckill/internal/servers/servertest"
)

// state is what the scripts change, without the parts that move by
// themselves (TTLs, queue entry deadlines).
type state struct {
	owner, fence string
	queue        []string
	entries      []string
}

func snapshot(t *testing.T, rdb *redis.Client, key string) state {
	t.Helper()
	ctx := t.Context()
	get := func(k string) string {
		v, err := rdb.Get(ctx, k).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		return v
	}
	q, err := rdb.ZRange(ctx, redislock.QueueKey(key), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	e, err := rdb.HKeys(ctx, redislock.EntriesKey(key)).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(e)
	return state{owner: get(redislock.LockKey(key)), fence: get(redislock.FenceKey(key)), queue: q, entries: e}
}

func (s state) equal(o state) bool {
	return s.owner == o.owner && s.fence == o.fence && slices.Equal(s.queue, o.queue) && slices.Equal(s.entries, o.entries)
}

// Every script, run a second time for the same attempt (a client retry
// after a lost reply), leaves Redis as the first run left it, and an
// acquisition's second run reports the same token.
func TestScriptsIdempotentPerAttempt(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := newClient(t, srv)
	sc := redislock.Scripts{Rdb: rdb, TTL: 5 * time.Second}
	ctx := context.Background()

	mustAcquire := func(t *testing.T, key, owner string, want int64) []int64 {
		t.Helper()
		v, err := sc.Acquire(ctx, key, owner)
		if err != nil || v[0] != want {
			t.Fatalf("acquire %s = %v, %v; want status %d", owner, v, err, want)
		}
		return v
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, key string)
		run   func(t *testing.T, key string, second bool)
	}{
		{"AcquireFree", nil, func(t *testing.T, key string, second bool) {
			v := mustAcquire(t, key, "p:1", map[bool]int64{false: 1, true: 2}[second])
			if v[1] != 1 {
				t.Fatalf("token = %d, want 1 on both runs", v[1])
			}
		}},
		{"AcquireQueued", func(t *testing.T, key string) {
			mustAcquire(t, key, "p:1", 1)
			mustAcquire(t, key, "q:1", 0)
			mustAcquire(t, key, "r:1", 0)
		}, func(t *testing.T, key string, _ bool) {
			mustAcquire(t, key, "q:1", 0) // a fallback retry, run twice
			if q := snapshot(t, rdb, key).queue; !slices.Equal(q, []string{"q:1", "r:1"}) {
				t.Fatalf("queue = %v, want [q:1 r:1]: a repeat keeps its place", q)
			}
		}},
		{"ReleaseHandsOver", func(t *testing.T, key string) {
			mustAcquire(t, key, "p:1", 1)
			mustAcquire(t, key, "q:1", 0)
		}, func(t *testing.T, key string, second bool) {
			n, err := sc.Release(ctx, key, "p:1")
			if want := map[bool]int64{false: 1, true: -1}[second]; err != nil || n != want {
				t.Fatalf("release = %d, %v; want %d", n, err, want)
			}
		}},
		{"ReleaseFrees", func(t *testing.T, key string) { mustAcquire(t, key, "p:1", 1) },
			func(t *testing.T, key string, second bool) {
				n, err := sc.Release(ctx, key, "p:1")
				if want := map[bool]int64{false: 0, true: -1}[second]; err != nil || n != want {
					t.Fatalf("release = %d, %v; want %d", n, err, want)
				}
			}},
		{"Renew", func(t *testing.T, key string) { mustAcquire(t, key, "p:1", 1) },
			func(t *testing.T, key string, _ bool) {
				if n, err := sc.Renew(ctx, key, "p:1"); err != nil || n != 1 {
					t.Fatalf("renew = %d, %v; want 1", n, err)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := locktest.Key(t)
			if tc.setup != nil {
				tc.setup(t, key)
			}
			tc.run(t, key, false)
			once := snapshot(t, rdb, key)
			tc.run(t, key, true)
			if twice := snapshot(t, rdb, key); !twice.equal(once) {
				t.Fatalf("state after a repeated run = %+v, want %+v as after one", twice, once)
			}
		})
	}
}
