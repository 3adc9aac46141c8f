package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
	"seckill/internal/lock/locktest"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
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
		Exclusive: true,
		Processes: true,
		Expiry:    true,
		TTL:       time.Second, // the session timeout
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
			if err := admin.Conn().Delete(pathOf(l), -1); err != nil {
				t.Fatalf("steal: %v", err)
			}
		},
	})
}

// waitChildren waits, event-driven, until dir has n children.
func waitChildren(t *testing.T, conn *zk.Conn, dir string, n int) {
	t.Helper()
	until := testwait.Until(t)
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
		case <-until.Done():
			t.Fatalf("%s has %d children, want %d", dir, len(children), n)
		}
	}
}

// waitQueued waits until n goroutines wait locally for key on lk.
func waitQueued(t *testing.T, lk *Locker, key string, n int) {
	t.Helper()
	if err := lk.co.WaitQueued(testwait.Until(t), key, n); err != nil {
		t.Fatalf("%d local waiters: %v (have %d)", n, err, lk.co.Waiting(key))
	}
}

// pathOf is the lock node behind a lease.
func pathOf(l lock.Lease) string {
	h, ok := cohort.HoldOf(l)
	if !ok {
		return fmt.Sprintf("(not a zklock lease: %T)", l)
	}
	return h.(*node).path
}

// acquisition is one grant in an ordering test.
type acquisition struct {
	who   string
	token uint64
}

// recorder collects acquisitions; every acquirer releases right away.
type recorder struct {
	mu  sync.Mutex
	got []acquisition
	wg  sync.WaitGroup
}

func (r *recorder) acquire(t *testing.T, lk *Locker, key, who string) {
	r.wg.Go(func() {
		l, err := lk.Acquire(t.Context(), key)
		if err != nil {
			t.Errorf("%s: %v", who, err)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, acquisition{who, l.Token()})
		r.mu.Unlock()
		if err := l.Release(t.Context()); err != nil {
			t.Errorf("%s: release: %v", who, err)
		}
	})
}

func (r *recorder) order() []string {
	r.wg.Wait()
	var names []string
	for _, a := range r.got {
		names = append(names, a.who)
	}
	return names
}

// checkTokens fails unless tokens grow strictly in acquisition order.
func (r *recorder) checkTokens(t *testing.T, after uint64) {
	t.Helper()
	last := after
	for _, a := range r.got {
		if a.token <= last {
			t.Fatalf("%s got token %#x after %#x, want strictly greater (order %v)", a.who, a.token, last, r.order())
		}
		last = a.token
	}
}

// Processes are served in ZooKeeper's FIFO order, a batch at a time; the
// goroutines of one process in their local arrival order.
func TestFIFOAcrossLockersByBatch(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	var lockers [3]*Locker
	for i := range lockers {
		lockers[i] = New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{})
		t.Cleanup(func() { _ = lockers[i].Close() })
	}
	a, b, c := lockers[0], lockers[1], lockers[2]
	key := locktest.Key(t)
	dir := DefaultRoot + "/" + key

	holder, err := a.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	var r recorder
	r.acquire(t, b, key, "b1")
	waitChildren(t, admin.Conn(), dir, 2) // b's node queued behind a's
	r.acquire(t, c, key, "c1")
	waitChildren(t, admin.Conn(), dir, 3) // c's node behind b's
	r.acquire(t, b, key, "b2")
	waitQueued(t, b, key, 1)
	r.acquire(t, c, key, "c2")
	waitQueued(t, c, key, 1)
	r.acquire(t, a, key, "a1")
	waitQueued(t, a, key, 1)
	r.acquire(t, a, key, "a2")
	waitQueued(t, a, key, 2)
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := r.order()
	want := []string{"a1", "a2", "b1", "b2", "c1", "c2"}
	if !slices.Equal(got, want) {
		t.Fatalf("acquisition order %v, want %v", got, want)
	}
	r.checkTokens(t, holder.Token())
	waitChildren(t, admin.Conn(), dir, 0)
}

// The cohort contract: the bound, FIFO order and the token layout, with
// the other process's node queued in ZooKeeper; passes cost no write (the
// node, hence the token's high bits, stays the same), and no node is left
// once idle.
func TestCohort(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	locktest.RunCohort(t, locktest.Cohort{
		New: func(t *testing.T, k int) lock.Locker {
			return New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{LocalHandoffs: k})
		},
		ServerQueued: func(t *testing.T, key string, n int) {
			waitChildren(t, admin.Conn(), DefaultRoot+"/"+key, n+1) // the holder's node and n
		},
		Settled: func(t *testing.T, key string) {
			waitChildren(t, admin.Conn(), DefaultRoot+"/"+key, 0)
		},
	})
}

