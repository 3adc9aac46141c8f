package lock

import (
	"errors"
	"fmt"
)

// Sentinel errors. Backends wrap them with context (fmt.Errorf("...: %w", ...))
// so callers test with errors.Is.
var (
	// ErrNotObtained: the lock was not acquired before the context was done.
	// The error also wraps the context's error (DeadlineExceeded or Canceled).
	ErrNotObtained = errors.New("lock: not obtained")

	// ErrNotHeld: Release (or a renewal) was attempted on a lock this lease
	// no longer holds: released already, expired, or taken by someone else.
	ErrNotHeld = errors.New("lock: not held")

	// ErrLost: the lease lost the lock before it was released (renewal failed,
	// session expired, connection uncertain). Lease.Err wraps it.
	ErrLost = errors.New("lock: lost")

	// ErrReleased is what Lease.Err reports after a successful Release.
	ErrReleased = errors.New("lock: released")

	// ErrUnavailable: the lock server could not be reached or answered with an
	// error. Distinguished from ErrNotObtained so a service can answer 503
	// "dependency down" rather than "busy".
	ErrUnavailable = errors.New("lock: backend unavailable")

	// ErrClosed: the Locker was closed.
	ErrClosed = errors.New("lock: locker closed")
)

// Unavailable is the one shape of a backend's server failure: "<pkg>:
// <what>: lock: backend unavailable: <err>", wrapping ErrUnavailable and
// err. pkg is the backend's package name; what names the operation and its
// key, e.g. `release "sku:42"`.
func Unavailable(pkg, what string, err error) error {
	return fmt.Errorf("%s: %s: %w: %w", pkg, what, ErrUnavailable, err)
}
