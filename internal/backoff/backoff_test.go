package backoff

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

const ms = time.Millisecond

func nexts(b *Backoff, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = b.Next()
	}
	return out
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNextDoublesUpToMax(t *testing.T) {
	b := Backoff{Initial: 50 * ms, Max: 2 * time.Second}
	want := []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms}
	if got := nexts(&b, len(want)); !equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// A cap that is not a power-of-two multiple of Initial is reached exactly,
// not skipped over.
func TestNextStopsAtAnUnevenCap(t *testing.T) {
	b := Backoff{Initial: 20 * ms, Max: 500 * ms}
	want := []time.Duration{20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 500 * ms, 500 * ms}
	if got := nexts(&b, len(want)); !equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestInitialAboveMaxIsCapped(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 200 * ms}
	want := []time.Duration{200 * ms, 200 * ms}
	if got := nexts(&b, len(want)); !equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestNoMaxKeepsDoublingWithoutWrapping(t *testing.T) {
	b := Backoff{Initial: 250 * ms}
	want := []time.Duration{250 * ms, 500 * ms, time.Second, 2 * time.Second}
	if got := nexts(&b, len(want)); !equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}

	huge := time.Duration(math.MaxInt64/2 + 1)
	b = Backoff{Initial: huge}
	for i, d := range nexts(&b, 3) {
		if d != huge {
			t.Errorf("delay %d past the largest Duration: got %v, want it to stay at %v", i, d, huge)
		}
	}
}

func TestResetStartsOver(t *testing.T) {
	b := Backoff{Initial: 10 * ms, Max: 200 * ms}
	nexts(&b, 5)
	b.Reset()
	want := []time.Duration{10 * ms, 20 * ms}
	if got := nexts(&b, len(want)); !equal(got, want) {
		t.Errorf("after Reset: got %v, want %v", got, want)
	}
}

func TestZeroJitterIsExact(t *testing.T) {
	b := Backoff{Initial: 5 * ms, Max: 5 * ms}
	for range 100 {
		if d := b.Next(); d != 5*ms {
			t.Fatalf("got %v, want exactly 5ms", d)
		}
	}
}

// Each jittered delay lies within its share of the un-jittered one, the
// draws actually vary, and the growth underneath is not jittered.
func TestJitterBounds(t *testing.T) {
	for _, c := range []struct {
		jitter float64
		lo     float64 // lowest delay, as a fraction of the un-jittered one
	}{
		{0.5, 0.5},
		{0.2, 0.8},
		{1, 0},
		{3, 0}, // clamped to 1
	} {
		b := Backoff{Initial: 50 * ms, Max: 2 * time.Second, Jitter: c.jitter}
		plain := Backoff{Initial: 50 * ms, Max: 2 * time.Second}
		for round := range 20 {
			b.Reset()
			plain.Reset()
			for i := range 8 {
				d, full := b.Next(), plain.Next()
				lo := time.Duration(float64(full) * c.lo)
				if d < lo-1 || d > full {
					t.Fatalf("jitter %v, round %d, delay %d: got %v, want within [%v, %v]", c.jitter, round, i, d, lo, full)
				}
			}
		}

		b = Backoff{Initial: time.Second, Max: time.Second, Jitter: c.jitter}
		seen := map[time.Duration]bool{}
		for range 100 {
			seen[b.Next()] = true
		}
		if len(seen) < 2 {
			t.Errorf("jitter %v: 100 delays took %d value(s), want them to vary", c.jitter, len(seen))
		}
	}
}

func TestWaitSleepsAndAdvances(t *testing.T) {
	b := Backoff{Initial: ms, Max: time.Second}
	if err := b.Wait(context.Background()); err != nil {
		t.Fatalf("Wait on a live ctx: %v", err)
	}
	if d := b.Next(); d != 2*ms {
		t.Errorf("after one Wait, Next = %v, want 2ms", d)
	}
}

// Wait must end with its ctx, not with its delay: with an hour to wait, it
// returns at all only because the cancellation ended it.
func TestWaitEndsWithCtx(t *testing.T) {
	b := Backoff{Initial: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v, want context.Canceled", err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), ms)
	defer cancel()
	if err := b.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: got %v, want context.DeadlineExceeded", err)
	}
}

func TestSleepWithoutDelay(t *testing.T) {
	if err := Sleep(context.Background(), 0); err != nil {
		t.Errorf("no delay, live ctx: got %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("no delay, ended ctx: got %v, want context.Canceled", err)
	}
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("an hour, ended ctx: got %v, want context.Canceled", err)
	}
}
