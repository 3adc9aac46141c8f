// Package lock defines the contract every distributed-lock backend of seckill
// implements. Backends live in their own packages (redislock, etcdlock, zklock,
// …) and receive ready clients; this package holds only interfaces, errors and
// small helpers shared by all of them.
//
// The shape follows etcd's concurrency package and bsm/redislock: a Locker hands
// out single-use Leases; a Lease carries a fencing token and a Done channel that
// closes when the lock may have been lost, so the caller can stop before it
// writes anything under a lock it no longer holds.
package lock

import (
	"context"
	"time"
)

// Locker acquires named locks.
//
// Acquire blocks until the lock is held or ctx is done. It never polls in a
// fixed sleep loop: implementations wait for an event (pub/sub, a watch on a
// predecessor, a local hand-off) with a bounded backoff only as a fallback.
// A Locker is safe for concurrent use by many goroutines of one process; two
// goroutines of one process contend for a key exactly as two processes do.
type Locker interface {
	Acquire(ctx context.Context, key string) (Lease, error)
}

// Closer is implemented by lockers that own background work (subscriptions,
// sessions, watchdogs). Close stops it; leases still held become lost.
type Closer interface {
	Close() error
}

// Lease is one successful acquisition of a lock. It is single-use: once
// released or lost it cannot be renewed or reused.
type Lease interface {
	// Key is the lock's name as passed to Acquire.
	Key() string

	// Token is a fencing token: strictly greater than the token of any earlier
	// acquisition of the same key through the same backend. A store that
	// remembers the highest token it has seen can reject writes from a holder
	// that lost the lock without knowing it (a paused or partitioned process).
	Token() uint64

	// Done is closed when the lock is, or may be, lost before Release: the
	// TTL could not be renewed, the session expired, the connection became
	// uncertain. Work guarded by the lock must stop when Done is closed.
	// After a successful Release, Done is closed too.
	Done() <-chan struct{}

	// Err is nil while the lease is held. After Done is closed it explains
	// why: ErrReleased after Release, otherwise an error wrapping ErrLost.
	Err() error

	// Release gives the lock up. The first call releases (or reports that the
	// lock was already lost, wrapping ErrNotHeld); every later call returns
	// ErrNotHeld without touching the server.
	Release(ctx context.Context) error
}

// Info describes a backend for logs, metrics and the fence: tokens from
// different backends are not comparable, so a store keeps them apart by Name.
type Info struct {
	Name string // backend name as configured, e.g. "redis"
	Safe bool   // false for the lab-only backends that demonstrate failures
}

// Describer is implemented by lockers that can name themselves.
type Describer interface {
	Describe() Info
}

// Options are the knobs common to every lease-based backend. Zero values mean
// "the backend's documented default".
type Options struct {
	// TTL is how long the lock survives a holder that stops renewing it
	// (a crash, a pause, a partition). Renewal runs every TTL/3.
	TTL time.Duration
}

// Pinger is implemented by lockers that talk to a server, so a readiness
// probe can tell "lock server unreachable" apart from "process up".
type Pinger interface {
	Ping(ctx context.Context) error
}

// TokenAdvancer is implemented by lockers whose token sequence lives in a
// server that can lose it (a Redis restarted empty, or from an older
// snapshot, or promoted from a lagging replica). A fence that has seen a
// higher token than the lock now hands out refuses every sale; the stock
// service then calls AdvanceTokens with the fence's high-water mark, and
// every acquisition of key that starts after it returns nil gets a token
// above `above`. Tokens only ever move forward, so calling it with a stale
// or small value is harmless; it is idempotent.
type TokenAdvancer interface {
	AdvanceTokens(ctx context.Context, key string, above uint64) error
}
