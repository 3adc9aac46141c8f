package metrics

import (
	"context"
	"math"
	"time"
)

// SampleOrdersLag registers OrdersLag and sets it from lag every interval
// (and once at once) until ctx ends. Each read gets at most one interval.
// A failed read sets NaN rather than keeping the last value: a lag that
// stays flat because it cannot be read must not look like a caught-up
// consumer. It returns when ctx ends; run it in its own goroutine.
func (m *Metrics) SampleOrdersLag(ctx context.Context, interval time.Duration, lag func(context.Context) (int64, error)) {
	// The only possible error is an earlier call's registration of the
	// same gauge, which is then sampled into as well.
	_ = m.reg.Register(m.OrdersLag)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, interval)
		n, err := lag(sctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			m.OrdersLag.Set(math.NaN())
		default:
			m.OrdersLag.Set(float64(n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
