package cohort

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
)

func TestConformance(t *testing.T) {
	s := newFakeServer() // shared: each Locker is one "process"
	locktest.Run(t, locktest.Env{
		New:       func(*testing.T, lock.Options) lock.Locker { return New(s, Config{Name: "fake"}) },
		Exclusive: true,
		Processes: true,
		Expiry:    true,
		TTL:       100 * time.Millisecond,
		// A crashed process's holds expire: the fake loses every hold
		// not yet released (the crashed one's is the only one).
		Crash: func(*testing.T, lock.Locker) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, h := range s.holds {
				if h.released.Load() == 0 {
					h.lose()
				}
			}
		},
		Steal: func(t *testing.T, l lock.Lease) {
			h, ok := HoldOf(l)
			if !ok {
				t.Fatalf("HoldOf(%T) not ok", l)
			}
			h.(*fakeHold).lose()
		},
	})
}

func TestHandoffsResolved(t *testing.T) {
	for _, tc := range []struct{ in, want int }{
		{0, DefaultHandoffs}, {-1, 0}, {-100, 0}, {1, 1}, {MaxHandoffs, MaxHandoffs}, {MaxHandoffs + 1, MaxHandoffs}, {1 << 30, MaxHandoffs},
	} {
		if got := New(newFakeServer(), Config{Handoffs: tc.in}).Handoffs(); got != tc.want {
			t.Errorf("Handoffs %d resolves to %d, want %d", tc.in, got, tc.want)
		}
	}
}

// The cohort contract every cohort backend runs, here over the fake.
func TestCohort(t *testing.T) {
	s := newFakeServer()
	locktest.RunCohort(t, locktest.Cohort{
		New:          func(t *testing.T, k int) lock.Locker { return New(s, Config{Name: "fake", Handoffs: k}) },
		ServerQueued: s.waitQueued,
		Settled: func(t *testing.T, key string) {
			s.waitFor(t, "the key free at the server", func() bool {
				k := s.keys[key]
				return k != nil && !k.held && len(k.queue) == 0
			})
		},
	})
}

// Local waiters acquire in arrival order, with and without passing.
func TestFIFO(t *testing.T) {
	for _, handoffs := range []int{-1, 0} {
		t.Run(fmt.Sprintf("handoffs=%d", handoffs), func(t *testing.T) {
			s := newFakeServer()
			c := newLocker(t, s, handoffs)
			holder := acquire(t, c, "k")
			const n = 20
			order := make(chan int, n)
			var wg sync.WaitGroup
			for i := range n {
				ch := queueUp(t, c, "k", i+1)
				wg.Go(func() {
					l := recv(t, ch)
					if l == nil {
						return
					}
					order <- i
					_ = l.Release(t.Context())
				})
			}
			if err := holder.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			close(order)
			want := 0
			for got := range order {
				if got != want {
					t.Fatalf("waiter %d acquired, want %d", got, want)
				}
				want++
			}
		})
	}
}

// Under contention from several "processes", critical sections never
// overlap and tokens grow strictly in lock order, across passes and holds.
// Each locker first meets a contention the test arranges (a local waiter
// queued behind a holder), so that passes are certain, not left to how the
// goroutines below happen to be scheduled.
func TestTokensStrictlyIncrease(t *testing.T) {
	s := newFakeServer()
	handoffs := []int{2, 0, -1} // a bound, the default, passing off
	var lockers []*Locker
	for _, h := range handoffs {
		lockers = append(lockers, newLocker(t, s, h))
	}
	var (
		mu     sync.Mutex
		tokens []uint64
		inside atomic.Int32
		wg     sync.WaitGroup
	)
	for i, c := range lockers {
		held := acquire(t, c, "k")
		next := queueUp(t, c, "k", 1)
		if err := held.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		passed := mustRecv(t, next)
		tokens = append(tokens, held.Token(), passed.Token())
		if err := passed.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		want := uint64(1)
		if handoffs[i] < 0 {
			want = 0
		}
		if got := c.Passes(); got != want {
			t.Fatalf("handoffs %d: %d passes after one queued waiter, want %d", handoffs[i], got, want)
		}
	}
	for g := range 30 {
		wg.Go(func() {
			for range 20 {
				l, err := lockers[g%len(lockers)].Acquire(t.Context(), "k")
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					t.Error("critical sections overlap")
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				inside.Add(-1)
				if err := l.Release(t.Context()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d is %#x after %#x, want strictly greater", i, tokens[i], tokens[i-1])
		}
	}
	var passes uint64
	for _, c := range lockers {
		passes += c.Passes()
	}
	if passes < 2 || lockers[2].Passes() != 0 {
		t.Fatalf("passes %d (disabled locker %d), want at least the 2 arranged and none on the disabled one", passes, lockers[2].Passes())
	}
	if got, want := s.holdsReleased(), s.grants; got != want {
		t.Fatalf("%d holds released, want all %d", got, want)
	}
}

// The pass count never exceeds 65535: with a bound above it, the hold goes
// back to the server after the 65535th pass.
func TestOverflow(t *testing.T) {
	s := newFakeServer()
	c := newLocker(t, s, 1<<20)
	l0 := acquire(t, c, "k")
	c.mu.Lock()
	l0.(*lease).hd.passes = MaxHandoffs - 1 // as if 65534 passes had happened
	c.mu.Unlock()
	next := queueUp(t, c, "k", 1)
	if err := l0.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l1 := mustRecv(t, next)
	if got, want := l1.Token(), l0.Token()|MaxHandoffs; got != want {
		t.Fatalf("last pass token %#x, want %#x (same base, low bits 0xffff)", got, want)
	}
	next = queueUp(t, c, "k", 1)
	if err := l1.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l2 := mustRecv(t, next)
	if l2.Token() <= l1.Token() || l2.Token()&0xffff != 0 {
		t.Fatalf("token after the last pass %#x, want a new hold above %#x", l2.Token(), l1.Token())
	}
	if got := s.hold(0).released.Load(); got != 1 {
		t.Fatalf("first hold released %d times, want 1", got)
	}
	_ = l2.Release(t.Context())
}

// A hold whose base does not fit 48 bits is refused and given back.
func TestBaseOverflow(t *testing.T) {
	s := newFakeServer()
	s.base = MaxBase // the next grant is MaxBase+1
	c := newLocker(t, s, 0)
	_, err := c.Acquire(t.Context(), "k")
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Acquire with base 2^48 = %v, want ErrUnavailable", err)
	}
	s.waitFor(t, "the refused hold to be released", func() bool { return s.holds[0].released.Load() == 1 })
}
