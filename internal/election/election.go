// Package election defines the leader-election contract of seckill: which
// replica runs the leader-only job (the sale audit), as Curator's LeaderLatch
// decides which Spring Boot instance runs a Quartz job in the articles.
//
// Backends live in their own packages (etcdelect on a concurrency.Election
// borrowed from the process's etcd session, zkelect on an ephemeral-sequential
// latch on the process's ZooKeeper session); this package holds the contract,
// the errors and the Runner that campaigns and runs a job while leading.
//
// The shape mirrors package lock: Campaign hands out a single-use Leadership
// with a fencing token (the Term) and a Done channel that closes as soon as
// leadership is, or may be, lost — including while the connection to the
// coordination server is uncertain. Work done as leader must stop when Done
// closes and should carry the Term to a store that refuses lower terms,
// because a paused process learns of its deposition only after it wakes.
package election

import (
	"context"
	"errors"
)

// Sentinel errors. Backends wrap them (fmt.Errorf("...: %w", ...)), so
// callers test with errors.Is.
var (
	// ErrNotElected: Campaign returned because ctx ended first. The error
	// also wraps ctx.Err().
	ErrNotElected = errors.New("election: not elected")

	// ErrNoLeader: nobody leads at the moment (Elector.Leader).
	ErrNoLeader = errors.New("election: no leader")

	// ErrLost: leadership ended without Resign — the session expired, the
	// leader key or node was deleted, or the connection became uncertain.
	// Leadership.Err wraps it.
	ErrLost = errors.New("election: leadership lost")

	// ErrSuspended: the connection to the coordination server is uncertain
	// (ZooKeeper Disconnected, Curator's SUSPENDED). It wraps ErrLost too:
	// the candidate may still hold its place, which the next Campaign
	// confirms without a new election.
	ErrSuspended = errors.New("election: connection suspended")

	// ErrResigned is what Leadership.Err reports after Resign.
	ErrResigned = errors.New("election: resigned")

	// ErrNotLeader: Resign or Check on a Leadership that no longer leads.
	ErrNotLeader = errors.New("election: not the leader")

	// ErrUnavailable: the coordination server could not be reached or
	// failed. Campaign callers retry it with a backoff.
	ErrUnavailable = errors.New("election: backend unavailable")

	// ErrClosed: the Elector was closed.
	ErrClosed = errors.New("election: elector closed")
)

// Elector is one candidate of one election. It is safe for concurrent use,
// but a candidate holds at most one place in the election: Campaign must not
// be called again until the previous Leadership is done.
type Elector interface {
	// Campaign blocks until this candidate leads or ctx is done. It waits
	// for events (a watch on the predecessor), never in a sleep loop. When
	// ctx ends first it withdraws the candidacy and returns an error
	// wrapping ErrNotElected and ctx.Err(); server failures wrap
	// ErrUnavailable.
	Campaign(ctx context.Context) (Leadership, error)

	// Leader reports who leads now (ErrNoLeader when nobody does). It is
	// what every replica answers on GET /leader.
	Leader(ctx context.Context) (Leader, error)

	// ID is the identity this candidate campaigns with (the replica name).
	ID() string

	// Backend names the implementation, e.g. "etcd" or "zookeeper". Terms
	// are comparable only within one backend.
	Backend() string
}

// Leader is one observation of the election's leader.
type Leader struct {
	ID   string `json:"leader"` // the leader's candidate ID
	Term uint64 `json:"term"`   // its Term
}

// Leadership is one tenure as leader. It is single-use: once resigned or
// lost it cannot be renewed; campaign again.
type Leadership interface {
	// Term is the fencing token of this tenure: strictly greater than the
	// Term of every earlier leader of the same election and backend (etcd:
	// the leader key's create revision; ZooKeeper: the latch node's czxid).
	Term() uint64

	// Done is closed when leadership is, or may be, lost: session expiry,
	// leader key deleted, connection suspended, Resign.
	Done() <-chan struct{}

	// Err is nil while leading; after Done it says why: ErrResigned, or an
	// error wrapping ErrLost (and ErrSuspended for an uncertain connection).
	Err() error

	// Check confirms with the server, by a linearizable read, that this
	// tenure still leads. A job calls it before each run: it is how a leader
	// whose connection quietly broke stops acting before its session dies.
	Check(ctx context.Context) error

	// Resign gives leadership up so another candidate takes over at once.
	// The first call deletes the key/node (or reports ErrNotLeader if it was
	// already lost); later calls return ErrNotLeader.
	Resign(ctx context.Context) error
}

// Closer is implemented by electors that own background work. Close
// withdraws the candidacy; a Leadership still held becomes lost.
type Closer interface {
	Close() error
}
