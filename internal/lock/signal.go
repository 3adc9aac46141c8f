package lock

import "sync"

// Signal is the close-once Done channel with a reason that every Lease needs.
// Backends embed a *Signal and call Close from whichever path ends the lease
// first (Release, a failed renewal, a session expiry); later calls are no-ops,
// so the first reason is the one reported.
type Signal struct {
	once sync.Once
	ch   chan struct{}
	mu   sync.Mutex
	err  error
}

// NewSignal returns an open Signal.
func NewSignal() *Signal { return &Signal{ch: make(chan struct{})} }

// Done is closed once Close has been called.
func (s *Signal) Done() <-chan struct{} { return s.ch }

// Err returns nil while open, then the error given to the first Close.
func (s *Signal) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close records err and closes Done. It reports whether this call closed it.
func (s *Signal) Close(err error) (closed bool) {
	s.once.Do(func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.ch)
		closed = true
	})
	return closed
}
