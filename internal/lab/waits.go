package lab

import (
	"context"
	"fmt"
	"time"
)

// A cell waits in one of three ways, and each has a name of its own, so a
// scenario cannot turn a must-happen event into a race against the clock
// by writing a number:
//
//   - x.until(): an event that must happen (a sale after the fault, a
//     502 for the killed request, a replica ready again). It is bounded
//     only by the cell's deadline: on a loaded machine it comes late, not
//     never, and late is measured (x.expect), not failed.
//   - x.mustNotWithin(d): the check is that something does not happen
//     within d (a stuck lock: no sale in the recovery window). Under load
//     the window only gets emptier, so a short d cannot flake.
//   - x.forNote(d): an observation that feeds a note and judges nothing.
//
// A fault scheduled at a time (a window's end) waits with x.at(t): there
// the time is the event.
//
// The speed of a recovery is the benchmark's and the lab report's to
// show (Result.Slow), never a failure: a test that fails on wall-clock
// speed fails on a busy machine.

// CellDeadline bounds a whole cell when the caller's context has no
// earlier deadline: it is what every must-happen wait runs up against, so
// a cell that cannot recover fails in minutes rather than hanging its test
// binary. No correct cell comes near it (the longest take ~1 min).
const CellDeadline = 5 * time.Minute

// until is the context of a must-happen wait: the cell's own.
func (x *run) until() (context.Context, context.CancelFunc) {
	return context.WithCancel(x.ctx)
}

// mustNotWithin is the context of a wait whose passing outcome is that
// nothing happened within d.
func (x *run) mustNotWithin(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(x.ctx, d)
}

// forNote is the context of a wait that only feeds a note.
func (x *run) forNote(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(x.ctx, d)
}

// at waits until t, when a fault is scheduled (the event is the time
// itself), and reports false if the cell ended first.
func (x *run) at(t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-x.ctx.Done():
		return false
	}
}

// expect records, as slow, an event that came later than a correct
// backend on an idle machine would bring it: what is the event, when its
// clock started, when it came, and the expected bound.
func (x *run) expect(what string, from, at time.Time, bound time.Duration) {
	if took := at.Sub(from); took > bound {
		x.slow = append(x.slow, fmt.Sprintf("%s after %dms, expected within %v", what, took.Milliseconds(), bound))
	}
}

// recovers reports whether a cell of this expectation must sell again
// after its fault: a correct backend's, and the failover controls' (they
// may lose sales, not the service).
func recovers(e Expect) bool {
	return e == ExpectSafe || e == ExpectMayLose || e == ExpectLoss
}
