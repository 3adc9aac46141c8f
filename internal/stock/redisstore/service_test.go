package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/locallock"
	"seckill/internal/lock/nolock"
	"seckill/internal/lock/redislock"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// fakeLease is a lease the test controls. onDone, if set, runs on the first
// call to Done — which the Service makes right after its read, when it
// enters the work delay — so a test can act between read and write without
// sleeping.
type fakeLease struct {
	token    uint64
	sig      *lock.Signal
	onDone   func()
	once     sync.Once
	released atomic.Bool
	relErr   chan error // receives the release context's state
}

func newFakeLease(token uint64) *fakeLease {
	return &fakeLease{token: token, sig: lock.NewSignal(), relErr: make(chan error, 1)}
}

func (l *fakeLease) Key() string   { return "k" }
func (l *fakeLease) Token() uint64 { return l.token }
func (l *fakeLease) Err() error    { return l.sig.Err() }
func (l *fakeLease) Done() <-chan struct{} {
	if l.onDone != nil {
		l.once.Do(l.onDone)
	}
	return l.sig.Done()
}
func (l *fakeLease) Release(ctx context.Context) error {
	l.relErr <- ctx.Err()
	if !l.released.CompareAndSwap(false, true) {
		return lock.ErrNotHeld
	}
	l.sig.Close(lock.ErrReleased)
	return nil
}

// fakeLocker hands out leases from a function.
type fakeLocker func(ctx context.Context) (lock.Lease, error)

func (f fakeLocker) Acquire(ctx context.Context, _ string) (lock.Lease, error) { return f(ctx) }

func one(l lock.Lease) fakeLocker {
	return func(context.Context) (lock.Lease, error) { return l, nil }
}

// newService is a service of s under lk, changed by mut. Its lock wait is
// a minute, not the service's 5 s: these tests send every
// buyer at once and expect each served, and on a loaded machine the last
// of 200 waiters under -race waited past 5 s and was answered busy. A test
// about the wait's bound sets its own.
func newService(s *redisstore.Store, lk lock.Locker, mut func(*stock.ServiceConfig)) *stock.Service {
	cfg := stock.ServiceConfig{Store: s, Locker: lk, Backend: "test", LockKey: "seckill:lock", WaitTimeout: time.Minute}
	if mut != nil {
		mut(&cfg)
	}
	return stock.NewService(cfg)
}

// sellAll runs buyers concurrent Reduce calls and counts the outcomes.
func sellAll(t *testing.T, svc *stock.Service, buyers int) (sold, soldOut int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range buyers {
		wg.Go(func() {
			_, err := svc.Reduce(t.Context())
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				sold++
			case errors.Is(err, stock.ErrSoldOut):
				soldOut++
			default:
				t.Errorf("reduce: %v", err)
			}
		})
	}
	wg.Wait()
	return sold, soldOut
}

// The articles' starting point: without a lock, concurrent buyers read the
// same stock during the business delay and all "sell" the same unit.
func TestServiceWithoutLockOversells(t *testing.T) {
	s, _ := newStore(t, 10)
	svc := newService(s, nolock.New(), func(c *stock.ServiceConfig) {
		c.Delay = stock.Delay{Min: 20 * time.Millisecond, Max: 20 * time.Millisecond}
	})
	sold, _ := sellAll(t, svc, 30)
	st, err := s.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Consistent would be stock + lucky == 10 and sold == lucky.
	if st.Stock+st.Lucky <= 10 || sold <= 10-int(st.Stock) {
		t.Fatalf("got stock %d lucky %d sold %d, want an oversell (stock+lucky > 10)", st.Stock, st.Lucky, sold)
	}
}

// One process with the in-process lock sells exactly the stock.
func TestServiceLocalLockIsExactInProcess(t *testing.T) {
	s, _ := newStore(t, 20)
	svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) {
		c.Delay = stock.Delay{Max: time.Millisecond}
	})
	sold, soldOut := sellAll(t, svc, 50)
	if sold != 20 || soldOut != 30 {
		t.Fatalf("got sold %d sold_out %d, want 20 30", sold, soldOut)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 0, Lucky: 20})
}

// Two "replicas" (two Services, two lockers, two clients) on the Redis lock
// with fencing sell exactly the stock.
func TestServiceRedisLockFencedAcrossReplicas(t *testing.T) {
	s, rdb := newStore(t, 15)
	var svcs []*stock.Service
	for range 2 {
		lk := redislock.New(rdb, redislock.Options{TTL: 5 * time.Second})
		t.Cleanup(func() { _ = lk.Close() })
		svcs = append(svcs, newService(s, lk, func(c *stock.ServiceConfig) {
			c.Backend, c.Fencing = "redis", true
			c.WaitTimeout = 30 * time.Second
		}))
	}
	var sold, soldOut atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			_, err := svcs[i%2].Reduce(t.Context())
			switch {
			case err == nil:
				sold.Add(1)
			case errors.Is(err, stock.ErrSoldOut):
				soldOut.Add(1)
			default:
				t.Errorf("reduce: %v", err)
			}
		})
	}
	wg.Wait()
	if sold.Load() != 15 || soldOut.Load() != 25 {
		t.Fatalf("got sold %d sold_out %d, want 15 25", sold.Load(), soldOut.Load())
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 0, Lucky: 15})
}

