package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
	"seckill/internal/lock/redislock"
	"seckill/internal/servers/servertest"
)

// A waiter in another process gets the lock after at most LocalHandoffs+1
// holders of the process holding it, and tokens increase in lock order: by
// one per pass in memory, and by a new counter value (c<<16) per acquisition
// from Redis.
func TestLocalHandoffsBounded(t *testing.T) {
	srv := servertest.Redis(t)
	admin := newClient(t, srv)
	const locals = 4 // goroutines of process a queued behind a0
	tests := []struct {
		name          string
		localHandoffs int
		// want is the lock order; "+" marks a pass in memory from the
		// holder before, the rest acquired from Redis.
		want string
	}{
		{"Disabled", -1, "a0 b a1 a2 a3 a4"},
		{"One", 1, "a0 a1+ b a2 a3+ a4"},
		{"Three", 3, "a0 a1+ a2+ a3+ b a4"},
		{"Default", 0, "a0 a1+ a2+ a3+ a4+ b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := locktest.Key(t)
			a, _ := newLockerOpts(t, srv, redislock.Options{TTL: 5 * time.Second, LocalHandoffs: tc.localHandoffs})
			b, _ := newLocker(t, srv, 5*time.Second)
			type turn struct {
				who   string
				token uint64
			}
			var (
				mu    sync.Mutex
				order []turn
				wg    sync.WaitGroup
			)
			record := func(who string, l lock.Lease) {
				mu.Lock()
				order = append(order, turn{who, l.Token()})
				mu.Unlock()
			}
			take := func(lk *redislock.Locker, who string) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, err := lk.Acquire(t.Context(), key)
					if err != nil {
						t.Error(err)
						return
					}
					record(who, l)
					if err := l.Release(t.Context()); err != nil {
						t.Errorf("%s: Release: %v", who, err)
					}
				}()
			}

			a0, err := a.Acquire(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			record("a0", a0)
			for i := 1; i <= locals; i++ {
				take(a, fmt.Sprintf("a%d", i))
				waitFor(t, fmt.Sprintf("a%d to queue", i), func() bool { return redislock.Waiting(a, key) == i })
			}
			take(b, "b")
			waitFor(t, "b to queue in Redis", func() bool {
				return admin.ZCard(t.Context(), redislock.QueueKey(key)).Val() == 1
			})
			if err := a0.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			wg.Wait()

			var got []string
			for _, o := range order {
				got = append(got, o.who)
			}
			want := strings.Fields(strings.ReplaceAll(tc.want, "+", ""))
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("lock order %v, want %v", got, want)
			}
			passes := 0
			for i, w := range strings.Fields(tc.want) {
				if i == 0 {
					continue
				}
				prev, cur := order[i-1].token, order[i].token
				if strings.HasSuffix(w, "+") {
					passes++
					if cur != prev+1 {
						t.Errorf("%s passed in memory: token %#x, want %#x (previous + 1)", order[i].who, cur, prev+1)
					}
				} else if cur>>16 <= prev>>16 || cur&0xffff != 0 {
					t.Errorf("%s acquired from Redis: token %#x after %#x, want a higher counter in the high bits and 0 passes", order[i].who, cur, prev)
				}
			}
			if got := a.Stats().LocalHandoffs; got != uint64(passes) {
				t.Errorf("Stats().LocalHandoffs = %d, want %d", got, passes)
			}
		})
	}
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
	case <-time.After(3*ttl + 5*time.Second):
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
