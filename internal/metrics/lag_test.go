package metrics_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"seckill/internal/metrics"
)

// gauge reads seckill_orders_lag; ok is false when it is not exported.
func gauge(t *testing.T, m *metrics.Metrics) (v float64, ok bool) {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "seckill_orders_lag" {
			return f.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func TestSampleOrdersLag(t *testing.T) {
	m := metrics.New(prometheus.Labels{"replica": "r"})
	if _, ok := gauge(t, m); ok {
		t.Fatal("seckill_orders_lag exported before sampling started: a replica without durable orders would show lag 0")
	}
	type answer struct {
		n   int64
		err error
	}
	// Each read announces itself and waits for the test's go-ahead, so
	// while read n+1 waits the gauge holds read n's value.
	script := []answer{{7, nil}, {0, errors.New("redis down")}, {3, nil}, {3, nil}}
	calls, release := make(chan int), make(chan struct{})
	i := 0 // only the sampler's goroutine touches it
	lag := func(ctx context.Context) (int64, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("lag read without a deadline")
		}
		a := script[min(i, len(script)-1)]
		select {
		case calls <- i:
			<-release
		case <-ctx.Done():
		}
		i++
		return a.n, a.err
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); m.SampleOrdersLag(ctx, time.Millisecond, lag) }()

	want := []func(float64) bool{
		func(v float64) bool { return v == 7 },
		math.IsNaN, // a failed read is not a lag of 0, nor the last value
		func(v float64) bool { return v == 3 },
	}
	<-calls
	release <- struct{}{}
	for n, ok := range want {
		<-calls // read n+1 waits: read n's value is set
		v, exported := gauge(t, m)
		if !exported || !ok(v) {
			t.Fatalf("after read %d (%+v): got seckill_orders_lag %v (exported %v)", n, script[n], v, exported)
		}
		release <- struct{}{}
	}
	cancel()
	close(release)
	<-done // SampleOrdersLag returns once ctx ends: no goroutine left behind
}
