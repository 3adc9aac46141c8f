package zklock

import (
	"context"

	"seckill/internal/lock"
	"seckill/internal/zksess"
)

// The local half of the lock: per key, the goroutines of this process queue
// in FIFO order behind one "front" goroutine, and the process keeps at most
// one node in the key's ZooKeeper queue. Everything here is guarded by
// Locker.mu.

// cohort is one key's local state.
type cohort struct {
	key, dir string
	busy     bool      // a goroutine is at the front: it holds a lease or is queueing our node
	waiters  []*waiter // FIFO behind the front
	node     *node     // our node in the ZooKeeper queue; nil when none
}

// waiter is a goroutine queued locally behind the front.
type waiter struct {
	ready chan struct{} // closed when the waiter is made the front
	front bool
}

// node is one of our lock nodes. path, inc and c never change; the rest is
// guarded by Locker.mu.
type node struct {
	c    *cohort
	path string
	inc  zksess.Incarnation // the session that created it

	held   bool          // lowest in the queue: this process holds the lock
	base   uint64        // fencing base: pzxid<<16 of the listing that found it lowest
	grants int           // leases granted on it (the first by ZooKeeper, the rest passed locally)
	cur    *lease        // the lease holding it now; nil between two leases
	lost   error         // why it was lost, if it was
	done   bool          // no longer the cohort's node (released, lost or dropped)
	stop   chan struct{} // closed when done: stops the monitor
}

// enqueue joins key's local queue. It returns a nil waiter when the caller is
// the front at once.
func (l *Locker) enqueue(key, dir string) (*cohort, *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.cohorts[key]
	if c == nil {
		c = &cohort{key: key, dir: dir}
		l.cohorts[key] = c
	}
	if !c.busy {
		c.busy = true
		return c, nil
	}
	w := &waiter{ready: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	if l.onQueue != nil {
		l.onQueue(key, len(c.waiters))
	}
	return c, w
}

// awaitTurn waits until w is the front, ctx ends or the Locker closes. A
// waiter that gives up leaves the queue; if it was made the front meanwhile,
// it passes the front on.
func (l *Locker) awaitTurn(ctx context.Context, c *cohort, w *waiter) error {
	var err error
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-l.closing:
		err = lock.ErrClosed
	}
	l.mu.Lock()
	defer l.unlock()
	if w.front {
		l.nextFrontLocked(c)
		return err
	}
	for i, x := range c.waiters {
		if x == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			break
		}
	}
	return err
}

// nextFrontLocked is called when the front leaves (released, lost, or gave
// up): the first waiter becomes the front and inherits our node, whatever
// its state; with nobody waiting the cohort goes idle and its node, if any,
// is deleted.
func (l *Locker) nextFrontLocked(c *cohort) {
	if len(c.waiters) > 0 {
		w := c.waiters[0]
		c.waiters[0] = nil
		c.waiters = c.waiters[1:]
		w.front = true
		close(w.ready)
		return
	}
	c.busy = false
	if c.node != nil {
		l.dropNodeLocked(c.node)
	}
	if l.cohorts[c.key] == c {
		delete(l.cohorts, c.key)
	}
}

// detachLocked makes n no longer the cohort's node and stops its monitor.
// It reports false if n was detached already.
func (l *Locker) detachLocked(n *node) bool {
	if n.done {
		return false
	}
	n.done = true
	if n.c.node == n {
		n.c.node = nil
	}
	delete(l.held, n)
	close(n.stop)
	return true
}

// dropNodeLocked detaches n and deletes it once l.mu is released.
func (l *Locker) dropNodeLocked(n *node) {
	if l.detachLocked(n) {
		l.pending = append(l.pending, n.path)
	}
}

// loseNodeLocked ends a held node as lost: the lease on it (if any) closes
// Done with err and gives up the front, so the next local waiter queues a
// new node rather than waiting for a Release that may never come.
func (l *Locker) loseNodeLocked(n *node, err error) {
	if n.done {
		return
	}
	n.lost = err
	l.dropNodeLocked(n)
	if ls := n.cur; ls != nil {
		n.cur = nil
		if ls.sig.Close(err) {
			l.log.Warn("lock lost", "key", n.c.key, "node", n.path, "err", err)
		}
		l.nextFrontLocked(n.c)
	}
}

// grantLocked hands n's next lease to the front goroutine.
func (l *Locker) grantLocked(n *node) *lease {
	n.grants++
	ls := newLease(l, n, n.base|uint64(n.grants))
	n.cur = ls
	return ls
}

// passableLocked reports whether the releasing lease ls may pass n to the
// next local waiter without a ZooKeeper write: someone waits locally, n has
// served fewer than LocalHandoffs+1 leases, and n is still ours beyond doubt
// (the session that created it is established and never expired, lease not
// lost).
func (l *Locker) passableLocked(n *node, ls *lease) bool {
	return len(n.c.waiters) > 0 &&
		n.grants <= l.handoffs &&
		n.lost == nil && !n.done && !l.closed &&
		ls.sig.Err() == nil &&
		l.sess.Alive(n.inc)
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
