// Package backoff paces retries: delays that double from an initial value
// up to a cap, optionally jittered, and a sleep that ends with its context.
//
// A retry waits only where there is no event to wait on (a server that does
// not answer, a readiness probe from outside a process); the doubling keeps
// an outage from being hammered while a brief blip still costs little. The
// loops around it differ too much (what they select on, what they log, when
// they give up) for one retry function, so the package gives them the
// pacing and leaves the loop to them. It uses the standard library only and
// imports nothing from seckill, so any package can use it.
package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Backoff yields delays that double from Initial up to Max. The zero state
// starts at Initial; a Backoff is not safe for concurrent use (each retry
// loop owns one).
type Backoff struct {
	// Initial is the first delay; it should be positive.
	Initial time.Duration
	// Max caps the delay; zero or less means no cap.
	Max time.Duration
	// Jitter, from 0 to 1, is the fraction of each delay drawn at random:
	// the delay is d - Jitter*d + rand[0, Jitter*d], so that processes
	// that failed together do not retry in step. 0 (the default) waits
	// exactly d.
	Jitter float64

	next time.Duration // 0: start from Initial
}

// Next returns the next delay and grows the one after it.
func (b *Backoff) Next() time.Duration {
	d := b.next
	if d == 0 {
		d = b.Initial
	}
	if b.Max > 0 {
		d = min(d, b.Max)
	}
	switch {
	case d > math.MaxInt64/2:
		// Uncapped and doubled past what a Duration holds: stay put
		// rather than wrap to a negative delay.
		b.next = d
	case b.Max > 0:
		b.next = min(2*d, b.Max)
	default:
		b.next = 2 * d
	}
	if j := min(b.Jitter, 1); j > 0 && d > 0 {
		r := time.Duration(float64(d) * j)
		d = d - r + rand.N(r+1)
	}
	return d
}

// Reset starts the delays over from Initial, typically after a success.
func (b *Backoff) Reset() { b.next = 0 }

// Wait sleeps for Next, or returns ctx.Err() when ctx ends first.
func (b *Backoff) Wait(ctx context.Context) error {
	return Sleep(ctx, b.Next())
}

// Sleep waits d, or returns ctx.Err() when ctx ends first. It is Wait for a
// loop that takes the delay from Next itself (to log it before sleeping).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
