// Package locallock is the "local" backend: an in-process, per-key FIFO mutex.
//
// It is correct inside one process and wrong across replicas: two stockd
// processes each hold their own Locker, so both sell the same item at once.
// The lab uses it to show exactly that, next to the "none" backend (no lock at
// all) and the distributed backends.
//
// A sync.Mutex cannot be abandoned by a waiter whose context ends, so each key
// has a FIFO of waiters, each with its own channel that is closed when it
// reaches the front. Unlocking hands the lock straight to the next waiter, so
// there is no barging: goroutines acquire in arrival order.
package locallock

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"seckill/internal/lock"
)

var (
	_ lock.Locker    = (*Locker)(nil)
	_ lock.Describer = (*Locker)(nil)
)

// Locker is an in-process lock table. The zero value is not usable; call New.
// It is safe for concurrent use.
type Locker struct {
	mu    sync.Mutex
	keys  map[string]*list.List // front is the holder, the rest wait in order
	token atomic.Uint64         // fencing tokens, shared by all keys
}

// New returns an empty Locker.
func New() *Locker {
	return &Locker{keys: make(map[string]*list.List)}
}

// Describe reports the backend as "local" and not safe across processes.
func (l *Locker) Describe() lock.Info { return lock.Info{Name: "local", Safe: false} }

// Len reports how many goroutines hold or wait for key, for metrics and for
// tests that must know a waiter has queued.
func (l *Locker) Len(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.keys[key]; q != nil {
		return q.Len()
	}
	return 0
}

// turn is one goroutine's place in a key's queue.
type turn struct {
	ready chan struct{} // closed when the turn reaches the front
	elem  *list.Element
}

// Acquire blocks until key is free and every earlier waiter has had its turn,
// or until ctx is done (the error then wraps lock.ErrNotObtained and
// ctx.Err()).
func (l *Locker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("locallock: acquire %q: %w: %w", key, lock.ErrNotObtained, err)
	}
	t := l.enqueue(key)
	select {
	case <-t.ready:
	case <-ctx.Done():
		// The turn may have come just as ctx ended; leave passes it on then,
		// so an abandoned turn never strands the waiters behind it.
		l.leave(key, t)
		return nil, fmt.Errorf("locallock: acquire %q: %w: %w", key, lock.ErrNotObtained, ctx.Err())
	}
	return &lease{l: l, key: key, turn: t, token: l.token.Add(1), sig: lock.NewSignal()}, nil
}

func (l *Locker) enqueue(key string) *turn {
	t := &turn{ready: make(chan struct{})}
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.keys[key]
	if q == nil {
		q = list.New()
		l.keys[key] = q
	}
	t.elem = q.PushBack(t)
	if q.Len() == 1 {
		close(t.ready)
	}
	return t
}

// leave removes t from key's queue; if t was at the front, the next waiter
// becomes the holder.
func (l *Locker) leave(key string, t *turn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.keys[key]
	front := q.Front() == t.elem
	q.Remove(t.elem)
	if q.Len() == 0 {
		delete(l.keys, key)
		return
	}
	if front {
		close(q.Front().Value.(*turn).ready)
	}
}

// lease is a held local lock.
type lease struct {
	l        *Locker
	key      string
	turn     *turn
	token    uint64
	sig      *lock.Signal
	released atomic.Bool
}

func (s *lease) Key() string           { return s.key }
func (s *lease) Token() uint64         { return s.token }
func (s *lease) Done() <-chan struct{} { return s.sig.Done() }
func (s *lease) Err() error            { return s.sig.Err() }
func (s *lease) Release(context.Context) error {
	if !s.released.CompareAndSwap(false, true) {
		return fmt.Errorf("locallock: release %q: %w", s.key, lock.ErrNotHeld)
	}
	s.l.leave(s.key, s.turn)
	s.sig.Close(lock.ErrReleased)
	return nil
}
