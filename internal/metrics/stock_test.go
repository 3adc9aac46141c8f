package metrics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"seckill/internal/metrics"
)

// values gathers the collectors' series by name, an item's as
// "name/item".
func values(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			key := f.GetName()
			for _, l := range s.GetLabel() {
				if l.GetName() == "item" {
					key += "/" + l.GetValue()
				}
			}
			switch {
			case s.GetGauge() != nil:
				out[key] = s.GetGauge().GetValue()
			case s.GetCounter() != nil:
				out[key] = s.GetCounter().GetValue()
			}
		}
	}
	return out
}

// Every scrape reads the counters anew, within its bound; a failed read
// drops the two gauges (never a stale number) and counts the failure,
// without failing the scrape.
func TestStockReadAtScrape(t *testing.T) {
	m := metrics.New(prometheus.Labels{"replica": "r"})
	stock, fail := int64(7), false
	var deadline time.Time
	m.RegisterStock(func(ctx context.Context) (int64, int64, error) {
		deadline, _ = ctx.Deadline()
		if fail {
			return 0, 0, errors.New("redis down")
		}
		return stock, 10 - stock, nil
	}, 200*time.Millisecond)

	before := time.Now()
	v := values(t, m)
	after := time.Now()
	if v["seckill_stock"] != 7 || v["seckill_lucky"] != 3 || v["seckill_stock_read_errors_total"] != 0 {
		t.Fatalf("first scrape: %v, want stock 7, lucky 3, 0 errors", v)
	}
	// The read's context was made during the scrape, with a 200ms bound.
	if deadline.Before(before.Add(200*time.Millisecond)) || deadline.After(after.Add(200*time.Millisecond)) {
		t.Fatalf("read's deadline %v after the scrape began, want 200ms after the read began", deadline.Sub(before))
	}
	stock = 2
	if v = values(t, m); v["seckill_stock"] != 2 || v["seckill_lucky"] != 8 {
		t.Fatalf("second scrape: %v, want the new values (stock 2, lucky 8), not cached ones", v)
	}
	fail = true
	v = values(t, m)
	if _, ok := v["seckill_stock"]; ok {
		t.Fatalf("scrape with Redis down exported seckill_stock %v, want no series", v["seckill_stock"])
	}
	if _, ok := v["seckill_lucky"]; ok || v["seckill_stock_read_errors_total"] != 1 {
		t.Fatalf("scrape with Redis down: %v, want no lucky and 1 read error", v)
	}
}

// The items' gauges: one series per item, labelled by it; a failed read
// exports none of them (never a stale number) and counts the failure.
func TestItemsReadAtScrape(t *testing.T) {
	m := metrics.New(prometheus.Labels{"replica": "r"})
	var fail bool
	m.RegisterItems(func(context.Context) ([]metrics.ItemCounts, error) {
		if fail {
			return nil, errors.New("redis down")
		}
		return []metrics.ItemCounts{{ID: "a", Stock: 3, Lucky: 7}, {ID: "b", Stock: 0, Lucky: 5}}, nil
	}, time.Minute) // a read that must answer: the bound is long
	v := values(t, m)
	for k, want := range map[string]float64{"seckill_item_stock/a": 3, "seckill_item_lucky/a": 7,
		"seckill_item_stock/b": 0, "seckill_item_lucky/b": 5, "seckill_item_read_errors_total": 0} {
		if got, ok := v[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	fail = true
	v = values(t, m)
	if _, ok := v["seckill_item_stock/a"]; ok || v["seckill_item_read_errors_total"] != 1 {
		t.Fatalf("scrape with Redis down: %v, want no item series and 1 read error", v)
	}
}
