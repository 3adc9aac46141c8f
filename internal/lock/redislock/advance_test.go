package redislock_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
	"seckill/internal/lock/redislock"
	"seckill/internal/servers/servertest"
)

// acquireToken acquires key, releases it, and returns its token.
func acquireToken(t *testing.T, lk lock.Locker, key string) uint64 {
	t.Helper()
	l, err := lk.Acquire(t.Context(), key)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	return l.Token()
}

// fence reads key's fencing counter ("" when absent).
func fence(t *testing.T, rdb *redis.Client, key string) string {
	t.Helper()
	v, err := rdb.Get(t.Context(), redislock.FenceKey(key)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return v
}

// A Redis that forgets its counter hands out tokens below those already
// seen; AdvanceTokens puts every later acquisition, from any process, above
// the high-water mark, and a smaller or repeated call never moves it back.
func TestAdvanceTokensAfterForget(t *testing.T) {
	srv := servertest.Redis(t)
	admin := newClient(t, srv)
	lk, _ := newLocker(t, srv, 5*time.Second)
	other, _ := newLocker(t, srv, 5*time.Second)
	key := locktest.Key(t)

	var high uint64
	for range 3 {
		high = acquireToken(t, lk, key)
	}
	if err := admin.Del(t.Context(), redislock.FenceKey(key)).Err(); err != nil {
		t.Fatal(err)
	}
	if got := acquireToken(t, lk, key); got >= high {
		t.Fatalf("token after the counter was wiped = %d, want below %d (the forget this repairs)", got, high)
	}

	if err := lk.AdvanceTokens(t.Context(), key, high); err != nil {
		t.Fatalf("AdvanceTokens: %v", err)
	}
	first := acquireToken(t, other, key) // another process: the counter is in Redis
	if first <= high {
		t.Fatalf("token after AdvanceTokens(%d) = %d, want above it", high, first)
	}

	counter := fence(t, admin, key)
	for _, above := range []uint64{high, 0, 1, high - 1<<16, first - 1} {
		if err := lk.AdvanceTokens(t.Context(), key, above); err != nil {
			t.Fatalf("AdvanceTokens(%d): %v", above, err)
		}
		if got := fence(t, admin, key); got != counter {
			t.Fatalf("counter after AdvanceTokens(%d) = %s, want %s unchanged (forward only)", above, got, counter)
		}
	}
	if got := acquireToken(t, lk, key); got <= first {
		t.Fatalf("token after smaller AdvanceTokens calls = %d, want above the previous %d", got, first)
	}
}

// A goroutine that starts acquiring after AdvanceTokens gets a token above
// the mark even when this Locker holds the lock from before the call: the
// old hold is not passed to it in memory.
func TestAdvanceTokensStopsLocalPasses(t *testing.T) {
	srv := servertest.Redis(t)
	admin := newClient(t, srv)
	lk, _ := newLocker(t, srv, 5*time.Second) // local passes on (the default)
	key := locktest.Key(t)

	if err := admin.Set(t.Context(), redislock.FenceKey(key), 100, 0).Err(); err != nil {
		t.Fatal(err)
	}
	high := acquireToken(t, lk, key)
	if err := admin.Del(t.Context(), redislock.FenceKey(key)).Err(); err != nil {
		t.Fatal(err)
	}
	old, err := lk.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if old.Token() >= high {
		t.Fatalf("token after the wipe = %d, want below %d", old.Token(), high)
	}
	if err := lk.AdvanceTokens(t.Context(), key, high); err != nil {
		t.Fatalf("AdvanceTokens: %v", err)
	}

	got := make(chan lock.Lease, 1)
	go func() {
		l, err := lk.Acquire(t.Context(), key)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitFor(t, "the new acquisition to queue behind the old hold", func() bool { return redislock.Waiting(lk, key) == 1 })
	if err := old.Release(t.Context()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	defer l.Release(context.Background())
	if l.Token() <= high {
		t.Fatalf("token of an acquisition started after AdvanceTokens(%d) = %d, want above it (not a pass of the old hold)", high, l.Token())
	}
	if n := lk.Stats().LocalHandoffs; n != 0 {
		t.Fatalf("LocalHandoffs = %d, want 0: the old hold must not be passed", n)
	}
}

// Concurrent advances and acquisitions: tokens stay strictly increasing in
// lock order, and the counter ends at the largest mark.
func TestAdvanceTokensConcurrent(t *testing.T) {
	srv := servertest.Redis(t)
	admin := newClient(t, srv)
	key := locktest.Key(t)
	lks := []*redislock.Locker{}
	for range 2 {
		lk, _ := newLocker(t, srv, 5*time.Second)
		lks = append(lks, lk)
	}

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		tokens []uint64 // in lock order: appended while holding the lock
		maxAb  uint64
	)
	for g := range 4 {
		wg.Go(func() {
			for range 20 {
				l, err := lks[g%2].Acquire(t.Context(), key)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				if err := l.Release(t.Context()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for g := range 4 {
		wg.Go(func() {
			for i := range 20 {
				above := uint64(g*1000+i*37) << 16
				if err := lks[g%2].AdvanceTokens(t.Context(), key, above); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				maxAb = max(maxAb, above)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d = %d after %d, want strictly increasing in lock order", i, tokens[i], tokens[i-1])
		}
	}
	c, err := strconv.ParseUint(fence(t, admin, key), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if c < maxAb>>16+1 {
		t.Fatalf("counter = %d, want at least %d (the largest mark's)", c, maxAb>>16+1)
	}
	if got := acquireToken(t, lks[0], key); got <= maxAb {
		t.Fatalf("token = %d, want above the largest mark %d", got, maxAb)
	}
}

func TestAdvanceTokensErrors(t *testing.T) {
	srv := servertest.Redis(t)
	admin := newClient(t, srv)
	lk, _ := newLocker(t, srv, 5*time.Second)
	key := locktest.Key(t)

	if err := lk.AdvanceTokens(t.Context(), key, math.MaxUint64); !errors.Is(err, redislock.ErrTokenRange) {
		t.Fatalf("AdvanceTokens(MaxUint64) = %v, want ErrTokenRange", err)
	}
	if got := fence(t, admin, key); got != "" {
		t.Fatalf("counter after a refused advance = %q, want none", got)
	}
	if err := admin.Set(t.Context(), redislock.FenceKey(key), "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := lk.AdvanceTokens(t.Context(), key, 1<<20); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("AdvanceTokens over a corrupt counter = %v, want ErrUnavailable", err)
	}
	if got := fence(t, admin, key); got != "garbage" {
		t.Fatalf("corrupt counter = %q after AdvanceTokens, want it left alone", got)
	}
}
