package etcdsess

import (
	"testing"
	"time"
)

func TestValidUntilArithmetic(t *testing.T) {
	sent := time.Unix(1000, 0)
	for _, tc := range []struct {
		ttl  time.Duration
		want time.Duration // after sent
	}{
		{10 * time.Second, 10*time.Second - 100*time.Millisecond}, // 1% drift margin
		{2 * time.Second, 2*time.Second - 20*time.Millisecond},
		{time.Second, time.Second - 10*time.Millisecond}, // 10ms floor
	} {
		if got := validUntil(sent, tc.ttl).Sub(sent); got != tc.want {
			t.Errorf("validUntil(sent, %v) = sent+%v, want sent+%v", tc.ttl, got, tc.want)
		}
	}
}

// A reply to an older keep-alive (sent earlier) never shortens the validity.
func TestValidityOnlyGrows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	v := &validity{until: t0.Add(5 * time.Second)}
	v.extend(t0.Add(3 * time.Second))
	if got := v.get().Sub(t0); got != 5*time.Second {
		t.Fatalf("after an older reply, validity = t0+%v, want t0+5s", got)
	}
	v.extend(t0.Add(7 * time.Second))
	if got := v.get().Sub(t0); got != 7*time.Second {
		t.Fatalf("after a newer reply, validity = t0+%v, want t0+7s", got)
	}
}
