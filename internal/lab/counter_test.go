package lab

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"seckill/internal/metrics"
)

// The pause check falls back on the replicas' own count of fenced answers
// when the buyer hung up first: the count must be the handler's series,
// summed over replicas, and a replica that cannot be read must not pass
// for a count of 0.
func TestCounterSum(t *testing.T) {
	var urls []string
	for i, fenced := range []int{2, 0, 1} {
		m := metrics.New(prometheus.Labels{"replica": fmt.Sprint("r", i)})
		for range fenced {
			m.Results.WithLabelValues("fenced").Inc()
		}
		m.Results.WithLabelValues("sold").Add(7)
		srv := httptest.NewServer(m.Handler())
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	ctx := context.Background()
	if got := counterSum(ctx, urls, "seckill_reduce_total", map[string]string{"result": "fenced"}); got != 3 {
		t.Errorf("fenced: got %d, want 3", got)
	}
	if got := counterSum(ctx, urls, "seckill_reduce_total", map[string]string{"result": "sold"}); got != 21 {
		t.Errorf("sold: got %d, want 21", got)
	}
	if got := counterSum(ctx, urls, "seckill_reduce_total", map[string]string{"result": "busy"}); got != 0 {
		t.Errorf("busy: got %d, want 0", got)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	if got := counterSum(ctx, append(urls, down.URL), "seckill_reduce_total", map[string]string{"result": "fenced"}); got != -1 {
		t.Errorf("with a replica down: got %d, want -1", got)
	}
}
