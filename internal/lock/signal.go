package lock

import (
	"context"
	"sync"
)

// Signal is the close-once Done channel with a reason that every Lease needs.
// Backends embed a *Signal and call Close from whichever path ends the lease
// first (Release, a failed renewal, a session expiry); later calls are no-ops,
// so the first reason is the one reported.
//
// It is built on a context so that AfterFunc can watch it without a
// goroutine: the cohort watches one Signal per lock acquisition, and a
// goroutine started and woken per acquisition cost ~7 % of an uncontended
// lock cycle.
type Signal struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	once   sync.Once
}

// NewSignal returns an open Signal.
func NewSignal() *Signal {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Signal{ctx: ctx, cancel: cancel}
}

// Done is closed once Close has been called.
func (s *Signal) Done() <-chan struct{} { return s.ctx.Done() }

// Err returns nil while open, then the error given to the first Close.
func (s *Signal) Err() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

// Close records err, which should not be nil, and closes Done. It reports
// whether this call closed it.
func (s *Signal) Close(err error) (closed bool) {
	s.once.Do(func() {
		s.cancel(err)
		closed = true
	})
	return closed
}

// AfterFunc arranges to call f in its own goroutine once Done closes (at
// once if it has), as context.AfterFunc does: stop undoes that and reports
// whether it did.
func (s *Signal) AfterFunc(f func()) (stop func() bool) { return context.AfterFunc(s.ctx, f) }