// A lost lease gives up the front: the next local waiter queues a new node
// instead of waiting for a Release that may never come.
func TestLossMovesLocalFront(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	lk := New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{})
	t.Cleanup(func() { _ = lk.Close() })
	key := locktest.Key(t)

	holder, err := lk.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan lock.Lease, 1)
	go func() {
		l, err := lk.Acquire(t.Context(), key)
		if err != nil {
			t.Error(err)
		}
		next <- l
	}()
	waitQueued(t, lk, key, 1)
	if err := admin.Conn().Delete(pathOf(holder), -1); err != nil {
		t.Fatal(err)
	}
	l := <-next
	if l == nil {
		t.FailNow()
	}
	defer l.Release(t.Context())
	if !errors.Is(holder.Err(), lock.ErrLost) {
		t.Fatalf("holder Err() = %v, want ErrLost", holder.Err())
	}
	if pathOf(l) == pathOf(holder) || l.Token()>>16 <= holder.Token()>>16 {
		t.Fatalf("waiter got node %s token %#x after the lost %s %#x, want a new node and a greater token",
			pathOf(l), l.Token(), pathOf(holder), holder.Token())
	}
	if err := holder.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release of the lost lease = %v, want ErrNotHeld", err)
	}
}

func TestCancelledWaitsLeaveNoNode(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	lk := New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{})
	t.Cleanup(func() { _ = lk.Close() })
	other := New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{})
	t.Cleanup(func() { _ = other.Close() })
	key := locktest.Key(t)
	dir := DefaultRoot + "/" + key

	holder, err := lk.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	// Waiters on the holder's Locker queue locally; those on the other
	// Locker share one node, handed from one front to the next as each
	// gives up, and deleted when the last one does.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), time.Duration(100+50*i)*time.Millisecond)
			defer cancel()
			l, err := []*Locker{lk, other}[i%2].Acquire(ctx, key)
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
	for _, l := range []*Locker{lk, other} {
		if n := l.co.Waiting(key); n != 0 {
			t.Errorf("%d local waiters left, want 0", n)
		}
	}
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
	// The event a broken lease would wait for is the session's expiry:
	// long, so that waiting for it cannot pass for a slow machine. Nothing
	// waits for it when the lease behaves (the server allows up to 60s).
	const sessionTimeout = 30 * time.Second
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
	case <-testwait.Until(t).Done():
		t.Fatal("Done not closed after the connection was cut")
	}
	if took := time.Since(start); took >= sessionTimeout/2 {
		t.Fatalf("Done closed %v after the cut: it waited for the session to expire (timeout %v), not the disconnect", took, sessionTimeout)
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
	_, _, gone, err := admin.Conn().ExistsW(pathOf(l))
	if err != nil {
		t.Fatal(err)
	}
	holder.proxy.Cut()
	select {
	case ev := <-gone:
		if ev.Type != zk.EventNodeDeleted {
			t.Fatalf("watch on the holder's node: %v, want NodeDeleted", ev.Type)
		}
	case <-testwait.Until(t).Done():
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
	ctx := testwait.Until(t)
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
		if !strings.HasSuffix(pathOf(l), lockMarker+"0000000000") {
			t.Fatalf("round %d: node %s, want sequence 0 in a fresh parent", round, pathOf(l))
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
	// The other event that could end the cut-off waiter's Acquire is its
	// session's expiry: long, so that returning at it cannot pass for a
	// slow machine returning at the deadline. Nothing waits for it when the
	// deadline is honoured.
	const sessionTimeout = 30 * time.Second
	srv := servertest.ZooKeeper(t)
	holder := New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{})
	t.Cleanup(func() { _ = holder.Close() })
	waiter := newProxied(t, srv.Addr(), sessionTimeout)
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
	case <-testwait.Until(t).Done():
		t.Fatalf("Acquire still blocked %v after the cut with a 1.5s deadline", time.Since(start))
	}
	// How late is the check: returning at all could be the session's
	// expiry, not the deadline.
	took := time.Since(start)
	if took >= sessionTimeout/2 {
		t.Fatalf("Acquire returned %v after the cut with a 1.5s deadline: at the session's expiry (timeout %v), not the deadline", took, sessionTimeout)
	}
	t.Logf("Acquire returned %v after the cut with a 1.5s deadline", took.Round(time.Millisecond))
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

// packetsReceived reads the server's zk_packets_received (mntr): every
// request any client sent, heartbeats included.
func packetsReceived(t *testing.T, addr string) int64 {
	t.Helper()
	return mntr(t, addr, "zk_packets_received")
}

// mntr reads one counter of the server's mntr report.
func mntr(t *testing.T, addr, name string) int64 {
	t.Helper()
	n, err := servers.ZooKeeperStat(t.Context(), addr, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A hold shorter than Options.LossWatchDelay sets no watch on the server
// (no notification on our own delete); a longer one gets an exists-watch on
// its node, and Done closes when an operator deletes the node.
func TestLossWatchDelay(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	key := locktest.Key(t)

	t.Run("short hold", func(t *testing.T) {
		lk := New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{LossWatchDelay: time.Hour})
		t.Cleanup(func() { _ = lk.Close() })
		l, err := lk.Acquire(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if n := mntr(t, srv.Addr(), "zk_watch_count"); n != 0 {
			t.Errorf("%d watches on the server while a hold is younger than the delay, want 0", n)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("long hold", func(t *testing.T) {
		lk := New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{LossWatchDelay: time.Millisecond})
		t.Cleanup(func() { _ = lk.Close() })
		l, err := lk.Acquire(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		// The watch is set in the background; the server's count is the
		// only sign of it, so look until it shows.
		until := testwait.Until(t)
		for mntr(t, srv.Addr(), "zk_watch_count") != 1 {
			if until.Err() != nil {
				t.Fatal("no watch on the server during a hold, with a 1ms delay")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := admin.Conn().Delete(pathOf(l), -1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Done():
		case <-until.Done():
			t.Fatal("Done still open after the held node was deleted")
		}
		if !errors.Is(l.Err(), lock.ErrLost) {
			t.Fatalf("Err() = %v, want ErrLost", l.Err())
		}
	})

	// Deleted while too young to be watched: the watch, when it comes,
	// finds the node gone.
	t.Run("deleted before the watch", func(t *testing.T) {
		lk := New(zksesstest.Dial(t, srv.Addr(), 5*time.Second), Options{LossWatchDelay: 2 * time.Second})
		t.Cleanup(func() { _ = lk.Close() })
		l, err := lk.Acquire(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.Conn().Delete(pathOf(l), -1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Done():
		case <-testwait.Until(t).Done():
			t.Fatal("Done still open after the held node was deleted, with a 2s delay")
		}
		if !errors.Is(l.Err(), lock.ErrLost) {
			t.Fatalf("Err() = %v, want ErrLost", l.Err())
		}
	})
}

// Requests per acquire+release, counted by the server: uncontended, a
// create, one getChildren and a delete (raw zk.Lock's count); a cohort of
// goroutines on one Locker shares a node, so it costs well under one request
// per acquisition (one node per goroutine costs four or more).
func TestRequestsPerAcquisition(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	// A long session timeout keeps heartbeats (every third of it) out of
	// the count.
	// No loss watch: a hold slowed past its delay (a loaded machine) would
	// add a request that is not the lock's.
	lk := New(zksesstest.Dial(t, srv.Addr(), 30*time.Second), Options{LossWatchDelay: time.Hour})
	t.Cleanup(func() { _ = lk.Close() })
	key := locktest.Key(t)
	if l, err := lk.Acquire(t.Context(), key); err != nil { // creates the key's parents
		t.Fatal(err)
	} else if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}

	t.Run("uncontended", func(t *testing.T) {
		const rounds = 20
		before := packetsReceived(t, srv.Addr())
		for range rounds {
			l, err := lk.Acquire(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		// -1: the mntr connection itself. One packet of slack: a heartbeat
		// may fall in the window.
		got := packetsReceived(t, srv.Addr()) - before - 1
		if want := int64(3*rounds + 1); got > want {
			t.Fatalf("%d requests for %d acquire+release, want at most %d (3 each)", got, rounds, want)
		}
		t.Logf("%d requests for %d acquire+release", got, rounds)
	})

	t.Run("one process, 8 goroutines", func(t *testing.T) {
		const goroutines, rounds = 8, 20
		before := packetsReceived(t, srv.Addr())
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range rounds {
					l, err := lk.Acquire(t.Context(), key)
					if err != nil {
						t.Error(err)
						return
					}
					if err := l.Release(t.Context()); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		got := packetsReceived(t, srv.Addr()) - before - 1
		if n := int64(goroutines * rounds); got >= n {
			t.Fatalf("%d requests for %d acquisitions, want fewer than one each", got, n)
		}
		t.Logf("%d requests for %d acquisitions", got, goroutines*rounds)
	})
}
