package redissonlock

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
	"seckill/internal/testwait"
)

// eventually polls cond until it holds, which it must, failing the test at
// its deadline. It waits for a state to be reached, never for time to pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	until := testwait.Until(t)
	for !cond() {
		if until.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// idleWaiters counts the goroutines of lk queued for key behind the one
// holding or acquiring it: those a Release could hand the lock to.
func idleWaiters(lk *Locker, key string) int { return lk.co.Waiting(key) }

// subscribed reports whether lk's pub/sub subscription for key is confirmed.
func subscribed(lk *Locker, key string) bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	ks := lk.keys[key]
	return ks != nil && ks.subscribedLocked()
}

// A final Release with a local waiter replaces the owner field in one
// script: the hash holds only the new owner, the token is fresh, the old
// lease is released and the new one is kept alive by its own watchdog.
func TestHandoffReplacesOwner(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	lk := newLocker(t, addr, Options{Watchdog: 300 * time.Millisecond})
	key := locktest.Key(t)
	ctx := t.Context()

	first := mustAcquire(t, lk, key)
	got := make(chan *Lease, 1)
	go func() {
		l, err := lk.Acquire(ctx, key)
		if err != nil {
			t.Errorf("waiter Acquire: %v", err)
			got <- nil
			return
		}
		got <- l.(*Lease)
	}()
	eventually(t, "an idle local waiter", func() bool { return idleWaiters(lk, key) == 1 })
	before := lk.Stats()
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	second := <-got
	if second == nil {
		t.FailNow()
	}
	if err := first.Err(); !errors.Is(err, lock.ErrReleased) {
		t.Fatalf("first.Err() = %v, want ErrReleased", err)
	}
	if err := first.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second Release of the first lease = %v, want ErrNotHeld", err)
	}
	after := lk.Stats()
	if d := after.Handoffs - before.Handoffs; d != 1 {
		t.Fatalf("Handoffs grew by %d, want 1", d)
	}
	if second.Token() <= first.Token() {
		t.Fatalf("token after hand-off %d, want > %d", second.Token(), first.Token())
	}
	h, err := rdb.HGetAll(ctx, key).Result()
	if err != nil || len(h) != 1 || h[second.h.owner] != "1" {
		t.Fatalf("HGETALL %q = %v, %v; want {%s: 1}", key, h, err, second.h.owner)
	}
	if fence, err := rdb.Get(ctx, key+fenceSuffix).Uint64(); err != nil || fence != second.Token() {
		t.Fatalf("fence = %d, %v; want %d", fence, err, second.Token())
	}

	// The new owner's watchdog renews: wait for three renewals (a full TTL
	// and more) and check the lock is still held by it.
	base := lk.Stats().Renewals
	eventually(t, "three renewals", func() bool { return lk.Stats().Renewals >= base+3 })
	if !isOpen(second) {
		t.Fatalf("handed lease ended after renewals: %v", second.Err())
	}
	if n, err := rdb.HExists(ctx, key, second.h.owner).Result(); err != nil || !n {
		t.Fatalf("HEXISTS %q %s = %v, %v; want true", key, second.h.owner, n, err)
	}
	if err := second.Reacquire(ctx); err != nil {
		t.Fatalf("Reacquire on the handed lease: %v", err)
	}
	for range 2 {
		if err := second.Release(ctx); err != nil {
			t.Fatalf("Release of the handed lease: %v", err)
		}
	}
	if err := second.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("third Release = %v, want ErrNotHeld", err)
	}
	if n, _ := rdb.Exists(ctx, key).Result(); n != 0 {
		t.Fatalf("EXISTS %q = %d after the final Release, want 0", key, n)
	}
}

// A handed lease loses its lock like any other: a DEL behind its back
// closes Done with ErrLost at the next renewal.
func TestHandoffLeaseLoss(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	lk := newLocker(t, addr, Options{Watchdog: 300 * time.Millisecond})
	key := locktest.Key(t)
	ctx := t.Context()

	first := mustAcquire(t, lk, key)
	got := make(chan lock.Lease, 1)
	go func() {
		l, err := lk.Acquire(ctx, key)
		if err != nil {
			t.Errorf("waiter Acquire: %v", err)
		}
		got <- l
	}()
	eventually(t, "an idle local waiter", func() bool { return idleWaiters(lk, key) == 1 })
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	second := <-got
	if second == nil {
		t.FailNow()
	}
	if lk.Stats().Handoffs != 1 {
		t.Fatalf("Handoffs = %d, want 1", lk.Stats().Handoffs)
	}
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, second)
	if err := second.Err(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Err() = %v, want ErrLost", err)
	}
	if err := second.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release after loss = %v, want ErrNotHeld", err)
	}
}

