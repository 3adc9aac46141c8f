package stock

import (
	"errors"
	"testing"
	"time"
)

// Nothing is shed before an interval is measured, and gaps with no queue
// are not measured: a flood after a quiet spell starts unshed.
func TestAdmissionLearnsOnlyUnderAQueue(t *testing.T) {
	var a admission
	t0 := time.Unix(0, 0)
	for range 100 {
		if err := a.enter(1, 0, time.Millisecond); err != nil {
			t.Fatalf("shed before any interval was measured: %v", err)
		}
	}
	// One request alone: acquisitions a minute apart are arrival gaps.
	var b admission
	for i := range 3 {
		if err := b.enter(1, 0, time.Second); err != nil {
			t.Fatal(err)
		}
		b.acquired(t0.Add(time.Duration(i)*time.Minute), time.Hour)
		b.leave()
	}
	if b.interval != 0 {
		t.Fatalf("measured %v from acquisitions without a queue", b.interval)
	}
}

// Under a queue the interval is measured, and a request whose wait would
// pass the bound is shed with that estimate; one per lock turn fewer is not.
func TestAdmissionShedsWhatCannotBeServedInTime(t *testing.T) {
	var a admission
	t0 := time.Unix(0, 0)
	for range 3 {
		if err := a.enter(1, 0, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	// The lock comes back every 10ms while 3 wait.
	for i := range 5 {
		a.acquired(t0.Add(time.Duration(i)*10*time.Millisecond), time.Second)
	}
	if a.interval != 10*time.Millisecond {
		t.Fatalf("interval %v, want 10ms", a.interval)
	}
	// A stall longer than the wait (a paused holder) is not the pace.
	a.acquired(t0.Add(time.Hour), time.Second)
	if a.interval != 10*time.Millisecond {
		t.Fatalf("a one-hour stall moved the interval to %v", a.interval)
	}
	// 3 here: a fourth waits 4 turns, 40ms.
	if err := a.enter(1, 0, 40*time.Millisecond); err != nil {
		t.Fatalf("40ms of queue within a 40ms wait was shed: %v", err)
	}
	err := a.enter(1, 0, 45*time.Millisecond)
	var be *BusyError
	if !errors.As(err, &be) || !errors.Is(err, ErrBusy) || be.RetryAfter != 50*time.Millisecond || be.Queued != 4 {
		t.Fatalf("got %v (%+v), want a BusyError of 4 queued, 50ms", err, be)
	}
	// Batches of 64 (combining) serve the same queue in one turn.
	if err := a.enter(64, 0, 45*time.Millisecond); err != nil {
		t.Fatalf("combined: shed %v", err)
	}
	if got := RetryAfterSeconds(err); got != 1 {
		t.Errorf("Retry-After of a 50ms estimate: %d, want 1", got)
	}
	if got := RetryAfterSeconds(&BusyError{RetryAfter: 2500 * time.Millisecond}); got != 3 {
		t.Errorf("Retry-After of 2.5s: %d, want 3", got)
	}
	if got := RetryAfterSeconds(ErrBusy); got != 1 {
		t.Errorf("Retry-After of a plain busy: %d, want 1", got)
	}
}

// The size bound holds before anything is measured, and counts the
// requests admitted, not the ones shed.
func TestAdmissionQueueBound(t *testing.T) {
	var a admission
	for i := range 3 {
		if err := a.enter(1, 3, time.Hour); err != nil {
			t.Fatalf("request %d of 3: %v", i+1, err)
		}
	}
	err := a.enter(1, 3, time.Hour)
	var be *BusyError
	if !errors.As(err, &be) || !be.Full || be.Queued != 3 {
		t.Fatalf("fourth: got %v, want a full-queue BusyError", err)
	}
	a.leave()
	if err := a.enter(1, 3, time.Hour); err != nil {
		t.Fatalf("after one left: %v", err)
	}
}
