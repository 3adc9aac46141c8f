package redissonlock

import (
	"errors"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
	"seckill/internal/testwait"
)

// acquireToken acquires key, releases it, and returns its token.
func acquireToken(t *testing.T, lk *Locker, key string) uint64 {
	t.Helper()
	l := mustAcquire(t, lk, key)
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	return l.Token()
}

// fenceOf reads key's fencing counter ("" when absent).
func fenceOf(t *testing.T, rdb *redis.Client, key string) string {
	t.Helper()
	v, err := rdb.Get(t.Context(), key+fenceSuffix).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return v
}

// A Redis that forgets its counter hands out tokens below those already
// seen; AdvanceTokens puts every later acquisition, from any process and
// through local hand-offs too, above the high-water mark, and a smaller or
// repeated call never moves it back.
func TestAdvanceTokensAfterForget(t *testing.T) {
	addr := startRedis(t)
	admin := newClient(t, addr)
	lk := newLocker(t, addr, Options{})
	other := newLocker(t, addr, Options{})
	key := locktest.Key(t)

	var high uint64
	for range 3 {
		high = acquireToken(t, lk, key)
	}
	if err := admin.Del(t.Context(), key+fenceSuffix).Err(); err != nil {
		t.Fatal(err)
	}
	if got := acquireToken(t, lk, key); got >= high {
		t.Fatalf("token after the counter was wiped = %d, want below %d (the forget this repairs)", got, high)
	}

	// A lease held across the advance keeps its low token; the goroutine
	// that starts waiting afterwards and gets it by local hand-off does not.
	old := mustAcquire(t, lk, key)
	if err := lk.AdvanceTokens(t.Context(), key, high); err != nil {
		t.Fatalf("AdvanceTokens: %v", err)
	}
	got := make(chan *Lease, 1)
	until := testwait.Until(t)
	go func() {
		l, err := lk.Acquire(until, key)
		if err != nil {
			t.Error(err)
			got <- nil
			return
		}
		got <- l.(*Lease)
	}()
	for idleWaiters(lk, key) == 0 { // no event to wait on from outside
		time.Sleep(time.Millisecond)
	}
	if err := old.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	handed := <-got
	if handed == nil {
		t.FailNow()
	}
	if handed.Token() <= high {
		t.Fatalf("token handed off after AdvanceTokens(%d) = %d, want above it", high, handed.Token())
	}
	if err := handed.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	first := acquireToken(t, other, key)
	if first <= handed.Token() {
		t.Fatalf("next token = %d, want above %d", first, handed.Token())
	}

	counter := fenceOf(t, admin, key)
	for _, above := range []uint64{high, 0, 1, first - 1} {
		if err := lk.AdvanceTokens(t.Context(), key, above); err != nil {
			t.Fatalf("AdvanceTokens(%d): %v", above, err)
		}
		if got := fenceOf(t, admin, key); got != counter {
			t.Fatalf("counter after AdvanceTokens(%d) = %s, want %s unchanged (forward only)", above, got, counter)
		}
	}
	if got := acquireToken(t, lk, key); got <= first {
		t.Fatalf("token after smaller AdvanceTokens calls = %d, want above the previous %d", got, first)
	}
}

// Concurrent advances and acquisitions: tokens stay strictly increasing in
// lock order, and the counter ends at or above the largest mark.
func TestAdvanceTokensConcurrent(t *testing.T) {
	addr := startRedis(t)
	admin := newClient(t, addr)
	key := locktest.Key(t)
	lks := []*Locker{newLocker(t, addr, Options{}), newLocker(t, addr, Options{})}

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
				above := uint64(g*1000 + i*37)
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
	c, err := strconv.ParseUint(fenceOf(t, admin, key), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if c < maxAb {
		t.Fatalf("counter = %d, want at least %d (the largest mark)", c, maxAb)
	}
	if got := acquireToken(t, lks[0], key); got <= maxAb {
		t.Fatalf("token = %d, want above the largest mark %d", got, maxAb)
	}
}

func TestAdvanceTokensErrors(t *testing.T) {
	addr := startRedis(t)
	admin := newClient(t, addr)
	lk := newLocker(t, addr, Options{})
	key := locktest.Key(t)

	if err := lk.AdvanceTokens(t.Context(), key, math.MaxUint64); !errors.Is(err, ErrTokenRange) {
		t.Fatalf("AdvanceTokens(MaxUint64) = %v, want ErrTokenRange", err)
	}
	if err := lk.AdvanceTokens(t.Context(), key, 1<<53-1); !errors.Is(err, ErrTokenRange) {
		t.Fatalf("AdvanceTokens(2^53-1) = %v, want ErrTokenRange", err)
	}
	if err := lk.AdvanceTokens(t.Context(), key, 1<<53-2); err != nil {
		t.Fatalf("AdvanceTokens(2^53-2) = %v, want nil", err)
	}
	if got, want := acquireToken(t, lk, key), uint64(1<<53-1); got != want {
		t.Fatalf("token = %d, want %d", got, want)
	}
	if err := admin.Set(t.Context(), key+fenceSuffix, "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := lk.AdvanceTokens(t.Context(), key, 5); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("AdvanceTokens over a corrupt counter = %v, want ErrUnavailable", err)
	}
	if got := fenceOf(t, admin, key); got != "garbage" {
		t.Fatalf("corrupt counter = %q after AdvanceTokens, want it left alone", got)
	}
}
