//go:build lab

package failpoint

import (
	"context"
	"fmt"
	"sync"
)

// gate is the state of a pause failpoint: evaluations block on released
// until Release (or Disable) closes it; arrived tells a test that someone is
// blocked, so it can act on that event instead of sleeping.
type gate struct {
	mu       sync.Mutex
	released chan struct{}
	arrived  chan struct{}
	hasCome  bool // arrived is closed
}

func newGate() *gate {
	return &gate{released: make(chan struct{}), arrived: make(chan struct{})}
}

func (g *gate) wait(name string) Func {
	return func(ctx context.Context) error {
		g.mu.Lock()
		rel := g.released
		if !g.hasCome {
			g.hasCome = true
			close(g.arrived)
		}
		g.mu.Unlock()
		select {
		case <-rel:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("failpoint %s: %w: pause cut short: %w", name, ErrInjected, ctx.Err())
		}
	}
}

// release lets every current waiter go and re-arms the gate: later
// evaluations pause again until the next release.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.released)
	g.released = make(chan struct{})
	g.arrived = make(chan struct{})
	g.hasCome = false
}

func (g *gate) arrivedCh() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.arrived
}

// Release lets go every evaluation paused at name; the failpoint stays
// armed, so later evaluations pause again. It reports whether name is an
// enabled pause.
func Release(name string) bool {
	p := lookup(name)
	if p == nil || p.gate == nil {
		return false
	}
	p.gate.release()
	return true
}

// WaitPaused blocks until an evaluation has reached the pause at name since
// it was enabled or last released, or until ctx is done. It is the event a
// test waits for before arranging what should happen during the pause.
func WaitPaused(ctx context.Context, name string) error {
	p := lookup(name)
	if p == nil || p.gate == nil {
		return fmt.Errorf("failpoint %s: not an enabled pause", name)
	}
	select {
	case <-p.gate.arrivedCh():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("failpoint %s: nothing paused: %w", name, ctx.Err())
	}
}
