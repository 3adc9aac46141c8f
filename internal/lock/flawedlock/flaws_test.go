//go:build lab

package flawedlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"seckill/internal/failpoint"
	"seckill/internal/lock"
	"seckill/internal/lock/flawedlock"
	"seckill/internal/lock/locktest"
	"seckill/internal/lock/redislock"
	"seckill/internal/servers/servertest"
)

// crashKey marks the context of the Acquire that "crashes" at the failpoint,
// so the hook leaves every other caller alone.
type crashKey struct{}

// TestSetNXCrashLeavesLockForever: a holder that dies between SETNX and
// EXPIRE leaves a lock with no TTL, and nobody else ever gets it.
func TestSetNXCrashLeavesLockForever(t *testing.T) {
	armed(t)
	srv := servertest.Redis(t)
	admin := newClient(t, srv)
	const ttl = 200 * time.Millisecond
	key := locktest.Key(t)

	crashing := newClient(t, srv)
	dead := flawedlock.NewSetNX(crashing, flawedlock.Options{TTL: ttl})
	alive := flawedlock.NewSetNX(newClient(t, srv), flawedlock.Options{TTL: ttl})

	// The crash: the process's connection goes away right after SETNX, so
	// its EXPIRE never reaches Redis and nothing of it runs again.
	failpoint.EnableFunc(flawedlock.FailpointAfterSetNX, func(ctx context.Context) error {
		if ctx.Value(crashKey{}) != nil {
			_ = crashing.Close()
		}
		return nil
	})
	_, err := dead.Acquire(context.WithValue(t.Context(), crashKey{}, true), key)
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("crashing Acquire = %v, want ErrUnavailable (EXPIRE on a closed client)", err)
	}
	if pttl := admin.PTTL(t.Context(), dead.RedisKey(key)).Val(); pttl != -1 {
		t.Fatalf("PTTL of the crashed holder's lock = %v, want -1 (exists, no TTL)", pttl)
	}

	// Fifteen TTLs later it is still there, and the survivor still waits.
	mustNotAcquire(t, alive, key, 15*ttl)
	if pttl := admin.PTTL(t.Context(), dead.RedisKey(key)).Val(); pttl != -1 {
		t.Fatalf("PTTL after 15 TTLs = %v, want -1: the lock never expires", pttl)
	}
}

