package cohort

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/testwait"
)

// A hold lost while lent: its lease's Done closes with ErrLost, the lease
// cannot be released, the hold is never passed on (the next waiter gets a
// new hold from the server) and the lost hold is given back once.
func TestLossDuringPass(t *testing.T) {
	s := newFakeServer()
	c := newLocker(t, s, 0)
	l0 := acquire(t, c, "k")
	next := queueUp(t, c, "k", 1)
	if err := l0.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l1 := mustRecv(t, next) // passed in memory
	if got, want := l1.Token(), l0.Token()+1; got != want {
		t.Fatalf("passed token %#x, want %#x", got, want)
	}
	next = queueUp(t, c, "k", 1)
	s.hold(0).lose()
	select {
	case <-l1.Done():
	case <-testwait.Until(t).Done():
		t.Fatal("Done not closed after the hold was lost")
	}
	if err := l1.Err(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Err() = %v, want ErrLost", err)
	}
	if err := l1.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release of a lost lease = %v, want ErrNotHeld", err)
	}
	l2 := mustRecv(t, next)
	if l2.Token()>>16 <= l1.Token()>>16 || l2.Token()&0xffff != 0 {
		t.Fatalf("token after the loss %#x, want a new hold above %#x", l2.Token(), l1.Token())
	}
	if got := c.Passes(); got != 1 {
		t.Fatalf("Passes() = %d, want 1: a lost hold was passed on", got)
	}
	s.waitFor(t, "the lost hold to be given back", func() bool { return s.holds[0].released.Load() == 1 })
	if err := l2.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A hold that is lost, or no longer passable, at the moment of a release
// is not passed, even before the loss was noticed by the watch.
func TestNoPassOfInvalidHold(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(h *fakeHold)
	}{
		{"NotPassable", func(h *fakeHold) { h.passable.Store(false) }},
		{"DoneClosed", func(h *fakeHold) { h.lose() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeServer()
			c := newLocker(t, s, 0)
			l0 := acquire(t, c, "k")
			next := queueUp(t, c, "k", 1)
			tc.spoil(s.hold(0))
			err := l0.Release(t.Context())
			l1 := mustRecv(t, next)
			defer l1.Release(context.Background())
			if c.Passes() != 0 {
				t.Fatalf("Passes() = %d, want 0", c.Passes())
			}
			if l1.Token()>>16 <= l0.Token()>>16 {
				t.Fatalf("token %#x after %#x, want a new hold", l1.Token(), l0.Token())
			}
			if tc.name == "NotPassable" && err != nil {
				t.Fatalf("Release of a valid, non-passable hold = %v, want nil", err)
			}
		})
	}
}

// A waiter that gives up leaves the FIFO intact and nothing behind; so does
// a front that gives up while acquiring from the server.
func TestCancelWhileQueued(t *testing.T) {
	s := newFakeServer()
	other := newLocker(t, s, 0)
	c := newLocker(t, s, 0)
	blocker := acquire(t, other, "k") // c's front queues at the server

	frontCtx, cancelFront := context.WithCancel(t.Context())
	frontErr := make(chan error, 1)
	go func() {
		_, err := c.Acquire(frontCtx, "k")
		frontErr <- err
	}()
	s.waitQueued(t, "k", 1)
	first := queueUp(t, c, "k", 1)
	midCtx, cancelMid := context.WithCancel(t.Context())
	midErr := make(chan error, 1)
	go func() {
		_, err := c.Acquire(midCtx, "k")
		midErr <- err
	}()
	waitLocal(t, c, "k", 2)
	last := queueUp(t, c, "k", 3)

	cancelMid()
	if err := <-midErr; !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want ErrNotObtained wrapping Canceled", err)
	}
	if got := c.Waiting("k"); got != 2 {
		t.Fatalf("Waiting = %d after a waiter left, want 2", got)
	}
	cancelFront()
	if err := <-frontErr; !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("cancelled front: %v, want ErrNotObtained", err)
	}
	// first is the front now and queued at the server in its turn.
	s.waitQueued(t, "k", 1)
	if err := blocker.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l1 := mustRecv(t, first)
	if err := l1.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l2 := mustRecv(t, last)
	if err := l2.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	n := len(c.keys)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d keys left in the Locker when idle, want 0", n)
	}
	if q := s.queued("k"); q != 0 {
		t.Fatalf("%d requests left at the server, want 0", q)
	}
}