// A holder that lost its lock without noticing (a pause) writes after a
// newer holder has read: the fence refuses the write.
func TestServiceFencedWhenNewerHolderRead(t *testing.T) {
	s, _ := newStore(t, 5)
	old := newFakeLease(1)
	old.onDone = func() {
		// The old holder has read and is "working"; a newer holder reads.
		if _, err := s.Read(t.Context(), stock.Fence{Lock: "test/seckill:lock", Token: 2, Lease: "newer"}); err != nil {
			t.Errorf("newer holder's read: %v", err)
		}
	}
	svc := newService(s, one(old), func(c *stock.ServiceConfig) {
		c.Fencing = true
		c.Delay = stock.Delay{Min: time.Millisecond, Max: time.Millisecond}
	})
	_, err := svc.Reduce(t.Context())
	if !errors.Is(err, stock.ErrFenced) {
		t.Fatalf("got %v, want ErrFenced", err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 5})
	if !old.released.Load() {
		t.Fatal("lease not released after a fenced write")
	}
}

// A lease lost during the work delay aborts the sale before the write.
func TestServiceLockLostAbortsWrite(t *testing.T) {
	s, _ := newStore(t, 5)
	l := newFakeLease(1)
	l.onDone = func() { l.sig.Close(fmt.Errorf("%w: test stole it", lock.ErrLost)) }
	svc := newService(s, one(l), func(c *stock.ServiceConfig) {
		c.Fencing = true
		c.Delay = stock.Delay{Min: time.Hour, Max: time.Hour} // only loss can end it
	})
	_, err := svc.Reduce(t.Context())
	if !errors.Is(err, stock.ErrLockLost) || !errors.Is(err, lock.ErrLost) {
		t.Fatalf("got %v, want ErrLockLost wrapping lock.ErrLost", err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 5})
}

// A client that hangs up mid-sale must not skip the release: it runs with a
// live context of its own.
func TestServiceReleasesAfterClientCancel(t *testing.T) {
	s, _ := newStore(t, 5)
	ctx, cancel := context.WithCancel(t.Context())
	l := newFakeLease(1)
	l.onDone = cancel
	svc := newService(s, one(l), func(c *stock.ServiceConfig) {
		c.Delay = stock.Delay{Min: time.Hour, Max: time.Hour}
	})
	if _, err := svc.Reduce(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if err := <-l.relErr; err != nil {
		t.Fatalf("release ran with a done context: %v", err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 5})
}

func TestServiceAcquireFailures(t *testing.T) {
	s, _ := newStore(t, 5)
	cases := []struct {
		name string
		lk   fakeLocker
		want []error
	}{
		{"wait timeout is busy", func(ctx context.Context) (lock.Lease, error) {
			<-ctx.Done()
			return nil, fmt.Errorf("%w: %w", lock.ErrNotObtained, ctx.Err())
		}, []error{stock.ErrBusy, lock.ErrNotObtained}},
		{"server down is unavailable", func(context.Context) (lock.Lease, error) {
			return nil, fmt.Errorf("%w: connection refused", lock.ErrUnavailable)
		}, []error{lock.ErrUnavailable}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var waited time.Duration
			svc := newService(s, tc.lk, func(c *stock.ServiceConfig) {
				c.WaitTimeout = 20 * time.Millisecond
				c.OnLockWait = func(d time.Duration) { waited = d }
			})
			_, err := svc.Reduce(t.Context())
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("got %v, want it to wrap %v", err, w)
				}
			}
			if tc.name == "wait timeout is busy" && waited < 20*time.Millisecond {
				t.Errorf("observed lock wait %v, want >= the 20ms wait timeout", waited)
			}
			storetest.WantStatus(t, s, stock.Status{Stock: 5})
		})
	}
}

// Sold out found under the lock (the last unit went between the read
// without the lock and the lock): nothing written, the lease released.
func TestServiceSoldOutWritesNothing(t *testing.T) {
	s, rdb := newStore(t, 1)
	l := newFakeLease(1)
	svc := newService(s, fakeLocker(func(ctx context.Context) (lock.Lease, error) {
		// Another replica sells the last unit while this one waits.
		if err := rdb.Set(ctx, "stock", 0, 0).Err(); err != nil {
			return nil, err
		}
		return l, nil
	}), func(c *stock.ServiceConfig) { c.Fencing = true })
	if _, err := svc.Reduce(t.Context()); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("got %v, want ErrSoldOut", err)
	}
	storetest.WantStatus(t, s, stock.Status{})
	if !l.released.Load() {
		t.Fatal("lease not released after sold out")
	}
}

func TestServiceAtomicModeTakesNoLock(t *testing.T) {
	s, _ := newStore(t, 2)
	svc := newService(s, nil, func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic })
	for i, want := range []int64{1, 0} {
		sale, err := svc.Reduce(t.Context())
		if err != nil || sale.StockAfter != want || sale.Token != 0 {
			t.Fatalf("sale %d: got %+v, %v; want stock %d token 0", i, sale, err, want)
		}
	}
	if _, err := svc.Reduce(t.Context()); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("third sale: got %v, want ErrSoldOut", err)
	}
}
