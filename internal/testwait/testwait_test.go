package testwait

import (
	"context"
	"testing"
	"time"
)

// Until ends before the binary's deadline, by at most the margin.
func TestUntilEndsBeforeTheDeadline(t *testing.T) {
	want, ok := t.Deadline()
	if !ok {
		t.Skip("no -timeout: nothing to end before")
	}
	got, ok := Until(t).Deadline()
	if !ok {
		t.Fatal("Until has no deadline")
	}
	if margin := want.Sub(got); margin < 0 || margin > maxMargin {
		t.Fatalf("Until ends %v before the binary's deadline, want within [0, %v]", margin, maxMargin)
	}
}

// noDeadline is a testing.TB that cannot say its deadline.
type noDeadline struct{ testing.TB }

// Without a deadline to go by, Until ends NoDeadline from now, less the
// margin.
func TestUntilWithoutADeadline(t *testing.T) {
	start := time.Now()
	got, ok := Until(noDeadline{t}).Deadline()
	if !ok {
		t.Fatal("Until has no deadline")
	}
	if left := got.Sub(start); left < NoDeadline-maxMargin-time.Second || left > NoDeadline {
		t.Fatalf("Until ends %v from now, want about %v", left, NoDeadline-maxMargin)
	}
}

// The test's cleanup cancels it, and a cleanup may still wait on one.
func TestUntilEndsWithTheTest(t *testing.T) {
	var (
		ctx               context.Context
		inTest, inCleanup error
	)
	t.Run("sub", func(t *testing.T) {
		ctx = Until(t)
		t.Cleanup(func() { inCleanup = Until(t).Err() })
		inTest = ctx.Err()
		t.Cleanup(func() {
			if ctx.Err() != nil {
				t.Error("cancelled before the cleanups registered after it ran")
			}
		})
	})
	if inTest != nil || inCleanup != nil {
		t.Fatalf("Until ended early: in the test %v, in a cleanup %v", inTest, inCleanup)
	}
	if ctx.Err() == nil {
		t.Fatal("Until not cancelled once its test ended")
	}
}

// MustNotWithin fires once d has passed.
func TestMustNotWithin(t *testing.T) {
	start := time.Now()
	select {
	case <-MustNotWithin(10 * time.Millisecond):
	case <-Until(t).Done():
		t.Fatal("MustNotWithin(10ms) never fired")
	}
	if took := time.Since(start); took < 10*time.Millisecond {
		t.Fatalf("MustNotWithin(10ms) fired after %v", took)
	}
}