// TestRedisLockRecoversFromCrash is the same crash against the correct
// backend: its lock is set with its TTL in one step, so a crashed holder's
// lock expires and the survivor gets it.
func TestRedisLockRecoversFromCrash(t *testing.T) {
	srv := servertest.Redis(t)
	const ttl = 200 * time.Millisecond
	key := locktest.Key(t)

	crashing := newClient(t, srv)
	dead := redislock.New(crashing, redislock.Options{TTL: ttl})
	t.Cleanup(func() { _ = dead.Close() })
	alive := redislock.New(newClient(t, srv), redislock.Options{TTL: ttl})
	t.Cleanup(func() { _ = alive.Close() })

	_ = acquire(t, dead, key, 5*time.Second)
	if err := crashing.Close(); err != nil { // renewals fail from now on
		t.Fatal(err)
	}
	start := time.Now()
	l := acquire(t, alive, key, 15*ttl)
	t.Logf("redislock: crashed holder's lock taken over after %v (TTL %v)", time.Since(start).Round(time.Millisecond), ttl)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestSetNXRepairMissingTTL: with the Jedis article's waiter repair, the
// same crash is survived once someone waits: the waiter gives the lock a
// TTL and gets it when that runs out.
func TestSetNXRepairMissingTTL(t *testing.T) {
	armed(t)
	srv := servertest.Redis(t)
	const ttl = 200 * time.Millisecond
	key := locktest.Key(t)
	opts := flawedlock.Options{TTL: ttl, RepairMissingTTL: true}
	crashing := newClient(t, srv)
	dead := flawedlock.NewSetNX(crashing, opts)
	alive := flawedlock.NewSetNX(newClient(t, srv), opts)

	failpoint.EnableFunc(flawedlock.FailpointAfterSetNX, func(ctx context.Context) error {
		if ctx.Value(crashKey{}) != nil {
			_ = crashing.Close()
		}
		return nil
	})
	if _, err := dead.Acquire(context.WithValue(t.Context(), crashKey{}, true), key); err == nil {
		t.Fatal("crashing Acquire succeeded")
	}
	l := acquire(t, alive, key, 15*ttl)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestNoCheckDeletesAnotherHoldersLock: A works longer than the TTL; the
// lock expires and B takes it; A's unchecked DEL then deletes B's lock, and
// C gets in while B is still inside.
func TestNoCheckDeletesAnotherHoldersLock(t *testing.T) {
	srv := servertest.Redis(t)
	admin := newClient(t, srv)
	const ttl = 300 * time.Millisecond
	key := locktest.Key(t)
	opts := flawedlock.Options{TTL: ttl}
	a := flawedlock.NewNoCheck(newClient(t, srv), opts)
	b := flawedlock.NewNoCheck(newClient(t, srv), opts)
	c := flawedlock.NewNoCheck(newClient(t, srv), opts)
	var r room

	la := acquire(t, a, key, 5*time.Second)
	r.enter("A")
	// A's business outlasts the TTL. B's Acquire returning is the event
	// that the lock expired; nothing renewed it.
	lb := acquire(t, b, key, 5*time.Second)
	if inside := r.enter("B"); !slices.Equal(inside, []string{"A"}) {
		t.Fatalf("B entered with %v inside, want [A] (expiry without renewal)", inside)
	}
	assertOpen(t, la, "A after its lock expired")

	r.leave("A")
	if err := la.Release(t.Context()); err != nil {
		t.Fatalf("A's Release = %v, want nil: it cannot tell it deleted B's lock", err)
	}
	if n := admin.Exists(t.Context(), b.RedisKey(key)).Val(); n != 0 {
		t.Fatal("B's lock survived A's Release, want it deleted (DEL without owner check)")
	}
	assertOpen(t, lb, "B after its lock was deleted")

	lc := acquire(t, c, key, time.Second)
	if inside := r.enter("C"); !slices.Equal(inside, []string{"B"}) {
		t.Fatalf("C entered with %v inside, want [B]: two holders at once", inside)
	}
	if !(la.Token() < lb.Token() && lb.Token() < lc.Token()) {
		t.Fatalf("tokens A=%d B=%d C=%d, want increasing: tokens are fine, exclusion is not", la.Token(), lb.Token(), lc.Token())
	}
	// B's own release now deletes C's lock in turn.
	r.leave("B")
	if err := lb.Release(t.Context()); err != nil {
		t.Fatalf("B's Release = %v, want nil", err)
	}
	if n := admin.Exists(t.Context(), c.RedisKey(key)).Val(); n != 0 {
		t.Fatal("C's lock survived B's Release, want it deleted")
	}
	_ = lc.Release(t.Context())
}

// TestCheckDelDeletesAnotherHoldersLock: A's release checks ownership with
// GET and then DELs; paused between the two, the lock expires, B takes it,
// and A's DEL deletes B's lock, so C gets in while B is inside.
func TestCheckDelDeletesAnotherHoldersLock(t *testing.T) {
	armed(t)
	srv := servertest.Redis(t)
	admin := newClient(t, srv)
	const ttl = 300 * time.Millisecond
	key := locktest.Key(t)
	opts := flawedlock.Options{TTL: ttl}
	a := flawedlock.NewCheckDel(newClient(t, srv), opts)
	b := flawedlock.NewCheckDel(newClient(t, srv), opts)
	c := flawedlock.NewCheckDel(newClient(t, srv), opts)
	var r room

	if err := failpoint.Enable(flawedlock.FailpointCheckDelBeforeDel, "pause"); err != nil {
		t.Fatal(err)
	}
	la := acquire(t, a, key, 5*time.Second)
	// A's work is done well within the TTL; it releases at once.
	released := make(chan error, 1)
	go func() { released <- la.Release(context.Background()) }()
	if err := failpoint.WaitPaused(t.Context(), flawedlock.FailpointCheckDelBeforeDel); err != nil {
		t.Fatal(err)
	}
	// A has seen its own owner value and is about to DEL. Meanwhile the
	// lock expires (B's Acquire returning is that event) and B takes it.
	lb := acquire(t, b, key, 5*time.Second)
	if inside := r.enter("B"); len(inside) != 0 {
		t.Fatalf("B entered with %v inside, want nobody", inside)
	}
	// Disarm before anyone else releases, and let A finish.
	failpoint.Disable(flawedlock.FailpointCheckDelBeforeDel)
	if err := <-released; err != nil {
		t.Fatalf("A's Release = %v, want nil: it checked, then deleted B's lock", err)
	}
	if n := admin.Exists(t.Context(), b.RedisKey(key)).Val(); n != 0 {
		t.Fatal("B's lock survived A's Release, want it deleted (GET then DEL)")
	}
	assertOpen(t, lb, "B after its lock was deleted")

	lc := acquire(t, c, key, time.Second)
	if inside := r.enter("C"); !slices.Equal(inside, []string{"B"}) {
		t.Fatalf("C entered with %v inside, want [B]: two holders at once", inside)
	}
	// Without the pause, B's owner check does stop B from deleting C's lock.
	r.leave("B")
	if err := lb.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("B's Release = %v, want ErrNotHeld", err)
	}
	if n := admin.Exists(t.Context(), c.RedisKey(key)).Val(); n != 1 {
		t.Fatal("B's Release deleted C's lock")
	}
	if err := lc.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
