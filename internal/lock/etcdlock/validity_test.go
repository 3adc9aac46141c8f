package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/etcdlock"
	"seckill/internal/testwait"
)

// A hold is not passed on in memory once its session's validity — timed
// from when the last keep-alive etcd confirmed was sent — has lapsed, even
// though the session's Done (timed from when replies arrived) has not
// closed yet: the next local holder goes through etcd instead.
func TestNoPassAfterValidityLapsed(t *testing.T) {
	const ttl = 3 * time.Second
	c := newCluster(t)
	p := newProxy(t, c.addr)
	lk := c.proxiedLocker(t, p, ttl)
	key := testKey(t)
	h0 := acquire(t, lk, key)
	if n := h0.Token() & 0xffff; n != 0 {
		t.Fatalf("first holder's hand-over count = %d, want 0", n)
	}

	type result struct {
		le  lock.Lease
		err error
	}
	got := make(chan result, 1)
	wctx, wcancel := context.WithCancel(t.Context())
	defer wcancel()
	go func() {
		le, err := lk.Acquire(wctx, key)
		got <- result{le, err}
	}()
	etcdlock.WaitQueued(t, lk, key, 1)

	// Cut the link just after a reply to the session's own keep-alive
	// arrived: Session.Done then closes no earlier than one TTL from now,
	// while the validity, timed from a ping sent before now, lapses first.
	c.mu.Lock()
	cli := c.clients[lk]
	c.mu.Unlock()
	kctx, kcancel := context.WithCancel(t.Context())
	kch, err := cli.KeepAlive(kctx, etcdlock.LeaseID(h0))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-kch:
	case <-testwait.Until(t).Done():
		t.Fatal("no keep-alive reply")
	}
	p.cut()
	kcancel()
	cut := time.Now()

	until := etcdlock.ValidUntil(h0)
	if left := until.Sub(cut); left <= 0 || left > ttl {
		t.Fatalf("validity left at the cut = %v, want in (0, %v]", left, ttl)
	}
	// A ping the session sent just before the cut may still be answered
	// (its reply already on the wire) and extend the validity after this
	// read; that extension is sound, so wait out the validity as it stands
	// once it stops moving. Nothing sent after the cut is answered, and a
	// ping gives up after TTL/3, so it moves at most a few times.
	for moved := 0; ; moved++ {
		time.Sleep(time.Until(until)) // the event is the deadline itself: a sleep, not a bound
		now := etcdlock.ValidUntil(h0)
		if !now.After(until) {
			break
		}
		if moved == 3 {
			t.Fatalf("validity still moving %v after the cut (now %v past it): a reply to a ping sent after the cut?", time.Since(cut), now.Sub(cut))
		}
		t.Logf("validity extended by %v after the cut (a ping in flight at the cut)", now.Sub(until))
		until = now
	}
	select {
	case <-h0.Done():
		t.Fatalf("session Done closed %v after the cut, before its validity (%v) could be tested", time.Since(cut), until.Sub(cut))
	default:
	}

	rctx, rcancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer rcancel()
	err = h0.Release(rctx)
	// Release has granted the waiter its turn, in memory or not; cancelled
	// now, it returns an error unless it was handed the hold.
	wcancel()
	r := <-got
	if r.err == nil {
		t.Fatalf("waiter got the lock (token %x, hand-over %d) %v past the validity, want no in-memory pass",
			r.le.Token(), r.le.Token()&0xffff, time.Since(until))
	}
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Release past the validity = %v, want ErrUnavailable (a delete sent to the unreachable etcd)", err)
	}
	t.Logf("validity lapsed %v after the cut; waiter: %v", until.Sub(cut).Round(time.Millisecond), r.err)
}
