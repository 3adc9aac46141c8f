package etcdlock

import (
	"context"
	"testing"
	"time"

	"seckill/internal/lock"
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

// Passable refuses a hold whose validity lapsed, or is within the pass
// margin, whatever else allows it: it never gets to the session checks.
func TestPassableRefusesLapsedHold(t *testing.T) {
	l := &Locker{life: context.Background(), passMargin: 200 * time.Millisecond}
	for _, left := range []time.Duration{-time.Millisecond, 0, 100 * time.Millisecond, 200 * time.Millisecond} {
		until := time.Now().Add(left)
		o := &ownership{l: l, validUntil: func() time.Time { return until }, lost: lock.NewSignal()}
		if o.Passable() {
			t.Errorf("Passable with %v of validity left and a 200ms margin = true, want false", left)
		}
	}
}
