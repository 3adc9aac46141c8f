// Package nolock is the "none" backend: Acquire always succeeds at once, so
// every caller is "inside" the critical section together. It exists to show
// overselling: with it, concurrent purchases read the same stock and all
// decrement it.
package nolock

import (
	"context"
	"fmt"
	"sync/atomic"

	"seckill/internal/lock"
	"seckill/internal/lock/backend"
)

var (
	_ lock.Locker    = (*Locker)(nil)
	_ lock.Describer = (*Locker)(nil)
)

// Locker grants every request immediately. It is safe for concurrent use.
type Locker struct {
	token atomic.Uint64
}

// New returns a Locker.
func New() *Locker { return &Locker{} }

// Describe reports the backend as "none" and unsafe.
func (l *Locker) Describe() lock.Info { return lock.Info{Name: backend.None, Safe: false} }

// Acquire returns a lease without waiting. It still honours a context that is
// already done, like every other backend, so callers see one behaviour.
func (l *Locker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("nolock: acquire %q: %w: %w", key, lock.ErrNotObtained, err)
	}
	return &lease{key: key, token: l.token.Add(1), sig: lock.NewSignal()}, nil
}

type lease struct {
	key      string
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
		return fmt.Errorf("nolock: release %q: %w", s.key, lock.ErrNotHeld)
	}
	s.sig.Close(lock.ErrReleased)
	return nil
}
