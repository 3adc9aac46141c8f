package storetest

import (
	"context"
	"sync"
	"sync/atomic"

	"seckill/internal/lock"
)

// TurnLocker is one lock with a FIFO queue (a channel's receivers are
// served in order), counting what goes through it. A wait whose context
// ended is not granted the lock even if it comes free at that instant, so
// Granted is exact: the bell's tests count the turns a queue took.
type TurnLocker struct {
	turn     chan struct{} // holds the lock's one token while it is free
	Waiting  atomic.Int64  // callers in Acquire now
	Acquires atomic.Int64  // Acquire calls
	Granted  atomic.Int64  // leases handed out
	token    atomic.Uint64
}

// NewTurnLocker returns a free TurnLocker.
func NewTurnLocker() *TurnLocker {
	l := &TurnLocker{turn: make(chan struct{}, 1)}
	l.turn <- struct{}{}
	return l
}

// Acquire waits for the lock, or for ctx.
func (l *TurnLocker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	l.Acquires.Add(1)
	l.Waiting.Add(1)
	defer l.Waiting.Add(-1)
	select {
	case <-l.turn:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		l.turn <- struct{}{}
		return nil, err
	}
	l.Granted.Add(1)
	return &turnLease{l: l, key: key, token: l.token.Add(1)}, nil
}

type turnLease struct {
	l     *TurnLocker
	key   string
	token uint64
	once  sync.Once
}

func (t *turnLease) Key() string           { return t.key }
func (t *turnLease) Token() uint64         { return t.token }
func (t *turnLease) Done() <-chan struct{} { return nil }
func (t *turnLease) Err() error            { return nil }
func (t *turnLease) Release(context.Context) error {
	t.once.Do(func() { t.l.turn <- struct{}{} })
	return nil
}
