package etcdlock

import (
	"testing"
	"time"
)

func TestPassable(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name   string
		until  time.Time
		margin time.Duration
		want   bool
	}{
		{"plenty left", now.Add(2 * time.Second), 500 * time.Millisecond, true},
		{"just over the margin", now.Add(500*time.Millisecond + 1), 500 * time.Millisecond, true},
		{"exactly the margin", now.Add(500 * time.Millisecond), 500 * time.Millisecond, false},
		{"lapsed", now.Add(-time.Millisecond), 0, false},
		{"lapsing now", now, 0, false},
		{"unknown session", time.Time{}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := passable(now, tc.until, tc.margin); got != tc.want {
				t.Errorf("passable(now, now%+v, %v) = %v, want %v", tc.until.Sub(now), tc.margin, got, tc.want)
			}
		})
	}
}

// reusable refuses a hold whose validity lapsed whatever else allows it
// (no hand-over made yet, cohorts on), and before looking at the session.
func TestReusableRefusesLapsedHold(t *testing.T) {
	now := time.Unix(1000, 0)
	until := now.Add(time.Second)
	o := &ownership{closed: func() bool { return false }, validUntil: func() time.Time { return until }, lost: make(chan struct{})}
	if o.reusable(DefaultLocalHandoffs, now.Add(time.Second), 0) {
		t.Fatal("reusable at the validity's end = true, want false")
	}
	if o.reusable(DefaultLocalHandoffs, now.Add(900*time.Millisecond), 200*time.Millisecond) {
		t.Fatal("reusable with 100ms left and a 200ms margin = true, want false")
	}
}
