package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// combine.go: request combining (ServiceConfig.Combine).
//
// Per segment, at most one request of this process is the gatherer: the one
// acquiring the lock. Requests that arrive meanwhile queue behind it and
// take no lock. Once the gatherer holds the lock it takes up to CombineMax-1
// of them as its batch, hands the gatherer's role to the first request left
// in the queue (or to the next one to arrive), and runs one critical
// section for the whole batch. So the next gatherer is already waiting for
// the lock while this batch is written — a lock with a local queue (the
// cohort) passes it on in memory — and a request that finds no gatherer
// becomes one at once: uncontended, combining costs two mutex sections and
// no waiting.
//
// No goroutine is started. A queued request waits on its own channel or
// its context: cancelled while still queued, it leaves the queue; once taken
// into a batch it waits for the batch's answer, which comes within the
// section's own bounds (work delay, confirm deadline), and so does the
// gatherer's: a batch with other members runs detached from the
// gatherer's cancellation, since they are owed an answer.

// combiner is one segment's queue of requests waiting for its gatherer.
type combiner struct {
	max int // CombineMax

	mu        sync.Mutex
	gathering bool      // a request is acquiring the lock for the next batch
	queue     []*waiter // requests behind it, in arrival order
}

// waiter is one queued request.
type waiter struct {
	buyer Buyer
	since time.Time    // when it arrived: its lock wait is bounded from then
	done  chan outcome // buffered 1; receives exactly one outcome
}

// outcome is what a queued request is told: to gather the next batch, or
// its answer from a batch.
type outcome struct {
	lead bool
	sale Sale
	err  error
}

// errBatchAbandoned answers the members of a batch whose gatherer panicked.
var errBatchAbandoned = errors.New("stock: combined sale abandoned by its gatherer")

// combined sells one unit of seg, combined with the requests queued with it.
func (s *Service) combined(ctx context.Context, seg *segment, b Buyer, since time.Time, gen *bellGen) (Sale, error) {
	c := seg.comb
	c.mu.Lock()
	if !c.gathering {
		c.gathering = true
		c.mu.Unlock()
		return s.gather(ctx, seg, b, since, gen)
	}
	w := &waiter{buyer: b, since: since, done: make(chan outcome, 1)}
	c.queue = append(c.queue, w)
	c.mu.Unlock()

	var o outcome
	select {
	case o = <-w.done:
	case <-gen.done():
		if c.leave(w) {
			return Sale{}, errRung
		}
		o = <-w.done // taken into a batch just before: it answers
	case <-ctx.Done():
		if c.leave(w) {
			return Sale{}, fmt.Errorf("stock: sale abandoned while queued for the lock: %w", ctx.Err())
		}
		// Taken into a batch (or made the gatherer) just before: the
		// outcome is on its way, within the section's bounds.
		o = <-w.done
	}
	if o.lead {
		// A cancelled ctx makes gather's acquire fail at once, and the role
		// passes on.
		return s.gather(ctx, seg, b, since, gen)
	}
	return o.sale, o.err
}

// gather acquires seg's lock, takes the queued requests as its batch and
// sells to all of them in one critical section, its own buyer b first.
func (s *Service) gather(ctx context.Context, seg *segment, b Buyer, since time.Time, gen *bellGen) (Sale, error) {
	c := seg.comb
	taken := false
	defer func() {
		// A failed acquire (or a panicking Locker) hands the role on: the
		// next request tries for itself, within its own wait bound.
		if !taken {
			c.pass()
		}
	}()
	lease, err := s.acquire(ctx, seg, since, gen)
	if err != nil {
		return Sale{}, err
	}
	defer s.release(ctx, lease)
	members := c.take()
	taken = true
	if len(members) == 0 {
		bt := s.section(ctx, seg, lease, []Buyer{b})
		return bt.answer(0)
	}
	answered := 0
	defer func() {
		// Only a panic in the section leaves members unanswered; they must
		// not wait forever for it.
		for _, w := range members[answered:] {
			w.done <- outcome{err: errBatchAbandoned}
		}
	}()
	if s.cfg.OnLockWait != nil {
		for _, w := range members {
			s.cfg.OnLockWait(time.Since(w.since))
		}
	}
	buyers := make([]Buyer, 1, 1+len(members))
	buyers[0] = b
	for _, w := range members {
		buyers = append(buyers, w.buyer)
	}
	bt := s.section(context.WithoutCancel(ctx), seg, lease, buyers)
	for i, w := range members {
		sale, err := bt.answer(1 + i)
		w.done <- outcome{sale: sale, err: err}
		answered++
	}
	return bt.answer(0)
}

// take removes up to max-1 queued requests as the holder's batch, and hands
// the gatherer's role on.
func (c *combiner) take() []*waiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.queue), c.max-1)
	members := slices.Clone(c.queue[:n])
	c.queue = slices.Delete(c.queue, 0, n)
	c.promote()
	return members
}

// pass hands the gatherer's role on without taking a batch.
func (c *combiner) pass() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.promote()
}

// promote makes the first queued request the gatherer, or leaves the role
// to the next to arrive. c.mu must be held.
func (c *combiner) promote() {
	if len(c.queue) == 0 {
		c.gathering = false
		return
	}
	w := c.queue[0]
	c.queue = slices.Delete(c.queue, 0, 1)
	w.done <- outcome{lead: true}
}

// leave removes w from the queue, reporting whether it was still there.
func (c *combiner) leave(w *waiter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.queue, w)
	if i < 0 {
		return false
	}
	c.queue = slices.Delete(c.queue, i, i+1)
	return true
}

// Queued is how many requests wait in segment i's combining queue (0
// without combining): what the batch forming now will hold, besides the
// request gathering it. Tests line buyers up by it without sleeping.
func (s *Service) Queued(i int) int {
	c := s.segs[i].comb
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// Gathering reports whether a request of segment i is acquiring its lock
// for the next batch.
func (s *Service) Gathering(i int) bool {
	c := s.segs[i].comb
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gathering
}
