package cohort

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"seckill/internal/lock"
	"seckill/internal/testwait"
)

// fakeServer is an in-memory lock server shared by several cohort Lockers
// (the "processes"): per key one holder and a FIFO of waiting requests, and
// a base counter that grows with every grant.
type fakeServer struct {
	mu      sync.Mutex
	keys    map[string]*fakeKey
	base    uint64
	grants  int
	changed chan struct{} // closed and replaced on every state change
	holds   []*fakeHold
	nextErr error // the next Acquire fails with it

	// transfer makes every hold a Transferer (xferHold).
	transfer bool
	xferErr  error         // the next Transfer fails with it
	xferGate chan struct{} // if set, a Transfer waits for it
	xfers    int           // Transfers entered
}

type fakeKey struct {
	held  bool
	queue []chan uint64 // receives the grant's base
}

func newFakeServer() *fakeServer {
	return &fakeServer{keys: make(map[string]*fakeKey), changed: make(chan struct{})}
}

func (s *fakeServer) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Acquire waits in the key's FIFO until granted or ctx ends.
func (s *fakeServer) Acquire(ctx context.Context, key string) (Hold, error) {
	s.mu.Lock()
	if err := s.nextErr; err != nil {
		s.nextErr = nil
		s.mu.Unlock()
		return nil, err
	}
	k := s.keys[key]
	if k == nil {
		k = &fakeKey{}
		s.keys[key] = k
	}
	if !k.held {
		k.held = true
		h := s.grantLocked(key)
		s.mu.Unlock()
		return s.wrap(h), nil
	}
	ch := make(chan uint64, 1)
	k.queue = append(k.queue, ch)
	s.changedLocked()
	s.mu.Unlock()
	select {
	case <-ch:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.wrap(s.grantLocked(key)), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	for i, x := range k.queue {
		if x == ch {
			k.queue = append(k.queue[:i], k.queue[i+1:]...)
			s.changedLocked()
			s.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	s.mu.Unlock()
	<-ch // granted as we gave up: free it again
	s.release(key)
	return nil, ctx.Err()
}

func (s *fakeServer) grantLocked(key string) *fakeHold {
	s.base++
	s.grants++
	h := &fakeHold{s: s, key: key, base: s.base, Signal: lock.NewSignal()}
	h.passable.Store(true)
	s.holds = append(s.holds, h)
	s.changedLocked()
	return h
}

func (s *fakeServer) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[key]
	if len(k.queue) > 0 {
		ch := k.queue[0]
		k.queue = k.queue[1:]
		ch <- 0
	} else {
		k.held = false
	}
	s.changedLocked()
}

// queued reports how many requests wait for key.
func (s *fakeServer) queued(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.keys[key]; k != nil {
		return len(k.queue)
	}
	return 0
}

// waitFor waits until cond (called under s.mu) holds.
func (s *fakeServer) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	until := testwait.Until(t)
	for {
		s.mu.Lock()
		ok, ch := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-until.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (s *fakeServer) waitQueued(t *testing.T, key string, n int) {
	t.Helper()
	s.waitFor(t, fmt.Sprintf("%d requests queued at the server", n), func() bool {
		k := s.keys[key]
		return k != nil && len(k.queue) >= n
	})
}

// fakeHold is one grant of fakeServer.
type fakeHold struct {
	s            *fakeServer
	key          string
	base         uint64
	*lock.Signal // Done, Err, AfterFunc
	passable     atomic.Bool
	released     atomic.Int32
	relErr       error // what Release returns, if set before it is called

	transferred atomic.Int32 // by Transfer (an xferHold); then never released
}

func (h *fakeHold) Base() uint64   { return h.base }
func (h *fakeHold) Passable() bool { return h.passable.Load() }

// lose closes Done, as a failed renewal or expired session would.
func (h *fakeHold) lose() { h.Close(errors.New("fake: hold lost")) }

func (h *fakeHold) Release(context.Context) error {
	if n := h.released.Add(1); n != 1 || h.transferred.Load() != 0 {
		panic(fmt.Sprintf("hold %d released %d times", h.base, n))
	}
	h.s.release(h.key)
	return h.relErr
}

// holdsReleased reports how many holds were released, and fails the test
// if any was released more than once (Release panics then).
func (s *fakeServer) holdsReleased() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, h := range s.holds {
		n += int(h.released.Load())
	}
	return n
}

func (s *fakeServer) hold(i int) *fakeHold {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holds[i]
}

func newLocker(t *testing.T, s *fakeServer, handoffs int) *Locker {
	t.Helper()
	c := New(s, Config{Name: "fake", Handoffs: handoffs})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func acquire(t *testing.T, c *Locker, key string) lock.Lease {
	t.Helper()
	l, err := c.Acquire(testwait.Until(t), key)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return l
}

// queueUp starts an Acquire of key on c and returns once it waits behind
// the front (n waiters in all); the lease arrives on the channel.
func queueUp(t *testing.T, c *Locker, key string, n int) <-chan lock.Lease {
	t.Helper()
	ch := make(chan lock.Lease, 1)
	go func() {
		l, err := c.Acquire(t.Context(), key)
		if err != nil {
			t.Error(err)
		}
		ch <- l
	}()
	waitLocal(t, c, key, n)
	return ch
}

func waitLocal(t *testing.T, c *Locker, key string, n int) {
	t.Helper()
	if err := c.WaitQueued(testwait.Until(t), key, n); err != nil {
		t.Fatalf("%d local waiters for %q: %v (have %d)", n, key, err, c.Waiting(key))
	}
}

// recv waits for a lease from queueUp. Safe on any goroutine: it reports
// with t.Error and returns nil on failure.
func recv(t *testing.T, ch <-chan lock.Lease) lock.Lease {
	t.Helper()
	select {
	case l := <-ch:
		if l == nil {
			t.Error("waiter failed to acquire")
		}
		return l
	case <-testwait.Until(t).Done():
		t.Error("waiter never acquired")
		return nil
	}
}

// mustRecv is recv for the test's own goroutine: it stops the test on
// failure.
func mustRecv(t *testing.T, ch <-chan lock.Lease) lock.Lease {
	t.Helper()
	l := recv(t, ch)
	if l == nil {
		t.FailNow()
	}
	return l
}

// wrap returns h as the server hands it out.
func (s *fakeServer) wrap(h *fakeHold) Hold {
	if s.transfer {
		return xferHold{h}
	}
	return h
}

// xferHold is a fakeHold that is passed through the server: the key stays
// held, by a new grant with the next base.
type xferHold struct{ *fakeHold }

var _ Transferer = xferHold{}

func (h xferHold) Transfer(ctx context.Context) (Hold, error) {
	s := h.s
	s.mu.Lock()
	gate := s.xferGate
	s.xfers++
	s.changedLocked()
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.xferErr; err != nil {
		s.xferErr = nil
		return nil, err
	}
	if n := h.transferred.Add(1); n != 1 || h.released.Load() != 0 {
		panic(fmt.Sprintf("hold %d transferred %d times, released %d times", h.base, n, h.released.Load()))
	}
	return xferHold{s.grantLocked(h.key)}, nil
}
