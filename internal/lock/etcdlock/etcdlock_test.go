package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"seckill/internal/etcdsess"
	"seckill/internal/lock"
	"seckill/internal/lock/etcdlock"
	"seckill/internal/lock/locktest"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

func TestConformance(t *testing.T) {
	c := newCluster(t)
	locktest.Run(t, locktest.Env{
		New: func(t *testing.T, opts lock.Options) lock.Locker {
			return c.locker(t, opts.TTL)
		},
		Exclusive: true,
		Processes: true,
		Expiry:    true,
		TTL:       time.Second, // etcd's smallest lease
		Crash:     func(t *testing.T, lk lock.Locker) { c.crash(t, lk) },
		Steal:     func(t *testing.T, l lock.Lease) { c.steal(t, l) },
	})
}

func TestDescribe(t *testing.T) {
	l := etcdlock.New(etcdsess.New(nil, 0), etcdlock.Options{})
	if got, want := l.Describe(), (lock.Info{Name: "etcd", Safe: true}); got != want {
		t.Fatalf("Describe() = %+v, want %+v", got, want)
	}
	if got, want := l.KeyPrefix("a/b"), "/seckill/locks/a%2Fb/"; got != want {
		t.Fatalf("KeyPrefix(a/b) = %q, want %q (escaped, so lock a never covers a/b)", got, want)
	}
}

// Goroutines of one Locker share one session; the local queue must still
// exclude them, and the tokens of successive holders must grow even when
// the lock is handed over in memory.
func TestExclusionWithinOneLocker(t *testing.T) {
	c := newCluster(t)
	lk := c.locker(t, 2*time.Second)
	key := testKey(t)
	const goroutines, rounds = 16, 25
	var (
		mu      sync.Mutex // guards tokens only, not the critical section
		tokens  []uint64
		inside  atomic.Int32
		overlap atomic.Int32
		wg      sync.WaitGroup
	)
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				l := acquire(t, lk, key)
				if inside.Add(1) != 1 {
					overlap.Add(1)
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				inside.Add(-1)
				if err := l.Release(t.Context()); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if n := overlap.Load(); n != 0 {
		t.Fatalf("%d critical sections overlapped, want 0", n)
	}
	handovers := 0
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d = %d after %d, want strictly greater", i, tokens[i], tokens[i-1])
		}
		if tokens[i]>>16 == tokens[i-1]>>16 {
			handovers++
		}
	}
	t.Logf("%d of %d acquisitions were in-memory hand-overs", handovers, len(tokens))
	if handovers == 0 {
		t.Errorf("no in-memory hand-over among %d acquisitions by queued goroutines of one Locker, want some", len(tokens))
	}
	if ks, _ := c.keys(t, lk.KeyPrefix(key)); len(ks) != 0 {
		t.Fatalf("keys left under the prefix: %v, want none", ks)
	}
}

// A fresh acquisition's token is its key's create revision, shifted; tokens
// grow across lockers.
func TestTokenIsCreateRevision(t *testing.T) {
	c := newCluster(t)
	lockers := []*etcdlock.Locker{c.locker(t, 2*time.Second), c.locker(t, 2*time.Second)}
	key := testKey(t)
	var last uint64
	for i := range 6 {
		l := acquire(t, lockers[i%2], key)
		resp, err := c.admin.Get(t.Context(), etcdlock.EtcdKey(l))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("Get(%s) = %v, %v; want the lock key", etcdlock.EtcdKey(l), resp, err)
		}
		if got, want := l.Token(), uint64(resp.Kvs[0].CreateRevision)<<16; got != want {
			t.Fatalf("Token() = %d, want create revision %d << 16 = %d", got, resp.Kvs[0].CreateRevision, want)
		}
		if l.Token() <= last {
			t.Fatalf("acquisition %d: token %d, want > %d", i, l.Token(), last)
		}
		last = l.Token()
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// Waiters of different lockers get the lock in the order they queued.
func TestFIFOAcrossLockers(t *testing.T) {
	c := newCluster(t)
	holder := c.locker(t, 2*time.Second)
	key := testKey(t)
	h := acquire(t, holder, key)
	pfx := holder.KeyPrefix(key)

	const waiters = 4
	order := make(chan int, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		lk := c.locker(t, 2*time.Second)
		wg.Go(func() {
			l := acquire(t, lk, key)
			order <- i
			if err := l.Release(t.Context()); err != nil {
				t.Error(err)
			}
		})
		// Queue strictly one after another: wait until waiter i's key is in.
		c.waitKeys(t, pfx, func(n int) bool { return n == i+2 })
	}
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("waiter %d acquired in position %d, want arrival order", got, want)
		}
		want++
	}
}

// Cancelled and timed-out waiters remove their keys; nothing is left once
// the holder releases.
func TestNoKeyLeftAfterCancelledWaits(t *testing.T) {
	c := newCluster(t)
	holder := c.locker(t, 2*time.Second)
	key := testKey(t)
	h := acquire(t, holder, key)
	pfx := holder.KeyPrefix(key)

	var wg sync.WaitGroup
	for i := range 6 {
		lk := c.locker(t, 2*time.Second)
		ctx, cancel := context.WithCancel(t.Context())
		if i%2 == 0 {
			ctx, cancel = context.WithTimeout(t.Context(), 200*time.Millisecond)
		}
		_, rev := c.keys(t, pfx)
		wg.Go(func() {
			_, err := lk.Acquire(ctx, key)
			if !errors.Is(err, lock.ErrNotObtained) {
				t.Errorf("waiter %d: Acquire = %v, want ErrNotObtained", i, err)
			}
		})
		c.waitPut(t, pfx, rev) // queued
		if i%2 == 1 {
			cancel()
		} else {
			defer cancel()
		}
	}
	wg.Wait()
	left := c.waitKeys(t, pfx, func(n int) bool { return n <= 1 })
	if len(left) != 1 || left[0] != etcdlock.EtcdKey(h) {
		t.Fatalf("keys after cancelled waits = %v, want only the holder's %s", left, etcdlock.EtcdKey(h))
	}
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ks, _ := c.keys(t, pfx); len(ks) != 0 {
		t.Fatalf("keys after release = %v, want none", ks)
	}
}

