// Package locallock is the "local" backend: an in-process, per-key FIFO mutex.
//
// It is correct inside one process and wrong across replicas: two stockd
// processes each hold their own Locker, so both sell the same item at once.
// The lab uses it to show exactly that, next to the "none" backend (no lock at
// all) and the distributed backends.
//
// It is the cohort package over a trivial server: every key is free at the
// "server" (the cohort's own FIFO already lets one goroutine at a time
// through), so a hold is a fencing base and nothing else. Waiters are served
// in arrival order, and one whose context ends leaves without stranding
// those behind it.
package locallock

import (
	"context"
	"sync/atomic"

	"seckill/internal/lock"
	"seckill/internal/lock/backend"
	"seckill/internal/lock/cohort"
)

var (
	_ lock.Locker    = (*Locker)(nil)
	_ lock.Describer = (*Locker)(nil)
)

// Locker is an in-process lock table. The zero value is not usable; call New.
// It is safe for concurrent use. It owns no goroutine while idle, so it need
// not be closed; Close ends waiting Acquires with lock.ErrClosed.
type Locker struct {
	*cohort.Locker
}

// Options configure a Locker.
type Options struct {
	// LocalHandoffs bounds how many times in a row a released lock passes
	// to the next waiter with the same fencing base before a new base is
	// drawn: cohort.Config.Handoffs (the default, 0, is 8; a negative value
	// draws a new base for every acquisition). It changes tokens only.
	LocalHandoffs int
}

// New returns an empty Locker with the default Options.
func New() *Locker { return NewWith(Options{}) }

// NewWith returns an empty Locker.
func NewWith(opts Options) *Locker {
	return &Locker{cohort.New(&server{}, cohort.Config{Name: "locallock", Handoffs: opts.LocalHandoffs})}
}

// Describe reports the backend as "local" and not safe across processes.
func (l *Locker) Describe() lock.Info { return lock.Info{Name: backend.Local, Safe: false} }

// server grants every request at once, with a new base each time: fencing
// tokens shared by all keys.
type server struct{ base atomic.Uint64 }

func (s *server) Acquire(context.Context, string) (cohort.Hold, error) {
	return hold(s.base.Add(1)), nil
}

// hold is a grant of server: it cannot be lost and is always passable.
type hold uint64

func (h hold) Base() uint64                { return uint64(h) }
func (hold) Done() <-chan struct{}         { return nil }
func (hold) AfterFunc(func()) func() bool  { return nil } // never called: Done is nil
func (hold) Err() error                    { return nil }
func (hold) Passable() bool                { return true }
func (hold) Release(context.Context) error { return nil }
