package etcdlock

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/lock"
)

// slot is the local FIFO queue of one lock name in one Locker. The goroutine
// at its head ("busy") is the only one that touches the name's etcd key, so
// the goroutines of a process never both believe they hold the lock through
// the shared session.
type slot struct {
	refs int // guarded by Locker.mu: Acquires using the slot; removed at 0

	// busy, waiters are guarded by Locker.mu too: one mutex keeps the
	// hand-over decisions simple, and it is never held across a round trip.
	busy    bool
	waiters []chan *ownership // FIFO; each buffered(1), receives the grant
	own     *ownership        // the etcd hold of the current local holder
	feed    *feed             // the prefix watch while the name is contended
}

// Acquire blocks until the lock name is held or ctx is done. Errors wrap
// lock.ErrNotObtained (with ctx's error, and lock.ErrUnavailable when etcd
// stopped answering), lock.ErrUnavailable, or lock.ErrClosed.
func (l *Locker) Acquire(ctx context.Context, name string) (lock.Lease, error) {
	s, own, err := l.enter(ctx, name)
	if err != nil {
		return nil, l.acquireErr(ctx, name, err)
	}
	if own == nil {
		own, err = l.lockEtcd(ctx, name, s)
		if err != nil {
			l.leave(name, s, nil)
			return nil, l.acquireErr(ctx, name, err)
		}
	}
	le := newLease(l, name, s, own)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		le.drop(lock.ErrClosed)
		l.leave(name, s, own) // own not reusable: the Locker is closed
		return nil, l.acquireErr(ctx, name, lock.ErrClosed)
	}
	l.leases[le] = struct{}{}
	s.own = own
	l.mu.Unlock()
	return le, nil
}

// enter takes the head of name's local queue, waiting behind earlier local
// callers. It returns the etcd ownership handed over by the previous local
// holder, or nil if the caller must acquire in etcd.
func (l *Locker) enter(ctx context.Context, name string) (*slot, *ownership, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, nil, lock.ErrClosed
	}
	s := l.slots[name]
	if s == nil {
		s = &slot{}
		l.slots[name] = s
	}
	s.refs++
	if !s.busy {
		s.busy = true
		l.mu.Unlock()
		return s, nil, nil
	}
	ch := make(chan *ownership, 1)
	s.waiters = append(s.waiters, ch)
	// The name is contended here: watch its prefix, so that the next etcd
	// acquisition waits without re-reads and its holder knows whether
	// other processes queued.
	l.feedLocked(name, s, true)
	l.mu.Unlock()

	select {
	case own := <-ch:
		return s, own, nil
	case <-ctx.Done():
	case <-l.life.Done():
	}
	l.mu.Lock()
	for i, w := range s.waiters {
		if w == ch {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			l.unref(name, s)
			l.mu.Unlock()
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			return nil, nil, lock.ErrClosed
		}
	}
	l.mu.Unlock()
	// Granted while we were giving up: the head of the queue is ours and
	// must be passed on, or everyone behind us waits forever.
	own := <-ch
	l.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		l.pass(ctx, name, s, own)
	})
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return nil, nil, lock.ErrClosed
}

// pass ends a local holder's turn: it hands own to the next local waiter if
// it may be kept (see ownership.reusable and Options.LocalHandoffs),
// otherwise releases it in etcd first. It returns the etcd release's error
// (nil after an in-memory hand-over).
func (l *Locker) pass(ctx context.Context, name string, s *slot, own *ownership) error {
	if own != nil {
		l.mu.Lock()
		if len(s.waiters) > 0 && own.reusable(l.handoffs, time.Now(), l.passMargin) {
			next := s.waiters[0]
			s.waiters = s.waiters[1:]
			own.seq++
			l.unref(name, s)
			l.mu.Unlock()
			next <- own
			return nil
		}
		s.own = nil
		l.mu.Unlock()
	}
	var err error
	if own != nil {
		err = l.releaseEtcd(ctx, own)
	}
	l.leave(name, s, nil)
	return err
}

// leave gives the head of the queue to the next local waiter (with own, or
// nil: acquire in etcd) or marks the slot idle.
func (l *Locker) leave(name string, s *slot, own *ownership) {
	if own != nil {
		// Only pass may keep an ownership alive; anything else must free it.
		l.spawn(func() {
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			defer cancel()
			_ = l.pass(ctx, name, s, own)
		})
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unref(name, s)
	s.own = nil
	if len(s.waiters) == 0 {
		s.busy = false
		return
	}
	next := s.waiters[0]
	s.waiters = s.waiters[1:]
	next <- nil
}

// spawn runs f in a goroutine Close waits for; once Close has begun it
// runs f inline instead, so no goroutine starts behind Close's Wait.
func (l *Locker) spawn(f func()) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		f()
		return
	}
	l.bg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.bg.Done()
		f()
	}()
}

// unref drops one reference to s; the caller holds l.mu.
func (l *Locker) unref(name string, s *slot) {
	s.refs--
	if s.refs == 0 && l.slots[name] == s {
		delete(l.slots, name)
		if s.feed != nil {
			s.feed.stop()
			s.feed = nil
		}
	}
}

// String is for logs.
func (s *slot) String() string {
	return fmt.Sprintf("slot{busy:%v waiters:%d refs:%d feed:%v}", s.busy, len(s.waiters), s.refs, s.feed != nil)
}
