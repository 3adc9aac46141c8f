package stock

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Delay is the simulated business time spent inside the critical section,
// between reading and writing the stock. It widens the race window so that a
// missing or broken lock oversells visibly. Min == Max is a fixed delay; the
// zero Delay is none.
type Delay struct {
	Min, Max time.Duration
}

// ParseDelay parses "5ms" (fixed) or "2ms-10ms" (uniform in [min, max]).
// Both ends must be non-negative and min <= max.
func ParseDelay(s string) (Delay, error) {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), "-")
	min, err := time.ParseDuration(strings.TrimSpace(lo))
	if err != nil {
		return Delay{}, fmt.Errorf("delay %q: %w", s, err)
	}
	max := min
	if isRange {
		if max, err = time.ParseDuration(strings.TrimSpace(hi)); err != nil {
			return Delay{}, fmt.Errorf("delay %q: %w", s, err)
		}
	}
	d := Delay{Min: min, Max: max}
	if min < 0 || max < 0 {
		return Delay{}, fmt.Errorf("delay %q: must not be negative", s)
	}
	if min > max {
		return Delay{}, fmt.Errorf("delay %q: range start is after its end", s)
	}
	return d, nil
}

// Next draws one delay.
func (d Delay) Next() time.Duration {
	if d.Max <= d.Min {
		return d.Min
	}
	return d.Min + rand.N(d.Max-d.Min+1)
}

// String formats d the way ParseDelay reads it.
func (d Delay) String() string {
	if d.Min == d.Max {
		return d.Min.String()
	}
	return d.Min.String() + "-" + d.Max.String()
}

// FixedDelay is a Delay of exactly d.
func FixedDelay(d time.Duration) Delay { return Delay{Min: d, Max: d} }
