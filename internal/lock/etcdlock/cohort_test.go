package etcdlock_test

import (
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/etcdlock"
	"seckill/internal/lock/locktest"
	"seckill/internal/testwait"
)

// holding is one acquisition as seen from inside the critical section.
type holding struct {
	who   string
	token uint64
}

// holdLog records acquisitions in the order they held the lock: entries are
// appended while holding it, so the order is the lock's.
type holdLog struct {
	mu sync.Mutex
	hs []holding
}

func (h *holdLog) add(who string, l lock.Lease) {
	h.mu.Lock()
	h.hs = append(h.hs, holding{who, l.Token()})
	h.mu.Unlock()
}

// once acquires on lk, records, releases.
func (h *holdLog) once(t *testing.T, who string, lk *etcdlock.Locker, key string) {
	l := acquire(t, lk, key)
	h.add(who, l)
	if err := l.Release(t.Context()); err != nil {
		t.Errorf("%s: Release: %v", who, err)
	}
}

// checkTokens fails unless tokens grow strictly in holding order.
func checkTokens(t *testing.T, hs []holding) {
	t.Helper()
	for i := 1; i < len(hs); i++ {
		if hs[i].token <= hs[i-1].token {
			t.Fatalf("holder %d (%s) token %d after %d (%s), want strictly greater; order %v",
				i, hs[i].who, hs[i].token, hs[i-1].token, hs[i-1].who, hs)
		}
	}
}

// The cohort contract: the bound, FIFO order and the token layout, with
// the other process's key queued in etcd, and no key left once idle.
func TestCohort(t *testing.T) {
	c := newCluster(t)
	pfx := func(key string) string { return etcdlock.DefaultPrefix + url.PathEscape(key) + "/" }
	locktest.RunCohort(t, locktest.Cohort{
		New: func(t *testing.T, k int) lock.Locker {
			return c.lockerWith(t, 2*time.Second, etcdlock.Options{LocalHandoffs: k})
		},
		ServerQueued: func(t *testing.T, key string, n int) {
			c.waitKeys(t, pfx(key), func(got int) bool { return got == n+1 }) // the holder's key and n
		},
		Settled: func(t *testing.T, key string) {
			c.waitKeys(t, pfx(key), func(got int) bool { return got == 0 })
		},
	})
}

// Processes are served in the order they queued in etcd, a batch of at
// most LocalHandoffs+1 local holders at a time; within a process, FIFO.
func TestCohortFIFOAcrossLockers(t *testing.T) {
	c := newCluster(t)
	const k, perProc = 2, 5
	holder := c.locker(t, 2*time.Second)
	procs := []*etcdlock.Locker{
		c.lockerWith(t, 2*time.Second, etcdlock.Options{LocalHandoffs: k}),
		c.lockerWith(t, 2*time.Second, etcdlock.Options{LocalHandoffs: k}),
	}
	names := []string{"p1", "p2"}
	key := testKey(t)
	pfx := holder.KeyPrefix(key)
	var log holdLog
	h0 := acquire(t, holder, key)

	var wg sync.WaitGroup
	for i, lk := range procs {
		wg.Go(func() { log.once(t, names[i], lk, key) })
		c.waitKeys(t, pfx, func(n int) bool { return n == i+2 }) // its head queued in etcd
		for range perProc - 1 {
			wg.Go(func() { log.once(t, names[i], lk, key) })
		}
		etcdlock.WaitQueued(t, lk, key, perProc-1)
	}
	if err := h0.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	checkTokens(t, log.hs)

	// Batches: runs of holders sharing one etcd key.
	type batch struct {
		who string
		n   int
	}
	var got []batch
	for i, h := range log.hs {
		if i == 0 || h.token>>16 != log.hs[i-1].token>>16 {
			got = append(got, batch{h.who, 0})
		}
		if got[len(got)-1].who != h.who {
			t.Fatalf("one etcd key held by %s and %s: %v", got[len(got)-1].who, h.who, log.hs)
		}
		got[len(got)-1].n++
	}
	// The first two batches are the order the test arranged in etcd. The
	// rest queue again when their batch ends, p1's racing p2's local
	// passes: on a loaded machine p2's whole batch can run before p1's new
	// key is in etcd, so their order is not the test's to fix. Each is
	// still a batch of at most k+1 of one process, and every holder served.
	want := []batch{{"p1", k + 1}, {"p2", k + 1}}
	if len(got) < len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("batches %v, want %v first", got, want)
	}
	served := map[string]int{}
	for _, b := range got {
		if b.n > k+1 {
			t.Fatalf("batches %v: %v holds one etcd key past the bound of %d", got, b, k+1)
		}
		served[b.who] += b.n
	}
	if served["p1"] != perProc || served["p2"] != perProc || len(got) != 4 {
		t.Fatalf("batches %v: want every holder served (%d each) in 4 batches", got, perProc)
	}
}

// A waiter whose key is deleted while it is queued (by hand here; a lease
// expiry does the same) must not take the lock when the holder releases,
// although it learns of the release from the prefix watch without reading
// etcd again. The second waiter is the one that matters: it enqueues with
// its Locker's watch already running, so only that watch can tell it.
func TestQueuedKeyDeletedByHand(t *testing.T) {
	c := newCluster(t)
	holder, waiter := c.locker(t, 2*time.Second), c.locker(t, 2*time.Second)
	key := testKey(t)
	pfx := holder.KeyPrefix(key)
	h := acquire(t, holder, key)
	res := make(chan error, 2)
	try := func() {
		l, err := waiter.Acquire(t.Context(), key)
		if err == nil {
			_ = l.Release(t.Context())
		}
		res <- err
	}
	deleteWaiterKey := func() {
		t.Helper()
		for _, k := range c.waitKeys(t, pfx, func(n int) bool { return n == 2 }) {
			if k != etcdlock.EtcdKey(h) {
				if _, err := c.admin.Delete(t.Context(), k); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	checkFailed := func(which string) {
		t.Helper()
		select {
		case err := <-res:
			if !errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("%s waiter: Acquire after its key was deleted = %v, want ErrNotObtained", which, err)
			}
		case <-testwait.Until(t).Done():
			t.Fatalf("%s waiter, whose key was deleted, neither failed nor returned", which)
		}
	}

	go try()
	c.waitKeys(t, pfx, func(n int) bool { return n == 2 }) // first waiter queued in etcd
	go try()
	etcdlock.WaitQueued(t, waiter, key, 1) // second queued behind it locally
	deleteWaiterKey()
	checkFailed("first")
	deleteWaiterKey() // the second waiter's, put once the first gave up
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkFailed("second")
	if ks, _ := c.keys(t, pfx); len(ks) != 0 {
		t.Fatalf("keys left: %v, want none", ks)
	}
}
