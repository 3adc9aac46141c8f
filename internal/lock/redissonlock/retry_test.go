package redissonlock

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locktest"
	"seckill/internal/testwait"
)

// dupHook runs a script twice per call, as a client retry after a lost reply
// does: the first run's reply is dropped, the caller sees the second's.
type dupHook struct {
	script *redis.Script
	src    string
	dups   atomic.Int64
}

func (h *dupHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *dupHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *dupHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 &&
			(args[0] == "evalsha" && args[1] == h.script.Hash() || args[0] == "eval" && args[1] == h.src) {
			if err := next(ctx, cmd); err != nil {
				return err // NOSCRIPT: Script.Run falls back to EVAL, duplicated in turn
			}
			h.dups.Add(1)
		}
		return next(ctx, cmd)
	}
}

// newDupLocker returns a Locker whose client runs script twice per call.
func newDupLocker(t *testing.T, addr string, script *redis.Script, src string, opts Options) (*Locker, *dupHook) {
	t.Helper()
	c := newClient(t, addr)
	h := &dupHook{script: script, src: src}
	c.AddHook(h)
	lk := New(c, opts)
	t.Cleanup(func() { _ = lk.Close() })
	return lk, h
}

// holdsOf reads owner's hold count in key's hash (0 when absent).
func holdsOf(t *testing.T, rdb *redis.Client, key, owner string) int {
	t.Helper()
	n, err := rdb.HGet(t.Context(), key, owner).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return n
}

// otherAcquires checks that another process gets key before a leaked hold
// would free it: with the default watchdog such a hold lives on 30s past
// its last renewal, at least two thirds of that from any moment, so
// waiting for it takes far longer than half of it. The key need not be
// free at the first try (an abandoned hold is dropped in the background).
func otherAcquires(t *testing.T, addr, key string) {
	t.Helper()
	other := newLocker(t, addr, Options{})
	start := time.Now()
	l := mustAcquire(t, other, key)
	took := time.Since(start)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if took >= DefaultWatchdog/2 {
		t.Fatalf("another process got %q %v on: it waited for a leaked hold to expire (watchdog TTL %v)", key, took, DefaultWatchdog)
	}
}

// A retried acquire script (its first reply lost) returns the first run's
// result: the lock is held once, renewed and released normally, and free
// for others right after Release. Re-entries are idempotent the same way.
func TestRetriedAcquireIsIdempotent(t *testing.T) {
	addr := startRedis(t)
	admin := newClient(t, addr)
	lk, hook := newDupLocker(t, addr, acquireScript, acquireLua, Options{Watchdog: 900 * time.Millisecond})
	key := locktest.Key(t)

	l := mustAcquire(t, lk, key)
	if hook.dups.Load() == 0 {
		t.Fatal("the acquire script was not run twice: the test proves nothing")
	}
	if got := holdsOf(t, admin, key, l.h.owner); got != 1 {
		t.Fatalf("holds in Redis = %d, want 1", got)
	}
	if got := fenceOf(t, admin, key); got != strconv.FormatUint(l.Token(), 10) {
		t.Fatalf("token = %d, counter = %s, want equal", l.Token(), got)
	}
	if err := l.Reacquire(t.Context()); err != nil {
		t.Fatalf("Reacquire: %v", err)
	}
	if got, want := holdsOf(t, admin, key, l.h.owner), l.HoldCount(); got != 2 || want != 2 {
		t.Fatalf("holds after Reacquire: Redis %d, lease %d; want 2, 2", got, want)
	}
	// Renewed across a few TTLs: the hold is not abandoned. The count has
	// no event to wait on: it is polled.
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	until := testwait.Until(t)
	for want := lk.Stats().Renewals + 3; lk.Stats().Renewals < want; {
		select {
		case <-l.Done():
			t.Fatalf("lease ended while held: %v", l.Err())
		case <-until.Done():
			t.Fatalf("%d renewals while held, want %d", lk.Stats().Renewals, want)
		case <-poll.C:
		}
	}
	for range 2 {
		if err := l.Release(t.Context()); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	if n, _ := admin.Exists(t.Context(), key).Result(); n != 0 {
		t.Fatalf("EXISTS after the final Release = %d, want 0", n)
	}
	otherAcquires(t, addr, key)
}

// A status the acquire script should never give (here: the new owner's
// field already there with a count this attempt did not make) abandons the
// hold instead of leaking it for a watchdog TTL.
func TestUnexpectedAcquireStatusAbandons(t *testing.T) {
	addr := startRedis(t)
	admin := newClient(t, addr)
	lk := newLocker(t, addr, Options{})
	key := locktest.Key(t)

	next := lk.id + ":" + strconv.FormatUint(lk.seq.Load()+1, 10)
	if err := admin.HSet(t.Context(), key, next, 5).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.PExpire(t.Context(), key, DefaultWatchdog).Err(); err != nil {
		t.Fatal(err)
	}
	// The bound is part of the check: a refusal, or no grant within it
	// (the corrupt hold never handed over), both pass.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if l, err := lk.Acquire(ctx, key); err == nil {
		_ = l.Release(t.Context())
		t.Fatal("Acquire over a corrupt hold succeeded, want an error")
	}
	otherAcquires(t, addr, key)
}

// A retried transfer script (its first reply lost) reports the hand-off the
// first run made, not "not owner": the waiter gets the lease, and the lock
// is free for others after its Release.
func TestRetriedTransferIsIdempotent(t *testing.T) {
	addr := startRedis(t)
	admin := newClient(t, addr)
	lk, hook := newDupLocker(t, addr, transferScript, transferLua, Options{})
	key := locktest.Key(t)

	first := mustAcquire(t, lk, key)
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
	if err := first.Release(t.Context()); err != nil {
		t.Fatalf("Release handing off: %v", err)
	}
	if hook.dups.Load() == 0 {
		t.Fatal("the transfer script was not run twice: the test proves nothing")
	}
	second := <-got
	if second == nil {
		t.FailNow()
	}
	if second.Token() <= first.Token() {
		t.Fatalf("handed token %d, want above %d", second.Token(), first.Token())
	}
	if got := holdsOf(t, admin, key, second.h.owner); got != 1 {
		t.Fatalf("new owner's holds in Redis = %d, want 1", got)
	}
	if err := second.Release(t.Context()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	otherAcquires(t, addr, key)
}
