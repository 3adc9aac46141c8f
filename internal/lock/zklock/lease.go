package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"

	"seckill/internal/lock"
)

// lease is one held ZooKeeper lock: our node is the lowest in its key's
// queue.
type lease struct {
	l     *Locker
	key   string
	path  string // our lock node
	token uint64 // czxid of the node
	own   <-chan zk.Event
	sig   *lock.Signal

	mu        sync.Mutex
	releasing bool // Release has been called: our own delete is not a loss
}

var _ lock.Lease = (*lease)(nil)

// Key is the key passed to Acquire.
func (ls *lease) Key() string { return ls.key }

// Token is the lock node's czxid: ZooKeeper's transaction id of its create.
func (ls *lease) Token() uint64 { return ls.token }

// Done closes on Release, on a disconnect, on expiry, or when the node is
// deleted underneath us.
func (ls *lease) Done() <-chan struct{} { return ls.sig.Done() }

// Err is nil while held, then ErrReleased or an error wrapping ErrLost.
func (ls *lease) Err() error { return ls.sig.Err() }

// Path is the lease's lock node, for logs and tests.
func (ls *lease) Path() string { return ls.path }

// monitor closes Done when our node disappears underneath us (deleted by an
// operator, or the session expired: the watch is then invalidated). Session
// suspension is handled by Locker.watchSession for all leases at once.
func (ls *lease) monitor() {
	select {
	case ev := <-ls.own:
		ls.mu.Lock()
		releasing := ls.releasing
		ls.mu.Unlock()
		if releasing {
			return // our own Release deleted it; Release closes the signal
		}
		reason := "lock node deleted"
		if ev.Type == zk.EventNotWatching {
			reason = fmt.Sprintf("watch on lock node lost: %v", ev.Err)
		} else if ev.Type != zk.EventNodeDeleted {
			// Nobody writes lock nodes, but a watch is one-shot: after any
			// other event we could no longer see a deletion, so be safe.
			reason = fmt.Sprintf("unexpected %v event on lock node", ev.Type)
		}
		ls.lose(fmt.Errorf("%w: %s", lock.ErrLost, reason))
	case <-ls.sig.Done():
	}
}

// lose ends the lease as lost and stops tracking it.
func (ls *lease) lose(err error) {
	if ls.sig.Close(err) {
		ls.l.log.Warn("lock lost", "key", ls.key, "err", err)
	}
	ls.l.mu.Lock()
	delete(ls.l.held, ls)
	ls.l.mu.Unlock()
}

// Release deletes our node, which wakes the next waiter. The first call
// releases or, if the lease was already lost, returns an error wrapping
// lock.ErrNotHeld and the loss; later calls return lock.ErrNotHeld. If the
// delete cannot be confirmed (ctx done, server unreachable) the error wraps
// lock.ErrUnavailable, Done closes with ErrLost, and the node is deleted as
// soon as the session is back (or goes with the session if it expires).
func (ls *lease) Release(ctx context.Context) error {
	ls.mu.Lock()
	if ls.releasing {
		ls.mu.Unlock()
		return fmt.Errorf("zklock: release %q: %w", ls.key, lock.ErrNotHeld)
	}
	ls.releasing = true
	ls.mu.Unlock()

	l := ls.l
	if err := ls.sig.Err(); err != nil {
		// Lost already. A node left by a suspension is orphaned (deleted
		// on reconnect) by watchSession; make sure of it here too.
		l.deleteNode(ls.path)
		return fmt.Errorf("zklock: release %q: %w: %w", ls.key, lock.ErrNotHeld, err)
	}
	_, err := do(ctx, l, func() (struct{}, error) {
		return struct{}{}, l.conn.Delete(ls.path, -1)
	}, func(_ struct{}, err error) {
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			l.forget(ls.path)
		} else {
			l.orphan(ls.path)
		}
	})
	l.mu.Lock()
	delete(l.held, ls)
	l.mu.Unlock()
	switch {
	case err == nil:
		l.forget(ls.path)
		ls.sig.Close(lock.ErrReleased)
		return nil
	case errors.Is(err, zk.ErrNoNode):
		l.forget(ls.path)
		ls.sig.Close(fmt.Errorf("%w: lock node deleted before release", lock.ErrLost))
		return fmt.Errorf("zklock: release %q: %w: %w", ls.key, lock.ErrNotHeld, ls.sig.Err())
	case ctx.Err() != nil:
		// The delete is still in flight; its late result is handled above.
		ls.sig.Close(fmt.Errorf("%w: release not confirmed: %w", lock.ErrLost, ctx.Err()))
		return fmt.Errorf("zklock: release %q: %w: %w", ls.key, lock.ErrUnavailable, ctx.Err())
	default:
		if !errors.Is(err, lock.ErrClosed) {
			l.orphan(ls.path)
		}
		ls.sig.Close(fmt.Errorf("%w: release failed: %w", lock.ErrLost, err))
		return fmt.Errorf("zklock: release %q: %w: %w", ls.key, lock.ErrUnavailable, err)
	}
}