// A waiter whose session expires while it is queued must not get the lock
// while the holder is still there and never released: it queues again on a
// new session (it waits for its turn rather than fail at once)
// and ends at its deadline, not obtained.
func TestSessionExpiredWhileQueued(t *testing.T) {
	c := newCluster(t)
	holder, waiter := c.locker(t, 2*time.Second), c.locker(t, 2*time.Second)
	key := testKey(t)
	h := acquire(t, holder, key)
	res := make(chan error, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	go func() {
		l, err := waiter.Acquire(ctx, key)
		if err == nil {
			_ = l.Release(context.Background())
		}
		res <- err
	}()
	c.waitKeys(t, holder.KeyPrefix(key), func(n int) bool { return n == 2 }) // queued
	waiterLease := c.otherLease(t, holder.KeyPrefix(key), etcdlock.EtcdKey(h))
	if _, err := c.admin.Revoke(t.Context(), waiterLease); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire after session expiry = %v, want ErrNotObtained at its deadline", err)
		}
	case <-testwait.Until(t).Done():
		t.Fatal("queued waiter did not return by its deadline after its session expired")
	}
	select {
	case <-h.Done():
		t.Fatalf("holder lost the lock: %v", h.Err())
	default:
	}
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// After its session expired, the old holder's Release must not delete the
// new holder's key.
func TestReleaseAfterExpiryKeepsNewHolder(t *testing.T) {
	c := newCluster(t)
	a, b := c.locker(t, time.Second), c.locker(t, time.Second)
	key := testKey(t)
	la := acquire(t, a, key)
	c.steal(t, la)
	lb := acquire(t, b, key)
	if err := la.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("old holder's Release = %v, want ErrNotHeld", err)
	}
	resp, err := c.admin.Get(t.Context(), etcdlock.EtcdKey(lb))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("new holder's key %s after the old Release: %v %v, want it intact", etcdlock.EtcdKey(lb), resp.Kvs, err)
	}
	if err := lb.Release(t.Context()); err != nil {
		t.Fatalf("new holder's Release: %v", err)
	}
}

// A process with busy local goroutines must not starve another process:
// once the other queues, releases go through etcd.
func TestLocalHandoverDoesNotStarveOthers(t *testing.T) {
	c := newCluster(t)
	busy, other := c.locker(t, 2*time.Second), c.locker(t, 2*time.Second)
	key := testKey(t)
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := busy.Acquire(ctx, key)
				if err != nil {
					return
				}
				_ = l.Release(context.Background())
			}
		})
	}
	acquire(t, busy, key).Release(t.Context()) // the busy loop is running
	// The bound is the check: a busy queue that starved the other process
	// for a while would pass an unbounded wait.
	wctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	l, err := other.Acquire(wctx, key)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("other process: %v, want the lock despite a busy local queue", err)
	}
	_ = l.Release(t.Context())
}

// An unreachable etcd fails an Acquire within its deadline, saying why.
func TestUnavailable(t *testing.T) {
	addr, err := servers.LoopbackAddr() // nothing listens here
	if err != nil {
		t.Fatal(err)
	}
	m := etcdsess.New(servertest.EtcdClient(t, addr), time.Second)
	lk := etcdlock.New(m, etcdlock.Options{})
	t.Cleanup(func() { _ = lk.Close(); _ = m.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = lk.Acquire(ctx, "x")
	if !errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want ErrUnavailable wrapping DeadlineExceeded", err)
	}
	// The error says what ended the call: the deadline (otherwise an
	// unreachable server is waited for for ever, and a hang fails the
	// test binary). How long after it the machine took is only noted.
	waited := time.Since(start)
	note := ""
	if waited > 5*time.Second {
		note = " (SLOW)"
	}
	t.Logf("Acquire returned after %v with a 500ms deadline%s", waited.Round(time.Millisecond), note)
	pctx, pcancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer pcancel()
	if err := lk.Ping(pctx); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Ping = %v, want ErrUnavailable", err)
	}
}

// The key layout is concurrency.Mutex's: the two exclude each other.
func TestInteropWithConcurrencyMutex(t *testing.T) {
	c := newCluster(t)
	lk := c.locker(t, 2*time.Second)
	key := testKey(t)
	s, err := concurrency.NewSession(c.admin, concurrency.WithTTL(2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mu := concurrency.NewMutex(s, strings.TrimSuffix(lk.KeyPrefix(key), "/"))
	if err := mu.Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if l, err := lk.Acquire(ctx, key); err == nil {
		_ = l.Release(t.Context())
		t.Fatal("Acquire succeeded while a concurrency.Mutex held the lock")
	}
	if err := mu.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	acquire(t, lk, key).Release(t.Context())
}
