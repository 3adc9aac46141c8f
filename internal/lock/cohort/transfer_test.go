package cohort

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
	"seckill/internal/testwait"
)

// newTransferServer returns a fake whose holds are Transferers.
func newTransferServer() *fakeServer {
	s := newFakeServer()
	s.transfer = true
	return s
}

// The cohort contract over holds passed through the server: the bound,
// FIFO order, and tokens minted per lease (one more per pass).
func TestCohortTransfer(t *testing.T) {
	s := newTransferServer()
	locktest.RunCohort(t, locktest.Cohort{
		New:          func(t *testing.T, k int) lock.Locker { return New(s, Config{Name: "fake", Handoffs: k}) },
		ServerQueued: s.waitQueued,
		Minted:       true,
		Settled: func(t *testing.T, key string) {
			s.waitFor(t, "the key free at the server", func() bool {
				k := s.keys[key]
				return k != nil && !k.held && len(k.queue) == 0
			})
		},
	})
}

// A pass through the server gives the next waiter a hold of its own, with
// the token the server minted, unshifted; the old hold is transferred and
// never released, and the bound still counts passes across the new holds.
func TestTransferPass(t *testing.T) {
	s := newTransferServer()
	s.base = MaxBase // a minted token need not fit 48 bits
	c := newLocker(t, s, 2)
	l0 := acquire(t, c, "k")
	if got, want := l0.Token(), uint64(MaxBase+1); got != want {
		t.Fatalf("token %#x, want the hold's base %#x", got, want)
	}
	l1ch := queueUp(t, c, "k", 1)
	l2ch := queueUp(t, c, "k", 2)
	l3ch := queueUp(t, c, "k", 3)
	prev := l0
	for i, ch := range []<-chan lock.Lease{l1ch, l2ch, l3ch} {
		if err := prev.Release(t.Context()); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
		l := mustRecv(t, ch)
		if got, want := l.Token(), prev.Token()+1; got != want {
			t.Fatalf("lease %d: token %#x, want %#x", i+1, got, want)
		}
		if h, _ := HoldOf(l); h.(xferHold).fakeHold == s.hold(i) {
			t.Fatalf("lease %d shares its predecessor's hold", i+1)
		}
		prev = l
	}
	if got := c.Passes(); got != 2 {
		t.Fatalf("Passes() = %d, want 2 (the bound); the third lease comes from the server", got)
	}
	if got := s.hold(0).transferred.Load() + s.hold(1).transferred.Load(); got != 2 {
		t.Fatalf("%d holds transferred, want 2", got)
	}
	if got := s.hold(2).released.Load(); got != 1 {
		t.Fatalf("the hold at the bound released %d times, want 1", got)
	}
	if err := prev.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := s.holdsReleased(); n != 2 {
		t.Fatalf("%d holds released, want 2 (the others were transferred)", n)
	}
}

// A failed transfer ends the releasing lease as lost with the server's
// error, gives its hold back, and the waiter acquires from the server.
func TestTransferFailure(t *testing.T) {
	s := newTransferServer()
	c := newLocker(t, s, 0)
	l0 := acquire(t, c, "k")
	next := queueUp(t, c, "k", 1)
	s.mu.Lock()
	s.xferErr = errors.New("fake: transfer reply lost")
	s.mu.Unlock()
	err := l0.Release(t.Context())
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Release with a failed transfer = %v, want ErrUnavailable", err)
	}
	if !errors.Is(l0.Err(), lock.ErrLost) {
		t.Fatalf("Err() = %v, want ErrLost", l0.Err())
	}
	l1 := mustRecv(t, next)
	defer l1.Release(context.Background())
	if c.Passes() != 0 {
		t.Fatalf("Passes() = %d, want 0", c.Passes())
	}
	if l1.Token() <= l0.Token() {
		t.Fatalf("token %#x after %#x, want greater", l1.Token(), l0.Token())
	}
	s.waitFor(t, "the hold given back", func() bool { return s.holds[0].released.Load() == 1 })
}

// A hold lost while its transfer is in flight is not passed: the lease
// ends lost, the new hold the server made is given back, and the waiter
// acquires from the server. The old hold, transferred, is never released.
func TestLossDuringTransfer(t *testing.T) {
	s := newTransferServer()
	gate := make(chan struct{})
	c := newLocker(t, s, 0)
	l0 := acquire(t, c, "k")
	next := queueUp(t, c, "k", 1)
	s.mu.Lock()
	s.xferGate = gate
	s.mu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- l0.Release(t.Context()) }()
	s.waitFor(t, "the transfer in flight", func() bool { return s.xfers == 1 })
	s.hold(0).lose()
	select {
	case <-l0.Done():
	case <-testwait.Until(t).Done():
		t.Fatal("Done not closed on a loss during the transfer")
	}
	s.mu.Lock()
	s.xferGate = nil
	s.mu.Unlock()
	close(gate)
	if err := <-errc; !errors.Is(err, lock.ErrNotHeld) || !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release = %v, want ErrNotHeld wrapping the loss", err)
	}
	l1 := mustRecv(t, next)
	if c.Passes() != 0 {
		t.Fatalf("Passes() = %d, want 0: a lost hold was passed", c.Passes())
	}
	if got := s.hold(1).released.Load(); got != 1 {
		t.Fatalf("the hold the transfer made released %d times, want 1", got)
	}
	if h, _ := HoldOf(l1); h.(xferHold).fakeHold != s.hold(2) {
		t.Fatal("the waiter did not get a new hold from the server")
	}
	if err := l1.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Close waits for a transfer in flight; the waiter it was for ends with
// ErrClosed and the hold the transfer made is given back.
func TestCloseDuringTransfer(t *testing.T) {
	s := newTransferServer()
	gate := make(chan struct{})
	c := New(s, Config{Name: "fake"})
	l0 := acquire(t, c, "k")
	next := make(chan error, 1)
	go func() {
		_, err := c.Acquire(t.Context(), "k")
		next <- err
	}()
	waitLocal(t, c, "k", 1)
	s.mu.Lock()
	s.xferGate = gate
	s.mu.Unlock()
	go func() { _ = l0.Release(t.Context()) }()
	s.waitFor(t, "the transfer in flight", func() bool { return s.xfers == 1 })
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-l0.Done():
	case <-testwait.Until(t).Done():
		t.Fatal("the releasing lease did not end on Close")
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a transfer in flight", err)
	case <-testwait.MustNotWithin(50 * time.Millisecond):
	}
	close(gate)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-next; !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("waiter = %v, want ErrClosed", err)
	}
	if got := s.hold(1).released.Load(); got != 1 {
		t.Fatalf("the hold the transfer made released %d times, want 1", got)
	}
}
