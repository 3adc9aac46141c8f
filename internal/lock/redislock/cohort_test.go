package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
	"seckill/internal/lock/redislock"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// The cohort contract: the bound, FIFO order and the token layout, with
// the other process queued in Redis's queue.
func TestCohort(t *testing.T) {
	srv := servertest.Redis(t)
	admin := newClient(t, srv)
	locktest.RunCohort(t, locktest.Cohort{
		New: func(t *testing.T, k int) lock.Locker {
			lk, _ := newLockerOpts(t, srv, redislock.Options{TTL: 5 * time.Second, LocalHandoffs: k})
			return lk
		},
		ServerQueued: func(t *testing.T, key string, n int) {
			waitFor(t, fmt.Sprintf("%d queued in Redis", n), func() bool {
				return admin.ZCard(t.Context(), redislock.QueueKey(key)).Val() == int64(n)
			})
		},
		Settled: func(t *testing.T, key string) {
			waitFor(t, "no lock or queue left in Redis", func() bool {
				return admin.Exists(t.Context(), redislock.LockKey(key), redislock.QueueKey(key)).Val() == 0
			})
		},
	})
}

// countingHook counts the commands a client sends, except renewals (the
// only script called with one key), which run on their own schedule.
type countingHook struct{ n *atomic.Int64 }

func (h countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) < 3 || fmt.Sprint(args[2]) != "1" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// A pass in memory costs no round trip; releasing the passed-on lease again
// neither talks to Redis nor touches the successor; and once the lock is
// lost, its current holder's Done closes and it is never passed on again:
// the next local waiter acquires from Redis, with a higher counter.
func TestLostLockEndsPassing(t *testing.T) {
	const ttl = 3 * time.Second // renewals every second notice the loss
	srv := servertest.Redis(t)
	admin := newClient(t, srv)
	a, c := newLocker(t, srv, ttl)
	var sent atomic.Int64
	c.AddHook(countingHook{&sent})
	key := locktest.Key(t)

	later := func() <-chan lock.Lease {
		ch := make(chan lock.Lease, 1)
		go func() {
			l, err := a.Acquire(t.Context(), key)
			if err != nil {
				t.Error(err)
			}
			ch <- l
		}()
		waitFor(t, "a waiter to queue", func() bool { return redislock.Waiting(a, key) == 1 })
		return ch
	}

	l0, err := a.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	next := later()
	before := sent.Load()
	if err := l0.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l1 := <-next
	if l1 == nil {
		t.FailNow()
	}
	if err := l0.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second Release of the passed-on lease = %v, want ErrNotHeld", err)
	}
	if n := sent.Load() - before; n != 0 {
		t.Errorf("pass and second Release sent %d commands, want none", n)
	}
	if got, want := l1.Token(), l0.Token()+1; got != want {
		t.Fatalf("passed lease token %#x, want %#x", got, want)
	}
	select {
	case <-l1.Done():
		t.Fatalf("successor's Done closed by its predecessor's second Release: %v", l1.Err())
	default:
	}
	if got := a.Stats().LocalHandoffs; got != 1 {
		t.Fatalf("Stats().LocalHandoffs = %d, want 1", got)
	}
	// The successor really holds it in Redis: the owner value is still the
	// acquisition's, renewed across the pass.
	if n := admin.Exists(t.Context(), redislock.LockKey(key)).Val(); n != 1 {
		t.Fatalf("lock key exists = %d after a pass, want 1", n)
	}

	next = later()
	if n, err := admin.Del(t.Context(), redislock.LockKey(key)).Result(); err != nil || n != 1 {
		t.Fatalf("DEL lock key: deleted %d, %v; want 1", n, err)
	}
	select {
	case <-l1.Done():
	case <-testwait.Until(t).Done():
		t.Fatal("current holder's Done not closed after the lock was taken away")
	}
	if err := l1.Err(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Err() = %v, want ErrLost", err)
	}
	if err := l1.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release of the lost lease = %v, want ErrNotHeld", err)
	}
	l2 := <-next
	if l2 == nil {
		t.FailNow()
	}
	defer l2.Release(context.Background())
	if got := a.Stats().LocalHandoffs; got != 1 {
		t.Errorf("Stats().LocalHandoffs = %d after the loss, want still 1: a lost lock was passed on", got)
	}
	if l2.Token()>>16 <= l1.Token()>>16 {
		t.Errorf("token after the loss %#x, want a higher counter than %#x", l2.Token(), l1.Token())
	}
	select {
	case <-l2.Done():
		t.Fatalf("new holder's Done closed: %v", l2.Err())
	default:
	}
}

// A lock with too little confirmed validity left is not passed in memory:
// the next local waiter acquires it from Redis instead.
func TestNoPassShortOfValidity(t *testing.T) {
	const ttl = 6 * time.Second
	srv := servertest.Redis(t)
	tests := []struct {
		name     string
		left     time.Duration
		wantPass bool
	}{
		{"Fresh", ttl, true},
		{"BelowMargin", ttl / 6, false},
		{"Expired", -time.Millisecond, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newLocker(t, srv, ttl)
			key := locktest.Key(t)
			l0, err := a.Acquire(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			next := make(chan lock.Lease, 1)
			go func() {
				l, err := a.Acquire(t.Context(), key)
				if err != nil {
					t.Error(err)
				}
				next <- l
			}()
			waitFor(t, "a waiter to queue", func() bool { return redislock.Waiting(a, key) == 1 })
			redislock.ShortenValidity(l0, tc.left)
			if err := l0.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			l1 := <-next
			if l1 == nil {
				t.FailNow()
			}
			defer l1.Release(context.Background())
			passed := a.Stats().LocalHandoffs == 1
			if passed != tc.wantPass {
				t.Fatalf("passed in memory = %v, want %v", passed, tc.wantPass)
			}
			if !passed && l1.Token()>>16 <= l0.Token()>>16 {
				t.Fatalf("token %#x after %#x, want a new acquisition's higher counter", l1.Token(), l0.Token())
			}
		})
	}
}
