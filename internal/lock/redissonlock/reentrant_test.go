package redissonlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
)

func TestReentrancy(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	lk := newLocker(t, addr, Options{Watchdog: 2 * time.Second})
	other := newLocker(t, addr, Options{Watchdog: 2 * time.Second})
	key := locktest.Key(t)
	ctx := t.Context()

	l := mustAcquire(t, lk, key)
	token := l.Token()
	for range 2 {
		if err := l.Reacquire(ctx); err != nil {
			t.Fatalf("Reacquire: %v", err)
		}
	}
	if got := l.HoldCount(); got != 3 {
		t.Fatalf("HoldCount() = %d, want 3", got)
	}
	if got := l.Token(); got != token {
		t.Fatalf("Token() after re-entry = %d, want %d unchanged", got, token)
	}
	// The hash is {owner: 3}: Redis keeps the count, not just the handle.
	if vals, err := rdb.HVals(ctx, key).Result(); err != nil || len(vals) != 1 || vals[0] != "3" {
		t.Fatalf("HVALS %q = %v, %v; want [3]", key, vals, err)
	}
	if fence, err := rdb.Get(ctx, key+fenceSuffix).Uint64(); err != nil || fence != token {
		t.Fatalf("fence = %d, %v; want %d (re-entries must not INCR it)", fence, err, token)
	}
	mustNotAcquire(t, other, key, 200*time.Millisecond)

	for i := 3; i > 1; i-- {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release with %d holds: %v", i, err)
		}
		if got := l.HoldCount(); got != i-1 {
			t.Fatalf("HoldCount() = %d, want %d", got, i-1)
		}
		if !isOpen(l) {
			t.Fatalf("Done closed with %d holds left: %v", i-1, l.Err())
		}
		if n, _ := rdb.Exists(ctx, key).Result(); n != 1 {
			t.Fatalf("EXISTS %q = %d with %d holds left, want 1", key, n, i-1)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("final Release: %v", err)
	}
	if n, _ := rdb.Exists(ctx, key).Result(); n != 0 {
		t.Fatalf("EXISTS %q = %d after the last Release, want 0", key, n)
	}
	if isOpen(l) {
		t.Fatal("Done open after the last Release")
	}
	if err := l.Err(); !errors.Is(err, lock.ErrReleased) {
		t.Fatalf("Err() = %v, want ErrReleased", err)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("4th Release = %v, want ErrNotHeld", err)
	}
	if err := l.Reacquire(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Reacquire after release = %v, want ErrNotHeld", err)
	}
	if n, _ := rdb.Exists(ctx, key).Result(); n != 0 {
		t.Fatalf("EXISTS %q = %d after a Reacquire of a released lease, want 0", key, n)
	}
	// Free now: the other locker gets it at once, with a larger token.
	l2 := mustAcquireAtOnce(t, other, key)
	if l2.Token() <= token {
		t.Fatalf("next token %d, want > %d", l2.Token(), token)
	}
	_ = l2.Release(ctx)
}

// A re-entry must never resurrect a lock the lease lost: Redisson's script
// would take a free lock for the same thread id, a Lease must not.
func TestReacquireAfterLoss(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	lk := newLocker(t, addr, Options{Watchdog: 5 * time.Second})
	key := locktest.Key(t)

	l := mustAcquire(t, lk, key)
	if err := rdb.Del(t.Context(), key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Reacquire(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Reacquire of a deleted lock = %v, want ErrNotHeld", err)
	}
	if n, _ := rdb.Exists(t.Context(), key).Result(); n != 0 {
		t.Fatalf("EXISTS %q = %d, want 0: Reacquire re-created a lost lock", key, n)
	}
	if isOpen(l) || !errors.Is(l.Err(), lock.ErrLost) {
		t.Fatalf("Done open=%v Err=%v, want closed with ErrLost", isOpen(l), l.Err())
	}
	if got := l.HoldCount(); got != 0 {
		t.Fatalf("HoldCount() = %d after loss, want 0", got)
	}
}

// Release through a nil *Lease reports an error instead of panicking.
func TestNilLease(t *testing.T) {
	var l *Lease
	if err := l.Release(context.Background()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("nil Release = %v, want ErrNotHeld", err)
	}
	if err := l.Reacquire(context.Background()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("nil Reacquire = %v, want ErrNotHeld", err)
	}
}
