package etcdlock_test

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"seckill/internal/lock/etcdlock"
)

// churn runs n goroutines on lk that acquire key with short random
// deadlines, some cancelled at a random moment, hold it briefly and release
// it under a bounded ctx, as a loaded service does, until stop closes.
func churn(lk *etcdlock.Locker, key string, n int, stop <-chan struct{}, wg *sync.WaitGroup) {
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+rand.IntN(1500))*time.Millisecond)
				if rand.IntN(3) == 0 {
					t := time.AfterFunc(time.Duration(rand.IntN(400))*time.Millisecond, cancel)
					defer t.Stop()
				}
				le, err := lk.Acquire(ctx, key)
				cancel()
				if err != nil {
					continue
				}
				time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
				rctx, rcancel := context.WithTimeout(context.Background(), time.Duration(50+rand.IntN(1000))*time.Millisecond)
				_ = le.Release(rctx)
				rcancel()
			}
		})
	}
}

// After one process's link to etcd goes silent for longer than its session
// TTL while requests come and go with short deadlines, every process must
// get the lock again soon after the link is back: no key of a live session
// may stay at the head of the queue without an owner.
func TestNoWedgeAfterBlackhole(t *testing.T) {
	const ttl = 2 * time.Second
	c := newCluster(t)
	for round := range rounds() {
		key := testKey(t) + "-" + string(rune('a'+round%26))
		p := newProxy(t, c.addr)
		a := c.proxiedLocker(t, p, ttl)
		b := c.locker(t, ttl)
		d := c.locker(t, ttl)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, lk := range []*etcdlock.Locker{a, b, d} {
			churn(lk, key, 8, stop, &wg)
		}
		time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Millisecond)
		p.blackhole()
		time.Sleep(2*ttl + time.Second)
		p.restore(t)
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Millisecond)
		close(stop)
		wg.Wait()
		for i, lk := range []*etcdlock.Locker{a, b, d} {
			ctx, cancel := context.WithTimeout(t.Context(), 4*ttl)
			le, err := lk.Acquire(ctx, key)
			cancel()
			if err != nil {
				ks, _ := c.keys(t, a.KeyPrefix(key))
				f, _ := os.Create("/tmp/wedge-goroutines.txt")
				_ = pprof.Lookup("goroutine").WriteTo(f, 2)
				_ = f.Close()
				t.Fatalf("round %d: locker %d: Acquire after the link was back: %v; keys %v", round, i, err, ks)
			}
			if err := le.Release(t.Context()); err != nil {
				t.Errorf("round %d: release: %v", round, err)
			}
		}
		c.waitKeys(t, a.KeyPrefix(key), func(n int) bool { return n == 0 })
		t.Logf("round %d ok", round)
	}
}

func rounds() int {
	if testing.Short() {
		return 1
	}
	return 2
}

// Acquisitions whose ctx ends while their enqueue is on the wire leave no
// key behind, even when etcd applies the enqueue after the cleanup's delete
// (the requests reach etcd in one batch and its handlers race).
func TestNoKeyLeftAfterInDoubtEnqueues(t *testing.T) {
	const ttl = 2 * time.Second
	c := newCluster(t)
	key := testKey(t)
	p := newProxy(t, c.addr)
	a := c.proxiedLocker(t, p, ttl)
	warm := acquire(t, a, key+"-warm") // the session exists before the lag
	if err := warm.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.lag.Store(int64(20 * time.Millisecond))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 150 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+rand.IntN(40))*time.Millisecond)
				if le, err := a.Acquire(ctx, key); err == nil {
					_ = le.Release(context.Background())
				}
				cancel()
			}
		})
	}
	wg.Wait()
	p.lag.Store(0)
	// The sweeper deletes an in-doubt key again for max(2*TTL, 10s) after
	// giving up on it; a late put lands well inside that. There is no event
	// for "no late put can land any more": wait the window out.
	time.Sleep(max(2*ttl, 10*time.Second) + time.Second)
	if ks, _ := c.keys(t, a.KeyPrefix(key)); len(ks) != 0 {
		t.Fatalf("keys left under %s with no acquisition: %v", a.KeyPrefix(key), ks)
	}
}
