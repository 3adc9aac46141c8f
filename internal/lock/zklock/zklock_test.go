package zklock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
	"seckill/internal/servers/servertest"
	"seckill/internal/zksess"
	"seckill/internal/zksess/zksesstest"
)

// proxiedLocker is a Locker on its own session behind a cuttable proxy: a
// separate "process" whose network a test can sever.
type proxiedLocker struct {
	*Locker
	sess  *zksess.Session
	proxy *zksesstest.Proxy
}

func newProxied(t *testing.T, addr string, sessionTimeout time.Duration) proxiedLocker {
	t.Helper()
	p := zksesstest.NewProxy(t, addr)
	s := zksesstest.Dial(t, p.Addr(), sessionTimeout)
	lk := New(s, Options{})
	t.Cleanup(func() { _ = lk.Close() })
	return proxiedLocker{Locker: lk, sess: s, proxy: p}
}

func TestConformance(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	var proxies sync.Map // *Locker → *zksesstest.Proxy
	locktest.Run(t, locktest.Env{
		TTL: time.Second, // the session timeout
		New: func(t *testing.T, opts lock.Options) lock.Locker {
			p := zksesstest.NewProxy(t, srv.Addr())
			lk := New(zksesstest.Dial(t, p.Addr(), opts.TTL), Options{})
			proxies.Store(lk, p)
			return lk
		},
		// A dead process: its TCP connection is gone and it never closes
		// its session, so the server expires it after the session timeout.
		Crash: func(t *testing.T, lk lock.Locker) {
			p, ok := proxies.Load(lk)
			if !ok {
				t.Fatalf("no proxy for %T", lk)
			}
			p.(*zksesstest.Proxy).Cut()
		},
		// An operator (or a bug) deletes the holder's node.
		Steal: func(t *testing.T, l lock.Lease) {
			if err := admin.Conn().Delete(l.(*lease).Path(), -1); err != nil {
				t.Fatalf("steal: %v", err)
			}
		},
	})
}

// waitChildren waits, event-driven, until dir has n children.
func waitChildren(t *testing.T, conn *zk.Conn, dir string, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		children, _, ch, err := conn.ChildrenW(dir)
		if err == nil && len(children) == n {
			return
		}
		if errors.Is(err, zk.ErrNoNode) {
			if n == 0 {
				return
			}
			_, _, ch, err = conn.ExistsW(dir)
		}
		if err != nil {
			t.Fatalf("children of %s: %v", dir, err)
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s has %d children, want %d", dir, len(children), n)
		}
	}
}

func TestFIFO(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	lockers := []*Locker{
		New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{}),
		New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{}),
	}
	key := locktest.Key(t)
	dir := DefaultRoot + "/" + key

	holder, err := lockers[0].Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 8
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range waiters {
		wg.Go(func() {
			l, err := lockers[i%2].Acquire(t.Context(), key)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = l.Release(t.Context())
		})
		waitChildren(t, admin.Conn(), dir, i+2) // waiter i has queued
	}
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("acquisition order %v, want arrival order 0..%d", order, waiters-1)
		}
	}
	if len(order) != waiters {
		t.Fatalf("%d waiters acquired, want %d", len(order), waiters)
	}
}

func TestCancelledWaitsLeaveNoNode(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	lk := New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{})
	t.Cleanup(func() { _ = lk.Close() })
	key := locktest.Key(t)
	dir := DefaultRoot + "/" + key

	holder, err := lk.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), time.Duration(100+50*i)*time.Millisecond)
			defer cancel()
			l, err := lk.Acquire(ctx, key)
			if err == nil {
				_ = l.Release(t.Context())
				t.Error("Acquire succeeded while held")
				return
			}
			if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Acquire = %v, want ErrNotObtained wrapping DeadlineExceeded", err)
			}
		})
	}
	wg.Wait()
	waitChildren(t, admin.Conn(), dir, 1) // only the holder is left
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, admin.Conn(), dir, 0)
}

// Goroutines of one Locker exclude each other exactly as processes do.
func TestExclusionWithinOneLocker(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	lk := New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{})
	t.Cleanup(func() { _ = lk.Close() })
	key := locktest.Key(t)
	var (
		counter, inside, overlaps int
		mu                        sync.Mutex // guards inside/overlaps only
		wg                        sync.WaitGroup
	)
	const goroutines, rounds = 16, 5
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				l, err := lk.Acquire(t.Context(), key)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inside++
				if inside != 1 {
					overlaps++
				}
				mu.Unlock()
				v := counter
				time.Sleep(100 * time.Microsecond) // widen the race window
				counter = v + 1
				mu.Lock()
				inside--
				mu.Unlock()
				if err := l.Release(t.Context()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if overlaps != 0 || counter != goroutines*rounds {
		t.Fatalf("overlaps = %d, counter = %d; want 0, %d", overlaps, counter, goroutines*rounds)
	}
}

