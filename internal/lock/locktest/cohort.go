package locktest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"seckill/internal/lock"
	"seckill/internal/testwait"
)

// Queuer is implemented by cohort lockers (the cohort package's Locker and
// the backends built on it).
type Queuer interface {
	// WaitQueued returns once at least n goroutines wait for key behind
	// the one holding it or acquiring it from the server, or with ctx's
	// error.
	WaitQueued(ctx context.Context, key string, n int) error
}

// Cohort tells RunCohort how to drive a cohort backend: a Locker whose
// goroutines queue locally per key and pass a held lock in memory at most
// LocalHandoffs times in a row, with tokens base<<16 | passes.
type Cohort struct {
	// New returns a Locker (a Queuer) with the given LocalHandoffs: 0 for
	// the default 8, negative for no passing. Separate calls must behave
	// like separate processes, unless ServerQueued is nil.
	New func(t *testing.T, handoffs int) lock.Locker

	// ServerQueued waits until n acquisitions of other Lockers are queued
	// at the server for key behind its holder. Nil for an in-process lock:
	// RunCohort then checks the bound on one Locker only.
	ServerQueued func(t *testing.T, key string, n int)

	// Settled, if set, waits until the server keeps nothing for key (no
	// lock, no queue entry) once every Locker let it go.
	Settled func(t *testing.T, key string)

	// Minted: the server mints every lease's token (the cohort passes a
	// cohort.Transferer hold through the server), so tokens are one
	// counter: a pass still adds one, but no base<<16 layout is checked.
	Minted bool
}

// holding is one acquisition as seen from inside the critical section.
type holding struct {
	who   string
	token uint64
}

// RunCohort checks the cohort contract, for LocalHandoffs -1, 1, 3 and the
// default: with more local goroutines queued than the bound allows, a
// process queued at the server gets the lock after exactly bound+1 local
// holders; local holders go in FIFO order; tokens grow by one per pass and
// (unless Minted) to a higher base with no passes per server acquisition.
func RunCohort(t *testing.T, env Cohort) {
	t.Helper()
	for _, tc := range []struct {
		name            string
		handoffs, bound int
	}{
		{"Disabled", -1, 0}, {"One", 1, 1}, {"Three", 3, 3}, {"Default", 0, 8},
	} {
		t.Run(tc.name, func(t *testing.T) { runCohort(t, env, tc.handoffs, tc.bound) })
	}
}

func runCohort(t *testing.T, env Cohort, handoffs, bound int) {
	key := Key(t)
	newLocker := func() lock.Locker {
		lk := env.New(t, handoffs)
		if c, ok := lk.(lock.Closer); ok {
			t.Cleanup(func() { _ = c.Close() })
		}
		return lk
	}
	a := newLocker()
	q, ok := a.(Queuer)
	if !ok {
		t.Fatalf("%T is not a locktest.Queuer", a)
	}
	var (
		mu    sync.Mutex
		order []holding
		wg    sync.WaitGroup
	)
	hold := func(who string, l lock.Lease) {
		mu.Lock()
		order = append(order, holding{who, l.Token()})
		mu.Unlock()
		if err := l.Release(t.Context()); err != nil {
			t.Errorf("%s: Release: %v", who, err)
		}
	}
	take := func(lk lock.Locker, who string) {
		wg.Go(func() {
			l, err := lk.Acquire(t.Context(), key)
			if err != nil {
				t.Errorf("%s: %v", who, err)
				return
			}
			hold(who, l)
		})
	}

	a0 := MustAcquire(t, a, key)
	until := testwait.Until(t)
	remote := env.ServerQueued != nil
	if remote {
		take(newLocker(), "b")
		env.ServerQueued(t, key, 1)
	}
	local := bound + 2 // more than the bound lets through in one batch
	for i := 1; i <= local; i++ {
		take(a, fmt.Sprintf("a%d", i))
		err := q.WaitQueued(until, key, i)
		if err != nil {
			t.Fatalf("a%d never queued locally: %v", i, err)
		}
	}
	hold("a0", a0)
	wg.Wait()
	if t.Failed() {
		return
	}

	// The expected order: a0 and bound passes, then b, then the rest of
	// a's goroutines in FIFO order.
	var want []string
	for i := 0; i <= local; i++ {
		if remote && i == bound+1 {
			want = append(want, "b")
		}
		want = append(want, fmt.Sprintf("a%d", i))
	}
	var got []string
	for _, h := range order {
		got = append(got, h.who)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("lock order %v, want %v (bound %d)", got, want, bound)
	}
	for i := 1; i < len(order); i++ {
		prev, cur := order[i-1].token, order[i].token
		if i <= bound {
			if cur != prev+1 {
				t.Errorf("%s, pass %d: token %#x, want %#x (previous + 1)", order[i].who, i, cur, prev+1)
			}
			continue
		}
		// cohort.Token's layout (PassBits 16), written out: cohort's own tests use this package.
		if i == bound+1 && !env.Minted && (cur>>16 <= prev>>16 || cur&0xffff != 0) {
			t.Errorf("%s, after the bound: token %#x after %#x, want a new hold (higher base, no passes)", order[i].who, cur, prev)
		}
		if cur <= prev {
			t.Errorf("%s: token %#x after %#x, want strictly greater", order[i].who, cur, prev)
		}
	}
	if env.Settled != nil {
		env.Settled(t, key)
	}
}
