package zklock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
	"seckill/internal/zksess/zksesstest"
)

// queuedRun is a batch of Acquires queued on one key behind a holder whose
// session is about to go; it checks what the issue asks of them: each gets
// the lock, one at a time, with tokens strictly above the lost lease's and
// strictly increasing, and only once the lost lease's Done is closed.
type queuedRun struct {
	first   lock.Lease
	results chan error

	mu     sync.Mutex
	tokens []uint64
	inside atomic.Int32
}

func queueBehind(t *testing.T, lk *Locker, key string, first lock.Lease, n int) *queuedRun {
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
			select {
			case <-first.Done():
			default:
				r.results <- errors.New("granted while the lease of the lost session still had Done open")
				_ = l.Release(context.Background())
				return
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
	waitQueued(t, lk, key, n)
	return r
}

// check waits for every Acquire and verifies the outcome.
func (r *queuedRun) check(t *testing.T, n int) {
	t.Helper()
	for range n {
		if err := <-r.results; err != nil {
			t.Errorf("queued Acquire: %v, want the lock once the new session is up", err)
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

// Requests queued in a process whose session expires wait
// for the next session and take their turn, within their deadline, instead
// of failing at once with "zookeeper unavailable".
func TestQueuedSurviveSessionExpiry(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	holder := newProxied(t, srv.Addr(), time.Second)
	key := locktest.Key(t)
	first, err := holder.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	_, _, gone, err := admin.Conn().ExistsW(pathOf(first))
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	r := queueBehind(t, holder.Locker, key, first, n)

	holder.proxy.Cut()
	select {
	case <-gone: // the server expired the session: its node went with it
	case <-testwait.Until(t).Done():
		t.Fatal("node of an expired session not deleted")
	}
	select {
	case <-first.Done():
	default:
		t.Fatal("the lost lease's Done still open after its session expired")
	}
	if got := len(r.results); got != 0 {
		t.Fatalf("%d queued Acquires returned while no session could be had, want 0 (waiting): first: %v",
			got, <-r.results)
	}
	holder.proxy.Restore(t)
	r.check(t, n)
	if err := first.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release of the lost lease = %v, want ErrNotHeld", err)
	}
}

// A server restart: every queued request rides it out, none fails fast.
func TestQueuedSurviveServerRestart(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	lk := newProxied(t, srv.Addr(), 5*time.Second) // a session that outlives the restart
	key := locktest.Key(t)
	first, err := lk.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	r := queueBehind(t, lk.Locker, key, first, n)
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-first.Done() // the disconnect suspended the session: the hold is lost
	r.check(t, n)
}

// The fail-fast bound: with no session to be had, a request (the front, and
// one queued behind it) fails at its own deadline with ErrUnavailable
// wrapping the deadline, not at once; how long after the deadline is noted.
func TestNoSessionFailsAtDeadline(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	lk := newProxied(t, srv.Addr(), time.Second)
	key := locktest.Key(t)
	events, stop := lk.sess.Subscribe()
	lk.proxy.Cut()
	for ev := range events {
		if ev.State != zk.StateHasSession && lk.sess.State() != zk.StateHasSession {
			break
		}
	}
	stop()

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
	const frontWait, queuedWait = 1200 * time.Millisecond, 400 * time.Millisecond
	front, queued := make(chan result, 1), make(chan result, 1)
	go try(frontWait, front)
	waitFront(t, lk.Locker, key)
	go try(queuedWait, queued)
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

// waitFront returns once a goroutine is the front for key (acquiring from
// the server), so that the next one queues behind it.
func waitFront(t *testing.T, lk *Locker, key string) {
	t.Helper()
	if err := lk.WaitQueued(testwait.Until(t), key, 0); err != nil {
		t.Fatalf("no front for %q: %v", key, err)
	}
}
