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
// queue and this lease is the one holding it now.
type lease struct {
	l     *Locker
	n     *node
	key   string
	token uint64
	sig   *lock.Signal

	mu        sync.Mutex
	releasing bool // Release has been called
}

var _ lock.Lease = (*lease)(nil)

func newLease(l *Locker, n *node, token uint64) *lease {
	return &lease{l: l, n: n, key: n.c.key, token: token, sig: lock.NewSignal()}
}

// Key is the key passed to Acquire.
func (ls *lease) Key() string { return ls.key }

// Token is pzxid<<16 | n: the key node's last-child-change zxid when our
// node became the lowest, and the lease's rank among those granted on that
// node. See the package documentation.
func (ls *lease) Token() uint64 { return ls.token }

// Done closes on Release, on a disconnect, on expiry, or when the node is
// deleted underneath us.
func (ls *lease) Done() <-chan struct{} { return ls.sig.Done() }

// Err is nil while held, then ErrReleased or an error wrapping ErrLost.
func (ls *lease) Err() error { return ls.sig.Err() }

// Path is the lease's lock node, for logs and tests.
func (ls *lease) Path() string { return ls.n.path }

// monitor loses n when it disappears underneath us (deleted by an operator,
// or the session expired: the watch is then invalidated). watch starts as
// the child watch of the listing that found n lowest; when another node
// comes or goes it fires, and one exists-watch on n itself re-arms it.
// Session suspension is handled by Locker.watchSession for all nodes at once.
func (l *Locker) monitor(n *node, watch <-chan zk.Event) {
	for {
		var ev zk.Event
		select {
		case ev = <-watch:
		case <-n.stop:
			return // released or lost already
		}
		var reason string
		switch ev.Type {
		case zk.EventNodeChildrenChanged:
			ok, _, ch, err := l.conn.ExistsW(n.path)
			if err == nil && ok {
				watch = ch
				continue
			}
			reason = "lock node deleted"
			if err != nil {
				reason = fmt.Sprintf("cannot watch lock node: %v", err)
			}
		case zk.EventNodeDeleted:
			reason = "lock node deleted"
		case zk.EventNotWatching:
			reason = fmt.Sprintf("watch on lock node lost: %v", ev.Err)
		default:
			// Nobody writes lock nodes, but a watch is one-shot: after any
			// other event we could no longer see a deletion, so be safe.
			reason = fmt.Sprintf("unexpected %v event on lock node", ev.Type)
		}
		l.mu.Lock()
		l.loseNodeLocked(n, fmt.Errorf("%w: %s", lock.ErrLost, reason))
		l.unlock()
		return
	}
}

// Release gives the lock up. If another goroutine of this Locker waits for
// the key and the node has served fewer than LocalHandoffs+1 leases, the
// lock passes to it in memory: no request, and Release returns nil at once.
// Otherwise our node is deleted, which wakes the next process, and our next
// local waiter (if any) queues a new node.
//
// The first call releases or, if the lease was already lost, returns an
// error wrapping lock.ErrNotHeld and the loss; later calls return
// lock.ErrNotHeld. If the delete cannot be confirmed (ctx done, server
// unreachable) the error wraps lock.ErrUnavailable, Done closes with
// ErrLost, and the node is deleted as soon as the session is back (or goes
// with the session if it expires).
func (ls *lease) Release(ctx context.Context) error {
	ls.mu.Lock()
	if ls.releasing {
		ls.mu.Unlock()
		return fmt.Errorf("zklock: release %q: %w", ls.key, lock.ErrNotHeld)
	}
	ls.releasing = true
	ls.mu.Unlock()

	l, n := ls.l, ls.n
	l.mu.Lock()
	if n.cur != ls {
		// Lost already (loseNodeLocked moved the front on and deletes the
		// node, or orphans it until the session is back).
		l.mu.Unlock()
		return fmt.Errorf("zklock: release %q: %w: %w", ls.key, lock.ErrNotHeld, ls.sig.Err())
	}
	n.cur = nil
	if l.passableLocked(n, ls) {
		ls.sig.Close(lock.ErrReleased)
		l.nextFrontLocked(n.c)
		l.mu.Unlock()
		return nil
	}
	// Give the node up. The next local waiter becomes the front now, so its
	// create overlaps our delete; it cannot get ahead of the processes
	// already queued, nor hold before our delete is applied.
	l.detachLocked(n)
	l.nextFrontLocked(n.c)
	l.mu.Unlock()

	path := n.path
	_, err := do(ctx, l, func() (struct{}, error) {
		return struct{}{}, l.conn.Delete(path, -1)
	}, func(_ struct{}, err error) {
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			l.forget(path)
		} else {
			l.orphan(path)
		}
	})
	switch {
	case err == nil:
		l.forget(path)
		ls.sig.Close(lock.ErrReleased)
		return nil
	case errors.Is(err, zk.ErrNoNode):
		l.forget(path)
		ls.sig.Close(fmt.Errorf("%w: lock node deleted before release", lock.ErrLost))
		return fmt.Errorf("zklock: release %q: %w: %w", ls.key, lock.ErrNotHeld, ls.sig.Err())
	case ctx.Err() != nil:
		// The delete is still in flight; its late result is handled above.
		ls.sig.Close(fmt.Errorf("%w: release not confirmed: %w", lock.ErrLost, ctx.Err()))
		return fmt.Errorf("zklock: release %q: %w: %w", ls.key, lock.ErrUnavailable, ctx.Err())
	default:
		if !errors.Is(err, lock.ErrClosed) {
			l.orphan(path)
		}
		ls.sig.Close(fmt.Errorf("%w: release failed: %w", lock.ErrLost, err))
		return fmt.Errorf("zklock: release %q: %w: %w", ls.key, lock.ErrUnavailable, err)
	}
}