// Fencing tokens strictly increase in acquisition order whether the lock
// moves by hand-off or through Redis, and hand-offs happen only when
// enabled.
func TestHandoffTokensIncrease(t *testing.T) {
	addr := startRedis(t)
	for _, tc := range []struct {
		name     string
		handoffs int
	}{
		{"disabled", -1},
		{"bound1", 1},
		{"default", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lockers := []*Locker{
				newLocker(t, addr, Options{LocalHandoffs: tc.handoffs}),
				newLocker(t, addr, Options{LocalHandoffs: tc.handoffs}),
			}
			key := locktest.Key(t)
			const perLocker, rounds = 5, 20
			var (
				mu     sync.Mutex
				inside bool
				tokens []uint64
				wg     sync.WaitGroup
			)
			for _, lk := range lockers {
				for range perLocker {
					wg.Go(func() {
						for range rounds {
							l, err := lk.Acquire(t.Context(), key)
							if err != nil {
								t.Errorf("Acquire: %v", err)
								return
							}
							mu.Lock()
							if inside {
								t.Errorf("two holders at once (token %d)", l.Token())
							}
							inside = true
							tokens = append(tokens, l.Token())
							mu.Unlock()
							mu.Lock()
							inside = false
							mu.Unlock()
							if err := l.Release(t.Context()); err != nil {
								t.Errorf("Release: %v", err)
								return
							}
						}
					})
				}
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			if want := 2 * perLocker * rounds; len(tokens) != want {
				t.Fatalf("got %d acquisitions, want %d", len(tokens), want)
			}
			for i := 1; i < len(tokens); i++ {
				if tokens[i] <= tokens[i-1] {
					t.Fatalf("token %d at acquisition %d, want > %d", tokens[i], i, tokens[i-1])
				}
			}
			var handoffs, acquired uint64
			for _, lk := range lockers {
				s := lk.Stats()
				handoffs += s.Handoffs
				acquired += s.Acquired
			}
			t.Logf("%d acquisitions, %d by hand-off", acquired, handoffs)
			if acquired != uint64(len(tokens)) {
				t.Fatalf("Stats().Acquired sums to %d, want %d", acquired, len(tokens))
			}
			switch {
			case tc.handoffs < 0 && handoffs != 0:
				t.Fatalf("%d hand-offs with LocalHandoffs %d, want 0", handoffs, tc.handoffs)
			case tc.handoffs >= 0 && handoffs == 0:
				t.Fatalf("no hand-offs with LocalHandoffs %d and %d contenders per Locker", tc.handoffs, perLocker)
			}
		})
	}
}

// A waiting goroutine of another Locker acquires after at most K+1 holders
// of this one (the holder plus K hand-offs), however many local goroutines
// wait.
func TestHandoffBounded(t *testing.T) {
	for _, k := range []int{1, 3} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			addr := startRedis(t)
			a := newLocker(t, addr, Options{LocalHandoffs: k})
			b := newLocker(t, addr, Options{LocalHandoffs: k})
			// The fallback must not fire while b takes its turn, however
			// slow the machine: here it would only hide a fairness bug.
			a.yieldFallback = time.Minute
			key := locktest.Key(t)
			ctx := t.Context()

			holder := mustAcquire(t, a, key)
			var (
				mu    sync.Mutex
				order []string
				wg    sync.WaitGroup
			)
			take := func(name string, lk *Locker) {
				l, err := lk.Acquire(ctx, key)
				if err != nil {
					t.Errorf("%s: Acquire: %v", name, err)
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					t.Errorf("%s: Release: %v", name, err)
				}
			}
			// b's waiter is subscribed and asleep once it ran its first
			// attempt and the retry after the subscription.
			wg.Go(func() { take("b", b) })
			eventually(t, "b's waiter asleep", func() bool {
				return b.Stats().AcquireScripts >= 2 && subscribed(b, key)
			})
			locals := k + 4
			for i := range locals {
				wg.Go(func() { take(fmt.Sprintf("a%d", i), a) })
			}
			eventually(t, "a's waiters queued and subscribed", func() bool {
				return idleWaiters(a, key) == locals && subscribed(a, key)
			})
			if err := holder.Release(ctx); err != nil {
				t.Fatalf("holder Release: %v", err)
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			t.Logf("order after the holder: %v; a: %+v", order, a.Stats())
			i := 0
			for i < len(order) && order[i] != "b" {
				i++
			}
			if i == len(order) {
				t.Fatalf("b never acquired: %v", order)
			}
			if i > k {
				t.Fatalf("b acquired after %d local holders (the holder and %d hand-offs), want at most %d", i+1, i, k+1)
			}
			if s := a.Stats(); s.Yields == 0 {
				t.Fatalf("Stats().Yields = 0, want the run of hand-offs to end in a yield")
			}
		})
	}
}

// A Locker that yielded to a listener which never takes the lock still
// serves its own waiter: the hold-back is bounded.
func TestHandoffYieldFallback(t *testing.T) {
	addr := startRedis(t)
	admin := newClient(t, addr)
	lk := newLocker(t, addr, Options{LocalHandoffs: 1})
	key := locktest.Key(t)
	ctx := t.Context()

	// A silent listener on the channel, as a process that is about to
	// unsubscribe would be.
	ps := admin.Subscribe(ctx, channelOf(key))
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	holder := mustAcquire(t, lk, key)
	results := make(chan lock.Lease, 2)
	until := testwait.Until(t)
	for range 2 {
		go func() {
			l, err := lk.Acquire(until, key)
			if err != nil {
				t.Errorf("Acquire: %v", err)
			}
			results <- l
		}()
	}
	eventually(t, "two idle waiters, subscribed", func() bool {
		return idleWaiters(lk, key) == 2 && subscribed(lk, key)
	})
	// holder → first waiter by hand-off (streak 1 = the bound); its Release
	// yields, since the silent listener makes two subscribers.
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	first := <-results
	if first == nil {
		t.FailNow()
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-results
	if second == nil {
		t.FailNow()
	}
	defer func() { _ = second.Release(ctx) }()
	s := lk.Stats()
	if s.Handoffs != 1 || s.Yields != 1 {
		t.Fatalf("Stats() = %+v, want 1 hand-off and 1 yield", s)
	}
	if second.Token() <= first.Token() {
		t.Fatalf("token %d after the yield, want > %d", second.Token(), first.Token())
	}
}
