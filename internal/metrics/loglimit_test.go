package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestLogLimiter(t *testing.T) {
	m := New(prometheus.Labels{"replica": "r"})
	l := NewLogLimiter(m, time.Second)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }

	steps := []struct {
		kind           string
		advance        time.Duration
		wantOK         bool
		wantSuppressed int
	}{
		{"busy", 0, true, 0},
		{"busy", 100 * time.Millisecond, false, 0},
		{"busy", 100 * time.Millisecond, false, 0},
		{"admin", 0, true, 0}, // kinds are independent
		{"busy", time.Second, true, 2},
		{"busy", 0, false, 0},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		ok, n := l.Allow(s.kind)
		if ok != s.wantOK || n != s.wantSuppressed {
			t.Fatalf("step %d (%s): got %v, %d; want %v, %d", i, s.kind, ok, n, s.wantOK, s.wantSuppressed)
		}
	}
	var d dto.Metric
	if err := m.LogSuppressed.WithLabelValues("busy").Write(&d); err != nil {
		t.Fatal(err)
	}
	if got := d.GetCounter().GetValue(); got != 3 {
		t.Fatalf("got seckill_log_suppressed_total{kind=busy} %v, want 3", got)
	}
}
