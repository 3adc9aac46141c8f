// Package testwait names the two ways a test may bound a wait, so that a
// test cannot turn an event that must happen into a race against the clock
// by writing a number.
//
//   - Until(t): an event that must happen (a failover, a reply, a lock
//     grant, a watch event). On a busy machine it comes late, not never, so
//     it takes no duration from the test: it is bounded only by the test
//     binary's deadline (go test -timeout), shortly before it, so that a
//     test that waits in vain fails with its own message rather than the
//     -timeout panic.
//   - MustNotWithin(d): the check is that something does not happen within
//     d (no sale within 300ms of the crash). Success is the timer firing;
//     under load the window only gets emptier, so a short d cannot flake.
//
// It is imported by tests only; internal/testrules refuses any other way for
// a test to bound a select with a timer. This is the tests' counterpart of
// internal/lab/waits.go.
package testwait

import (
	"context"
	"testing"
	"time"
)

// NoDeadline is how long Until waits when the test binary has no deadline
// (go test -timeout 0, or a testing.TB that cannot say): long enough for
// any must-happen event on a loaded machine, short enough that a wait in
// vain still ends.
const NoDeadline = 10 * time.Minute

// maxMargin is the most Until leaves between its end and the binary's
// deadline: time for the test to report its failure and clean up.
const maxMargin = 30 * time.Second

// Until is the context of a wait for an event that must happen. It ends
// shortly before the test binary's deadline (t.Deadline, where the TB has
// one; NoDeadline from now otherwise), leaving the smaller of 30s and 5% of
// the time left, and is cancelled by t.Cleanup. It does not derive from
// t.Context(), which is cancelled before cleanups run, so a cleanup may
// wait on it too.
//
//	select {
//	case <-switched:
//	case <-testwait.Until(t).Done():
//		t.Fatal("no failover")
//	}
//
// Each call registers a cleanup: in a loop, call it once before the loop.
func Until(t testing.TB) context.Context {
	t.Helper()
	deadline, ok := time.Time{}, false
	if d, has := t.(interface{ Deadline() (time.Time, bool) }); has {
		deadline, ok = d.Deadline()
	}
	if !ok {
		deadline = time.Now().Add(NoDeadline)
	}
	margin := max(0, min(maxMargin, time.Until(deadline)/20))
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(-margin))
	t.Cleanup(cancel)
	return ctx
}

// MustNotWithin is a wait whose passing outcome is that nothing happened
// within d: the test passes when the returned channel fires first. It is
// time.After(d); the name says which side of the select is the success.
//
//	select {
//	case <-sold:
//		t.Fatal("a sale after the crash")
//	case <-testwait.MustNotWithin(300 * time.Millisecond):
//	}
func MustNotWithin(d time.Duration) <-chan time.Time {
	return time.After(d)
}
