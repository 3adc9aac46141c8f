package redislock

import (
	"sync"
	"time"

	"seckill/internal/lock"
)

// cohort is one key's state inside one Locker: the Redis lock it holds (if
// any), whether a goroutine is talking to Redis for it, and the goroutines
// waiting in this process, in arrival order. All fields are guarded by
// Locker.cmu.
//
// Invariants: hold != nil and busy are never both true; a non-empty queue
// implies one of them, so a waiter is always woken by whoever holds the lock
// or talks to Redis (the lock-or-Redis role is handed on, never dropped).
type cohort struct {
	key  string
	k    keys
	hold *hold // the Redis lock this Locker holds for key, if any
	// busy: one goroutine is acquiring or releasing the Redis lock for key;
	// when it is done it hands the role to the front waiter.
	busy       bool
	head, tail *waiter
	waiting    int
	// floor is the smallest fencing counter a hold may be passed on with:
	// AdvanceTokens raises it, so that no acquisition starting after the
	// advance gets a token of a hold from before it.
	floor uint64
}

// waiters recycles waiter structs and their channels: one is needed per
// wait, and under contention almost every acquisition waits.
var waiters = sync.Pool{New: func() any { return &waiter{ch: make(chan *lease, 1)} }}

// waiter is one goroutine queued in a cohort. It goes back to the pool once
// it is off the queue and its one value has been received.
type waiter struct {
	// ch receives exactly one value: a lease passed in memory, or nil, which
	// means "your turn to acquire it from Redis".
	ch         chan *lease
	prev, next *waiter
	queued     bool
}

func (c *cohort) push(w *waiter) {
	w.queued = true
	w.prev = c.tail
	if c.tail != nil {
		c.tail.next = w
	} else {
		c.head = w
	}
	c.tail = w
	c.waiting++
}

func (c *cohort) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		c.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		c.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	c.waiting--
}

// pop takes the front waiter off the queue, or returns nil.
func (c *cohort) pop() *waiter {
	w := c.head
	if w != nil {
		c.remove(w)
	}
	return w
}

// cohortLocked returns key's cohort, creating it. l.cmu must be held.
func (l *Locker) cohortLocked(key string) *cohort {
	c := l.cohorts[key]
	if c == nil {
		c = &cohort{key: key, k: keysFor(key)}
		l.cohorts[key] = c
	}
	return c
}

// dropIfIdleLocked forgets c once nothing refers to it. l.cmu must be held.
func (l *Locker) dropIfIdleLocked(c *cohort) {
	if c.hold == nil && !c.busy && c.head == nil && l.cohorts[c.key] == c {
		delete(l.cohorts, c.key)
	}
}

// handOnBusyLocked ends the caller's turn at Redis: the front waiter gets it
// (and contends, or releases a lease passed to it), or the role lapses.
// l.cmu must be held.
func (l *Locker) handOnBusyLocked(c *cohort) {
	if w := c.pop(); w != nil {
		w.ch <- nil // buffered; c stays busy on w's behalf
		return
	}
	c.busy = false
	l.dropIfIdleLocked(c)
}

// passLocked gives the held lock to the front local waiter without a Redis
// round trip, if the bound and the lock's validity allow it, and reports
// whether it did. from is the lease being released. l.cmu must be held.
//
// A pass never extends the lock: the next holder inherits the server
// acquisition's validity, which only a renewal moves.
func (l *Locker) passLocked(h *hold, from *lease, now time.Time) bool {
	c := h.c
	if c.head == nil || h.lost != nil || h.passes >= l.maxPasses || h.base < c.floor || h.validUntil.Sub(now) <= l.passMargin {
		return false
	}
	w := c.pop()
	h.passes++
	next := l.newLeaseLocked(h)
	from.end(lock.ErrReleased)
	l.localHandoffs.Add(1)
	w.ch <- next // buffered
	return true
}
