package etcdlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"seckill/internal/lock"
	"seckill/internal/lock/etcdlock"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// queuedRun is a batch of Acquires queued on one key behind a holder whose
// session is about to go; it checks what is asked of them: each
// gets the lock, one at a time, with tokens strictly above the lost lease's
// and strictly increasing, only once the lost lease's Done is closed, and
// never on the lost session's lease.
type queuedRun struct {
	first   lock.Lease
	results chan error
	dead    atomic.Int64 // a lease ID no grant may be made on (0: none)

	mu     sync.Mutex
	tokens []uint64
	inside atomic.Int32
}

// queueBehind starts n Acquires on lk and returns once they are queued:
// all n behind first when lk holds it, else n-1 behind lk's front.
func queueBehind(t *testing.T, lk *etcdlock.Locker, key string, first lock.Lease, n int, holds bool) *queuedRun {
	t.Helper()
	r := &queuedRun{first: first, results: make(chan error, n)}
	until := testwait.Until(t)
	for range n {
		go func() {
			l, err := lk.Acquire(until, key)
			if err != nil {
				r.results <- err
				return
			}
			if holds { // first is lost here, not released by another process
				select {
				case <-first.Done():
				default:
					r.results <- errors.New("granted while the lease of the lost session still had Done open")
					_ = l.Release(context.Background())
					return
				}
			}
			if id := etcdlock.LeaseID(l); int64(id) == r.dead.Load() {
				r.results <- errors.New("granted on the lost session's lease")
			}
			if r.inside.Add(1) != 1 {
				r.results <- errors.New("two holders at once")
			}
			r.mu.Lock()
			r.tokens = append(r.tokens, l.Token())
			r.mu.Unlock()
			r.inside.Add(-1)
			r.results <- l.Release(context.Background())
		}()
	}
	if !holds {
		n--
	}
	etcdlock.WaitQueued(t, lk, key, n)
	return r
}

// check waits for every Acquire and verifies the outcome.
func (r *queuedRun) check(t *testing.T, n int) {
	t.Helper()
	for range n {
		if err := <-r.results; err != nil {
			t.Errorf("queued Acquire: %v, want the lock on a new session", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.first.Token()
	for i, tok := range r.tokens {
		if tok <= last {
			t.Errorf("grant %d: token %#x, want > %#x", i, tok, last)
		}
		last = tok
	}
	if len(r.tokens) != n {
		t.Errorf("%d grants, want %d", len(r.tokens), n)
	}
}

// A lease lost while requests queue behind its hold (a process paused past
// its TTL comes back to a lease etcd has expired; here the lease is
// revoked): they wait for a new session and take their turn, instead of
// failing at once on the dead lease.
func TestQueuedSurviveLeaseLoss(t *testing.T) {
	c := newCluster(t)
	lk := c.locker(t, 2*time.Second)
	key := testKey(t)
	first := acquire(t, lk, key)
	const n = 8
	r := queueBehind(t, lk, key, first, n, true)
	r.dead.Store(int64(etcdlock.LeaseID(first)))
	c.steal(t, first)
	r.check(t, n)
	if err := first.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release of the lost lease = %v, want ErrNotHeld", err)
	}
}

// The lease of a process whose requests queue in etcd behind another
// process's holder is lost: its front's key goes with the lease, and the
// queue must move to a new session rather than fail.
func TestQueuedSurviveLeaseLossWhileQueued(t *testing.T) {
	c := newCluster(t)
	holder, waiter := c.locker(t, 2*time.Second), c.locker(t, 2*time.Second)
	key := testKey(t)
	first := acquire(t, holder, key)
	const n = 8
	r := queueBehind(t, waiter, key, first, n, false)
	pfx := holder.KeyPrefix(key)
	c.waitKeys(t, pfx, func(n int) bool { return n == 2 }) // the front queued in etcd
	dead := c.otherLease(t, pfx, etcdlock.EtcdKey(first))
	r.dead.Store(int64(dead))
	resp, err := c.admin.Revoke(t.Context(), dead)
	if err != nil {
		t.Fatal(err)
	}
	// The front queues again on a new lease: a new key behind the holder's.
	ctx := testwait.Until(t)
	requeued := false
	for wr := range c.admin.Watch(ctx, pfx, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterDelete()) {
		if len(wr.Events) > 0 {
			requeued = true
			break
		}
	}
	if got := len(r.results); got != 0 || !requeued {
		t.Fatalf("requeued %v; %d queued Acquires returned while the holder holds, want 0: first: %v",
			requeued, got, <-r.results)
	}
	if err := first.Release(t.Context()); err != nil {
		t.Fatalf("holder's Release: %v", err)
	}
	r.check(t, n)
}

// An etcd restart while another process's requests queue in etcd behind a
// holder: they ride it out and get the lock once it is released.
func TestQueuedSurviveServerRestart(t *testing.T) {
	srv := servertest.Etcd(t)
	c := &cluster{addr: srv.Addr(), clients: map[*etcdlock.Locker]*clientv3.Client{}}
	c.admin = servertest.EtcdClient(t, c.addr)
	holder, waiter := c.locker(t, 5*time.Second), c.locker(t, 5*time.Second)
	key := testKey(t)
	first := acquire(t, holder, key)
	const n = 8
	r := queueBehind(t, waiter, key, first, n, false)
	c.waitKeys(t, holder.KeyPrefix(key), func(n int) bool { return n == 2 }) // the front queued in etcd
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(t.Context()); err != nil {
		t.Fatalf("holder's Release after the restart: %v (its lease should outlive a short restart)", err)
	}
	r.check(t, n)
}

// The fail-fast bound: with etcd unreachable, a request (the front, and one
// queued behind it) fails at its own deadline with ErrUnavailable wrapping
// the deadline, not at once; how long after the deadline is noted.
func TestNoEtcdFailsAtDeadline(t *testing.T) {
	c := newCluster(t)
	p := newProxy(t, c.addr)
	lk := c.proxiedLocker(t, p, 2*time.Second)
	key := testKey(t)
	acquire(t, lk, key).Release(t.Context()) // connected, with a session
	p.cut()

	type result struct {
		err     error
		elapsed time.Duration
	}
	try := func(wait time.Duration, out chan<- result) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		_, err := lk.Acquire(ctx, key)
		out <- result{err, time.Since(start)}
	}
	const frontWait, queuedWait = 1500 * time.Millisecond, 500 * time.Millisecond
	front, queued := make(chan result, 1), make(chan result, 1)
	go try(frontWait, front)
	etcdlock.WaitQueued(t, lk, key, 0) // a front exists
	go try(queuedWait, queued)
	etcdlock.WaitQueued(t, lk, key, 1)
	for _, c := range []struct {
		name string
		ch   chan result
		wait time.Duration
	}{{"queued", queued, queuedWait}, {"front", front, frontWait}} {
		r := <-c.ch
		if !errors.Is(r.err, lock.ErrUnavailable) || !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("%s: Acquire = %v, want ErrUnavailable wrapping DeadlineExceeded", c.name, r.err)
		}
		// Not before the deadline; how long after it the machine took
		// is only noted.
		if r.elapsed < c.wait {
			t.Errorf("%s: failed after %v, want at its deadline %v", c.name, r.elapsed, c.wait)
		}
		note := ""
		if r.elapsed > c.wait+2*time.Second {
			note = " (SLOW)"
		}
		t.Logf("%s: failed %v after its %v deadline%s", c.name, (r.elapsed - c.wait).Round(time.Millisecond), c.wait, note)
	}
}