// Waiters that give up at random moments, some just as their turn comes,
// never strand the others nor leak a hold.
func TestCancelStress(t *testing.T) {
	s := newFakeServer()
	lockers := []*Locker{newLocker(t, s, 0), newLocker(t, s, 1)}
	var wg sync.WaitGroup
	for g := range 40 {
		wg.Go(func() {
			for range 30 {
				ctx, cancel := context.WithTimeout(t.Context(), time.Duration(rand.IntN(200))*time.Microsecond)
				l, err := lockers[g%2].Acquire(ctx, "k")
				cancel()
				if err != nil {
					if !errors.Is(err, lock.ErrNotObtained) {
						t.Error(err)
					}
					continue
				}
				if err := l.Release(t.Context()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for _, c := range lockers { // still usable: nothing was stranded
		_ = acquire(t, c, "k").Release(t.Context())
	}
	s.waitFor(t, "every hold given back", func() bool {
		for _, h := range s.holds {
			if h.released.Load() != 1 {
				return false
			}
		}
		return true
	})
}

// Close with waiters: they get ErrClosed, a front acquiring from the
// server returns, the holder's Done closes with ErrLost and ErrClosed, its
// hold is given back, and Close returns once all of it is over.
func TestCloseWithWaiters(t *testing.T) {
	s := newFakeServer()
	other := newLocker(t, s, 0)
	blocker := acquire(t, other, "b")
	defer blocker.Release(context.Background())
	before := runtime.NumGoroutine()
	c := New(s, Config{Name: "fake"})
	held := acquire(t, c, "a") // starts the hold's watch

	errs := make(chan error, 4)
	start := func(key string) {
		go func() {
			_, err := c.Acquire(t.Context(), key)
			errs <- err
		}()
	}
	start("b") // the front of b: queued at the server
	s.waitQueued(t, "b", 1)
	for i := range 3 {
		start("a")
		waitLocal(t, c, "a", i+1)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := <-errs; !errors.Is(err, lock.ErrClosed) {
			t.Fatalf("Acquire waiting at Close = %v, want ErrClosed", err)
		}
	}
	select {
	case <-held.Done():
	default:
		t.Fatal("holder's Done open after Close")
	}
	if err := held.Err(); !errors.Is(err, lock.ErrLost) || !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("holder's Err() = %v, want ErrLost and ErrClosed", err)
	}
	if h, _ := HoldOf(held); h.(*fakeHold).released.Load() != 1 {
		t.Fatalf("holder's hold released %d times by Close, want 1", h.(*fakeHold).released.Load())
	}
	if err := held.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release after Close = %v, want ErrNotHeld", err)
	}
	if _, err := c.Acquire(t.Context(), "a"); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	if q := s.queued("b"); q != 0 {
		t.Fatalf("%d requests left at the server after Close, want 0", q)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// The waiters' goroutines end as they return; there is no event to
	// wait on but the count itself.
	until := testwait.Until(t)
	for runtime.NumGoroutine() > before {
		if until.Err() != nil {
			t.Fatalf("%d goroutines after Close, want at most %d as before New", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
}

// A failed server release reports the server's error and closes Done with
// ErrLost; a second Release says ErrNotHeld.
func TestReleaseFailure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		relErr error
		want   error
	}{
		{"Unconfirmed", errors.New("timeout"), lock.ErrUnavailable},
		{"Gone", lock.ErrNotHeld, lock.ErrNotHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeServer()
			c := newLocker(t, s, 0)
			l := acquire(t, c, "k")
			s.hold(0).relErr = tc.relErr
			if err := l.Release(t.Context()); !errors.Is(err, tc.want) {
				t.Fatalf("Release = %v, want %v", err, tc.want)
			}
			if err := l.Err(); !errors.Is(err, lock.ErrLost) {
				t.Fatalf("Err() = %v, want ErrLost", err)
			}
			if err := l.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("second Release = %v, want ErrNotHeld", err)
			}
		})
	}
}

// A server failure is reported as ErrUnavailable, and the next waiter
// takes over as front.
func TestServerError(t *testing.T) {
	s := newFakeServer()
	s.nextErr = errors.New("connection refused")
	c := newLocker(t, s, 0)
	if _, err := c.Acquire(t.Context(), "k"); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Acquire = %v, want ErrUnavailable", err)
	}
	_ = acquire(t, c, "k").Release(t.Context())
}

// observingServer records the KeyObserver calls.
type observingServer struct {
	*fakeServer
	mu     sync.Mutex
	events []string
}

func (o *observingServer) Queued(key string) {
	o.mu.Lock()
	o.events = append(o.events, "queued "+key)
	o.mu.Unlock()
}
func (o *observingServer) Idle(key string) {
	o.mu.Lock()
	o.events = append(o.events, "idle "+key)
	o.mu.Unlock()
}

// A KeyObserver hears of every local waiter and of the key going idle,
// once, after the last holder left.
func TestKeyObserver(t *testing.T) {
	o := &observingServer{fakeServer: newFakeServer()}
	c := New(o, Config{})
	t.Cleanup(func() { _ = c.Close() })
	l0 := acquire(t, c, "k")
	next := queueUp(t, c, "k", 1)
	if err := l0.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := mustRecv(t, next).Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	got := strings.Join(o.events, ", ")
	o.mu.Unlock()
	if want := "queued k, idle k"; got != want {
		t.Fatalf("observer saw %q, want %q", got, want)
	}
}

// Close reports a release it could not confirm.
func TestCloseReportsReleaseFailure(t *testing.T) {
	s := newFakeServer()
	c := New(s, Config{})
	_ = acquire(t, c, "k")
	s.hold(0).relErr = errors.New("timeout")
	if err := c.Close(); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Close = %v, want an error wrapping ErrUnavailable", err)
	}
}
