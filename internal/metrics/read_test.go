package metrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"seckill/internal/metrics"
)

const sample = `# TYPE seckill_reduce_total counter
seckill_reduce_total{replica="a",result="sold"} 21
seckill_reduce_total{replica="a",result="fenced"} 2
seckill_reduce_total{replica="b",result="fenced"} 1
# TYPE go_goroutines gauge
go_goroutines 12
# TYPE etcd_disk_wal_fsync_duration_seconds histogram
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 3
etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} 5
etcd_disk_wal_fsync_duration_seconds_sum 0.25
etcd_disk_wal_fsync_duration_seconds_count 5
`

// One reader for every scrape: sums by labels, a lone value, a histogram's
// count and sum, and "no such series" told apart from 0.
func TestFamilies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(sample))
	}))
	defer srv.Close()
	fams, err := metrics.Scrape(t.Context(), nil, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
		ok     bool
	}{
		{"seckill_reduce_total", map[string]string{"result": "fenced"}, 3, true},
		{"seckill_reduce_total", map[string]string{"result": "fenced", "replica": "b"}, 1, true},
		{"seckill_reduce_total", nil, 24, true},
		{"seckill_reduce_total", map[string]string{"result": "busy"}, 0, false},
		{"go_goroutines", nil, 12, true},
		{"etcd_disk_wal_fsync_duration_seconds", nil, 5, true},
		{"no_such_series", nil, 0, false},
	} {
		if got, ok := fams.Sum(tc.name, tc.labels); got != tc.want || ok != tc.ok {
			t.Errorf("Sum(%s, %v) = %v, %v; want %v, %v", tc.name, tc.labels, got, ok, tc.want, tc.ok)
		}
	}
	if sum, ok := fams.HistogramSum("etcd_disk_wal_fsync_duration_seconds"); sum != 0.25 || !ok {
		t.Errorf("HistogramSum = %v, %v; want 0.25", sum, ok)
	}
	if _, err := metrics.Parse(strings.NewReader("not { prometheus\n")); err == nil {
		t.Error("Parse accepted garbage")
	}
	down := httptest.NewServer(http.NotFoundHandler())
	defer down.Close()
	if _, err := metrics.Scrape(t.Context(), nil, down.URL); err == nil {
		t.Error("Scrape of a 404 succeeded")
	}
}

const batches = `# TYPE seckill_sale_batch_size histogram
seckill_sale_batch_size_bucket{le="1"} %d
seckill_sale_batch_size_bucket{le="2"} %d
seckill_sale_batch_size_bucket{le="4"} %d
seckill_sale_batch_size_bucket{le="+Inf"} %d
seckill_sale_batch_size_sum %d
seckill_sale_batch_size_count %d
`

// A histogram read from two scrapes: what was observed in between, summed
// over two processes, with its mean and the bucket of its quantiles.
func TestHistBetweenScrapes(t *testing.T) {
	parse := func(cum1, cum2, cum4, count, sum int) metrics.Hist {
		t.Helper()
		fams, err := metrics.Parse(strings.NewReader(fmt.Sprintf(batches, cum1, cum2, cum4, count, sum, count)))
		if err != nil {
			t.Fatal(err)
		}
		return fams.Histogram("seckill_sale_batch_size")
	}
	// Process a: 10 batches of 1 before; then 2 more of 1 and 4 of 4.
	a := parse(12, 12, 16, 16, 12+16).Sub(parse(10, 10, 10, 10, 10))
	// Process b: nothing before (a restart); then 2 of 2.
	b := parse(0, 2, 2, 2, 4).Sub(metrics.Hist{})
	h := a.Add(b)
	if h.Count != 8 || h.Sum != 22 || h.Mean() != 22.0/8 {
		t.Fatalf("count %d sum %v mean %v; want 8, 22, 2.75", h.Count, h.Sum, h.Mean())
	}
	for q, want := range map[float64]float64{0.25: 1, 0.5: 2, 0.99: 4} {
		if got := h.Quantile(q); got != want {
			t.Errorf("Quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if got := (metrics.Hist{}).Quantile(0.99); got != 0 {
		t.Errorf("no samples: Quantile = %v, want 0", got)
	}
}
