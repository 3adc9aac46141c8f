package cohort

import (
	"context"
	"sync"

	"seckill/internal/lock"
)

// queue is one key's local state. All fields are guarded by Locker.mu.
//
// Invariant: busy means a front exists: either hold is set (and lent to
// its current lease) or a goroutine is acquiring from the server. A
// non-empty FIFO implies busy, so whoever ends the front's turn wakes the
// next waiter: the role is handed on, never dropped.
type queue struct {
	key        string
	busy       bool
	hold       *held // the server hold lent to the current lease, if any
	head, tail *waiter
	waiting    int
}

// waiters recycles waiter structs and their channels: under contention
// almost every acquisition waits.
var waiters = sync.Pool{New: func() any { return &waiter{ch: make(chan *lease, 1)} }}

// waiter is one goroutine queued behind the front. It goes back to the
// pool once it is off the queue and its one value has been received.
type waiter struct {
	// ch receives exactly one value: a lease passed in memory, or nil,
	// which makes the waiter the front: it acquires from the server.
	ch         chan *lease
	prev, next *waiter
	queued     bool
}

func (q *queue) push(w *waiter) {
	w.queued = true
	w.prev = q.tail
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	q.waiting++
}

func (q *queue) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	q.waiting--
}

// pop takes the first waiter off the queue, or returns nil.
func (q *queue) pop() *waiter {
	w := q.head
	if w != nil {
		q.remove(w)
	}
	return w
}

// Acquire blocks until the lock for key is held or ctx is done. Goroutines
// of this Locker get it in arrival order. If ctx ends first the error wraps
// lock.ErrNotObtained and ctx.Err(); after Close it wraps lock.ErrClosed;
// a server failure wraps lock.ErrUnavailable.
func (c *Locker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, c.fail(ctx, key, err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, c.fail(ctx, key, lock.ErrClosed)
	}
	q := c.keys[key]
	if q == nil {
		q = &queue{key: key}
		c.keys[key] = q
	}
	if !q.busy {
		q.busy = true
		c.changedLocked() // WaitQueued(key, 0) waits for a front
		c.mu.Unlock()
		return c.contend(ctx, q)
	}
	w := waiters.Get().(*waiter)
	q.push(w)
	if c.obs != nil {
		c.obs.Queued(key)
	}
	c.changedLocked()
	c.mu.Unlock()

	var err error
	select {
	case g := <-w.ch:
		waiters.Put(w)
		if g != nil {
			return g, nil
		}
		return c.contend(ctx, q)
	case <-ctx.Done():
		err = ctx.Err()
	case <-c.life.Done():
		err = lock.ErrClosed
	}
	c.mu.Lock()
	if w.queued {
		q.remove(w)
		c.changedLocked()
		c.mu.Unlock()
		waiters.Put(w)
		return nil, c.fail(ctx, key, err)
	}
	c.mu.Unlock()
	// Our turn came as we gave up: pass it on, or everyone behind us
	// waits forever.
	g := <-w.ch
	waiters.Put(w)
	if g != nil {
		c.spawn(func() {
			ctx, cancel := context.WithTimeout(context.Background(), c.cleanup)
			defer cancel()
			_ = g.Release(ctx)
		})
	} else {
		c.mu.Lock()
		c.nextFrontLocked(q)
		c.mu.Unlock()
	}
	return nil, c.fail(ctx, key, err)
}

// contend acquires q's key from the server as its front.
func (c *Locker) contend(ctx context.Context, q *queue) (lock.Lease, error) {
	actx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.life, cancel)
	h, err := c.srv.Acquire(actx, q.key)
	stop()
	cancel()
	if _, minted := h.(Transferer); err == nil && !minted && h.Base() > MaxBase {
		c.spawn(func() { _ = c.giveBack(&held{h: h, q: q}) })
		err = errBaseOverflow
	}
	c.mu.Lock()
	if err == nil && c.closed {
		c.mu.Unlock()
		_ = c.giveBack(&held{h: h, q: q}) // inline: Close may be waiting already
		c.mu.Lock()
		err = lock.ErrClosed
	}
	if err != nil {
		c.nextFrontLocked(q)
		c.mu.Unlock()
		return nil, c.fail(ctx, q.key, err)
	}
	ls := c.grantLocked(c.holdLocked(q, h, 0)) // not closed, checked above
	c.mu.Unlock()
	return ls, nil
}

// nextFrontLocked ends the front's turn: the first waiter becomes the front
// and acquires from the server, or the key goes idle.
func (c *Locker) nextFrontLocked(q *queue) {
	if w := q.pop(); w != nil {
		w.ch <- nil // buffered
		c.changedLocked()
		return
	}
	q.busy = false
	if q.hold == nil && c.keys[q.key] == q {
		delete(c.keys, q.key)
		if c.obs != nil {
			c.obs.Idle(q.key)
		}
	}
}
