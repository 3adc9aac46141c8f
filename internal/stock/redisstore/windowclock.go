package redisstore

import (
	"time"
)

// WindowClock is what a windowed sale's scripts check the stock Redis's
// clock against (window.lua): this process's clock, sent with every call,
// and how far apart the two may be. Within MaxSkew a sale moves the
// window's high-water clock and end latch; beyond it they stay, and a
// decision at an edge, where the clocks disagree, is refused
// (ErrClockSkew). It assumes this process's clock is within MaxSkew of
// true time (stockd checks it against the primary's at start and in
// /readyz): with every process's clock off the same way, a primary that
// agrees with them moves the window as they do.
type WindowClock struct {
	Now     func() time.Time // default time.Now
	MaxSkew time.Duration    // stock.max_clock_skew; 0: not checked
}

func (c WindowClock) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// WithWindowClock returns a store over the same client, keys, acks and
// witness whose windowed sales check Redis's clock against c.
func (s *Store) WithWindowClock(c WindowClock) *Store {
	n := s.WithReplicaAcks(s.acks)
	for _, seg := range n.segs {
		seg.clock = c
	}
	return n
}
