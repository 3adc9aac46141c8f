package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
	"seckill/internal/zksess"
)

// node is one of our lock nodes; once it is the lowest in its key's queue
// it is the cohort.Hold of this process. path, dir, inc, loss and l never
// change; the rest is guarded by Locker.mu.
type node struct {
	l    *Locker
	dir  string
	path string
	inc  zksess.Incarnation // the session that created it
	loss *lock.Signal       // closed when lost (Done)

	held bool          // lowest in the queue: this process holds the lock
	base uint64        // pzxid of the listing that found it lowest
	lost error         // why it was lost, if it was
	done bool          // given up: released, lost or abandoned
	stop chan struct{} // closed when done: stops the monitor
	arm  *time.Timer   // sets the loss watch after Options.LossWatchDelay (see Locker.watchNode)
}

var _ cohort.Hold = (*node)(nil)

// Base is the key node's pzxid when our node became the lowest.
func (n *node) Base() uint64 { return n.base }

// Done closes on a disconnect, on expiry, or when the node is deleted
// underneath us.
func (n *node) Done() <-chan struct{} { return n.loss.Done() }

// AfterFunc runs f once Done closes (the cohort's loss watch).
func (n *node) AfterFunc(f func()) func() bool { return n.loss.AfterFunc(f) }

// Err is why the node was lost.
func (n *node) Err() error {
	n.l.mu.Lock()
	defer n.l.mu.Unlock()
	return n.lost
}

// Passable: the node may serve another lease only while it was not lost
// and the session that created it is the current one and established (a
// listing proves a node lowest only in its own session).
func (n *node) Passable() bool {
	l := n.l
	l.mu.Lock()
	defer l.mu.Unlock()
	return n.lost == nil && !n.done && !l.closed && l.sess.Alive(n.inc)
}

// Release deletes the node, which wakes the next process. If the node was
// lost, its deletion is under way already (or waits for the session to
// come back) and Release reports lock.ErrNotHeld. If the delete cannot be
// confirmed (ctx done, server unreachable) the error wraps
// lock.ErrUnavailable and the node is deleted as soon as the session is
// back (or goes with the session if it expires).
func (n *node) Release(ctx context.Context) error {
	l := n.l
	l.mu.Lock()
	if n.lost != nil {
		l.mu.Unlock()
		return fmt.Errorf("%w: %w", lock.ErrNotHeld, n.lost)
	}
	l.detachLocked(n)
	l.mu.Unlock()

	path := n.path
	for lostReply := false; ; lostReply = true {
		err := n.deleteOnce(ctx, path)
		switch {
		case err == nil:
			l.forget(path)
			return nil
		case errors.Is(err, zk.ErrNoNode) && lostReply && l.sess.Alive(n.inc):
			// The first delete's reply was lost with the connection,
			// and the session that owned the node never ended: the
			// node is gone because that delete went through.
			l.forget(path)
			return nil
		case errors.Is(err, zk.ErrNoNode):
			l.forget(path)
			return fmt.Errorf("%w: lock node deleted before release", lock.ErrNotHeld)
		case ctx.Err() != nil:
			// The delete is still in flight; its late result is handled
			// by deleteOnce.
			return fmt.Errorf("%w: release not confirmed: %w", lock.ErrUnavailable, ctx.Err())
		case errors.Is(err, zk.ErrConnectionClosed) && l.sess.Await(ctx) == nil && l.sess.Alive(n.inc):
			// The connection dropped under the delete and came back to
			// the same session: the node is still ours to delete (or was
			// deleted, which the next try tells). Without this a blip of
			// a busy machine would leave the next holder waiting for the
			// orphan sweep.
			continue
		default:
			if !errors.Is(err, lock.ErrClosed) {
				l.orphan(path)
			}
			if !l.sess.Alive(n.inc) && errors.Is(err, zk.ErrConnectionClosed) {
				return fmt.Errorf("%w: session ended during release: %w", lock.ErrNotHeld, err)
			}
			return fmt.Errorf("%w: release failed: %w", lock.ErrUnavailable, err)
		}
	}
}

// deleteOnce makes one delete of path; a result that comes after ctx ended
// settles the bookkeeping (forgotten if deleted, orphaned otherwise).
func (n *node) deleteOnce(ctx context.Context, path string) error {
	l := n.l
	_, err := zksess.Do(ctx, l.sess, func() (struct{}, error) {
		return struct{}{}, l.conn.Delete(path, -1)
	}, func(_ struct{}, err error) {
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			l.forget(path)
		} else {
			l.orphan(path)
		}
	})
	return err
}

// detachLocked marks n given up and stops its monitor. It reports false if
// n was given up already.
func (l *Locker) detachLocked(n *node) bool {
	if n.done {
		return false
	}
	n.done = true
	delete(l.held, n)
	if n.arm != nil {
		n.arm.Stop()
	}
	if n.stop != nil {
		close(n.stop)
	}
	return true
}

// dropNodeLocked detaches n and deletes it once l.mu is released.
func (l *Locker) dropNodeLocked(n *node) {
	if l.detachLocked(n) {
		l.pending = append(l.pending, n.path)
	}
}

// loseNodeLocked ends a held node as lost: Done closes, the cohort ends
// the lease on it and lets the next local waiter queue a new node, and the
// node is deleted.
func (l *Locker) loseNodeLocked(n *node, err error) {
	if n.done {
		return
	}
	n.lost = err
	l.dropNodeLocked(n)
	n.loss.Close(err)
}

// unlock releases l.mu, then deletes the nodes queued by dropNodeLocked
// (a request must not be made while holding the mutex).
func (l *Locker) unlock() {
	paths := l.pending
	l.pending = nil
	l.mu.Unlock()
	for _, p := range paths {
		l.deleteNode(p)
	}
}

// DefaultLossWatchDelay is how long a node is held, by default, before
// watchNode sets the watch that sees it deleted underneath us. A deletion
// before that is seen then, when the watch is set; most flash-sale holds
// end sooner and cost no watch at all.
const DefaultLossWatchDelay = 5 * time.Millisecond

// watchNode sets an exists-watch on a held node, Options.LossWatchDelay
// into the hold, and monitors it until the node is given up; a node found gone, or
// that cannot be watched, is lost.
func (l *Locker) watchNode(n *node) {
	done, ok := l.g.Add()
	if !ok {
		return // closing: Close ends every hold
	}
	defer done()
	l.mu.Lock()
	given := n.done
	l.mu.Unlock()
	if given {
		return
	}
	exists, _, watch, err := l.conn.ExistsW(n.path)
	if err == nil && exists {
		l.monitor(n, watch)
		return
	}
	reason := "lock node deleted"
	if err != nil {
		reason = fmt.Sprintf("cannot watch lock node: %v", err)
	}
	l.mu.Lock()
	l.loseNodeLocked(n, fmt.Errorf("%w: %s", lock.ErrLost, reason))
	l.unlock()
}

// monitor loses n when it disappears underneath us (deleted by an operator,
// or the session expired: the watch is then invalidated), until n is given
// up. watch is an exists-watch on n.
// Session suspension is handled by Locker.watchSession for all nodes at once.
func (l *Locker) monitor(n *node, watch <-chan zk.Event) {
	var ev zk.Event
	select {
	case ev = <-watch:
	case <-n.stop:
		return // released or lost already
	}
	var reason string
	switch ev.Type {
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
}
