package stock

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// shed.go: a bounded queue for the lock, per segment and process.
//
// The queue is bounded twice. First by size (MaxQueue): the lock sells no
// faster for a longer queue — a few waiters per replica keep it busy, and
// with combining a batch's worth — while every request queued holds a
// connection through the proxy, whose connections are finite; past them
// the proxy drops buyers unanswered. Then by time, below.
//
// Before the sale sells out, a flood of buyers queues on the lock. A buyer
// the lock cannot serve within the wait timeout would hold its connection
// for the whole wait only to be told "busy", and enough of them exhaust
// the proxy's connections, which then drops buyers without an answer. So
// a buyer is shed at once — ErrBusy with a Retry-After — when the queue
// ahead of it in this process could not be served in time: with n
// requests of this process on the segment, each lock acquisition serving
// up to perLock of them (CombineMax with combining, else 1), and the lock
// coming back to this process every interval while it has a queue, the
// wait is about ceil(n/perLock) × interval.
//
// interval is measured, not configured: the time between this process's
// acquisitions while others of its requests were waiting, smoothed. It
// includes the other replicas' turns on the shared lock, so no replica
// needs to know how many there are. Gaps while the queue was empty are
// arrival gaps, not service, and are not sampled; so the start of a flood
// after a quiet spell is never shed on a stale, slow estimate. Until the
// first interval is measured nothing is shed.

// admission is one segment's queue bound in this process.
type admission struct {
	mu       sync.Mutex
	n        int           // requests of this process selling on the segment
	last     time.Time     // the last acquisition
	queued   bool          // others were waiting at the last acquisition
	interval time.Duration // smoothed time between acquisitions under a queue
}

// shedWeight is the weight of a new interval in the smoothed one: about
// the last ten acquisitions count.
const shedWeight = 0.1

// enter admits a request, or returns the *BusyError that sheds it: when
// maxQueue requests are already queued (0: no bound), or when the queue
// ahead of it could not be served within wait.
func (a *admission) enter(perLock, maxQueue int, wait time.Duration) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	turns := (a.n + perLock) / perLock // ceil((n+1)/perLock)
	est := time.Duration(turns) * a.interval
	switch {
	case maxQueue > 0 && a.n >= maxQueue:
		return &BusyError{Queued: a.n, RetryAfter: est, Wait: wait, Full: true}
	case a.interval > 0 && est > wait:
		return &BusyError{Queued: a.n, RetryAfter: est, Wait: wait}
	}
	a.n++
	return nil
}

// leave ends an admitted request.
func (a *admission) leave() {
	a.mu.Lock()
	a.n--
	a.mu.Unlock()
}

// acquired records an acquisition of the segment's lock at now. A gap
// longer than the wait timeout is a stall (a paused holder's lease running
// out), not the lock's pace, and is not sampled: the buyers queued through
// it timed out anyway, and counting it would shed the queue for long after.
func (a *admission) acquired(now time.Time, wait time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if d := now.Sub(a.last); a.queued && !a.last.IsZero() && d <= wait {
		if a.interval == 0 {
			a.interval = d
		} else {
			a.interval += time.Duration(shedWeight * float64(d-a.interval))
		}
	}
	a.last, a.queued = now, a.n > 1
}

// BusyError is a buyer shed before waiting for the lock: the queue ahead
// of it in this process could not be served within the wait timeout. It
// wraps ErrBusy; nothing was sold.
type BusyError struct {
	Queued     int           // requests of this process ahead of it
	RetryAfter time.Duration // the estimated wait: when a retry may be served (0: not yet measured)
	Wait       time.Duration // the wait timeout
	Full       bool          // the queue was at its bound (ServiceConfig.MaxQueue)
}

func (e *BusyError) Error() string {
	if e.Full {
		return fmt.Sprintf("%v: shed: the queue for the lock here is full (%d), about %s to serve",
			ErrBusy, e.Queued, e.RetryAfter.Round(time.Millisecond))
	}
	return fmt.Sprintf("%v: shed: %d queued here, about %s to serve, above the %s wait",
		ErrBusy, e.Queued, e.RetryAfter.Round(time.Millisecond), e.Wait)
}

func (e *BusyError) Unwrap() error { return ErrBusy }

// RetryAfterSeconds is the Retry-After a busy answer carries: the
// estimated wait of a shed buyer, rounded up, else 1 (a lock wait that ran
// out says nothing of when the queue clears); at most a minute.
func RetryAfterSeconds(err error) int {
	var be *BusyError
	if !errors.As(err, &be) {
		return 1
	}
	return int(min(60, max(1, math.Ceil(be.RetryAfter.Seconds()))))
}
