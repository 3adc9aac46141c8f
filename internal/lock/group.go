package lock

import "sync"

// Group is the background work of a Locker that its Close waits for:
// renewals, cleanups, watchers. Once Close has begun waiting it starts
// nothing: Go and Add report false, and the caller decides whether to do
// the work inline or drop it. Every backend uses it, so "after Close" means
// the same everywhere. The zero value is ready to use.
type Group struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs f on a goroutine Close waits for, or reports false (and does not
// run f) once Close has begun.
func (g *Group) Go(f func()) bool {
	done, ok := g.Add()
	if ok {
		go func() {
			defer done()
			f()
		}()
	}
	return ok
}

// Add registers work the caller runs itself (a timer's callback); done
// must be called when it is over. It reports false once Close has begun.
func (g *Group) Add() (done func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, false
	}
	g.wg.Add(1)
	return g.wg.Done, true
}

// Close refuses new work and waits for the work under way.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
