package flawedlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"seckill/internal/lock"
)

// lease is one acquisition. It has no watchdog and no way to notice that its
// lock expired or was deleted: Done closes only on Release (package doc).
type lease struct {
	l        *Locker
	key      string
	k        string // Redis key
	owner    string
	token    uint64
	sig      *lock.Signal
	released atomic.Bool
}

func (s *lease) Key() string           { return s.key }
func (s *lease) Token() uint64         { return s.token }
func (s *lease) Done() <-chan struct{} { return s.sig.Done() }
func (s *lease) Err() error            { return s.sig.Err() }

// Release runs the backend's release. It returns nil when that release
// believes it freed its own lock, which for redis-nocheck and redis-checkdel
// includes the cases where it deleted someone else's: that is their flaw.
// An error wraps lock.ErrNotHeld when the release saw the lock was not ours
// (or gone), lock.ErrUnavailable otherwise. Later calls return ErrNotHeld.
func (s *lease) Release(ctx context.Context) error {
	if !s.released.CompareAndSwap(false, true) {
		return fmt.Errorf("flawedlock %s: release %q: %w", s.l.v.name, s.key, lock.ErrNotHeld)
	}
	err := s.l.v.release(ctx, s.l, s.k, s.owner)
	switch {
	case err == nil:
		s.sig.Close(lock.ErrReleased)
		return nil
	case errors.Is(err, lock.ErrNotHeld):
		s.sig.Close(fmt.Errorf("flawedlock %s: %q: %w: expired or taken before release", s.l.v.name, s.key, lock.ErrLost))
		return fmt.Errorf("flawedlock %s: release %q: %w", s.l.v.name, s.key, err)
	default:
		s.sig.Close(fmt.Errorf("flawedlock %s: %q: %w: release failed: %w", s.l.v.name, s.key, lock.ErrLost, err))
		return lock.Unavailable("flawedlock "+s.l.v.name, fmt.Sprintf("release %q", s.key), err)
	}
}