// A disconnect suspends the session: Done closes at once, long before the
// session could expire, and the node is deleted when the connection is back
// so the queue does not wait for the session timeout.
func TestDoneOnDisconnect(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	const sessionTimeout = 20 * time.Second
	holder := newProxied(t, srv.Addr(), sessionTimeout)
	key := locktest.Key(t)

	l, err := holder.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	holder.proxy.Cut()
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the connection was cut")
	}
	if took := time.Since(start); took >= sessionTimeout/2 {
		t.Fatalf("Done closed after %v, want well before the %v session timeout", took, sessionTimeout)
	}
	if err := l.Err(); !errors.Is(err, lock.ErrLost) || !strings.Contains(err.Error(), "suspended") {
		t.Fatalf("Err() = %v, want ErrLost for a suspended session", err)
	}
	if err := holder.Ping(t.Context()); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Ping while cut = %v, want ErrUnavailable", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := holder.Acquire(ctx, key); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Acquire while cut = %v, want ErrUnavailable", err)
	}

	holder.proxy.Restore(t)
	// Same session after the blip: the orphaned node is deleted on
	// reconnection, so another process gets the lock without waiting for
	// the session timeout.
	other := New(admin, Options{})
	t.Cleanup(func() { _ = other.Close() })
	ctx, cancel = context.WithTimeout(t.Context(), sessionTimeout/2)
	defer cancel()
	l2, err := other.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("Acquire after the holder's reconnection: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token %d after a lost lease's %d, want greater", l2.Token(), l.Token())
	}
	if err := l.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release of the suspended lease = %v, want ErrNotHeld", err)
	}
	if err := l2.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Expiry while holding: the server deletes the node after the session
// timeout, the holder's Done is closed and another process takes over.
func TestDoneOnExpiry(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	holder := newProxied(t, srv.Addr(), time.Second)
	key := locktest.Key(t)
	l, err := holder.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	_, _, gone, err := admin.Conn().ExistsW(l.(*lease).Path())
	if err != nil {
		t.Fatal(err)
	}
	holder.proxy.Cut()
	select {
	case ev := <-gone:
		if ev.Type != zk.EventNodeDeleted {
			t.Fatalf("watch on the holder's node: %v, want NodeDeleted", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("node of an expired session not deleted")
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done still open after the session expired")
	}
	holder.proxy.Restore(t)
	// After reconnection the client learns of the expiry and gets a new
	// session; the Locker is usable again.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	events, stop := holder.sess.Subscribe()
	defer stop()
	for ev := range events {
		if ev.State == zk.StateHasSession && holder.sess.State() == zk.StateHasSession {
			break
		}
	}
	l2, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("Acquire on the new session: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token %d after expiry, want > %d", l2.Token(), l.Token())
	}
	_ = l2.Release(t.Context())
}

// The czxid keeps growing when the key's node is deleted and re-created,
// while the sequence suffix starts over.
func TestTokenAfterParentRecreated(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	lk := New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{Root: "/tokens"})
	t.Cleanup(func() { _ = lk.Close() })
	key := locktest.Key(t)

	var last uint64
	for round := range 3 {
		l, err := lk.Acquire(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(l.(*lease).Path(), lockMarker+"0000000000") {
			t.Fatalf("round %d: node %s, want sequence 0 in a fresh parent", round, l.(*lease).Path())
		}
		if tok := l.Token(); tok <= last {
			t.Fatalf("round %d: token %d, want > %d", round, tok, last)
		}
		last = l.Token()
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := admin.Conn().Delete("/tokens/"+key, -1); err != nil {
			t.Fatalf("delete parent: %v", err)
		}
	}
}

func TestUnreachableNeverHangs(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	holder := New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{})
	t.Cleanup(func() { _ = holder.Close() })
	waiter := newProxied(t, srv.Addr(), 5*time.Second)
	key := locktest.Key(t)
	l, err := holder.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())

	// A waiter queued when the network goes away returns by its deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(ctx, key)
		res <- err
	}()
	waitChildren(t, holder.conn, DefaultRoot+"/"+key, 2)
	start := time.Now()
	waiter.proxy.Cut()
	select {
	case err := <-res:
		if !errors.Is(err, lock.ErrNotObtained) && !errors.Is(err, lock.ErrUnavailable) {
			t.Fatalf("Acquire = %v, want ErrNotObtained or ErrUnavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Acquire still blocked %v after the cut with a 1.5s deadline", time.Since(start))
	}
}

func TestDescribe(t *testing.T) {
	var lk *Locker
	if got, want := lk.Describe(), (lock.Info{Name: "zookeeper", Safe: true}); got != want {
		t.Fatalf("Describe() = %+v, want %+v", got, want)
	}
	if err := validKey("a//b"); err == nil {
		t.Fatal(`validKey("a//b") = nil, want an error`)
	}
}
