package stockd

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/health"
	"seckill/internal/metrics"
	"seckill/internal/stock/redisstore"
)

// itemGaugesEvery is how often the items' gauges read the items' survey
// again: a script per item, so not at every scrape (once a second), and
// at /readyz's own pace.
const itemGaugesEvery = 5 * time.Second

// itemReading is one survey of the items' counters and when it was taken.
type itemReading struct {
	items []metrics.ItemCounts
	at    time.Time
}

// registerItemGauges exports every item's stock and lucky
// (seckill_item_stock, seckill_item_lucky), from a survey at most
// itemGaugesEvery old. A survey older than two periods (Redis down since)
// is not exported: the gauges go missing, never stale.
func registerItemGauges(m *metrics.Metrics, items *redisstore.Items, timeout time.Duration) {
	reading := &health.Reading[itemReading]{Every: itemGaugesEvery}
	m.RegisterItems(func(ctx context.Context) ([]metrics.ItemCounts, error) {
		now := time.Now()
		r := reading.Get(now, func() (itemReading, error) {
			sv, err := items.Survey(ctx)
			if err != nil {
				return itemReading{}, err
			}
			out := make([]metrics.ItemCounts, len(sv.Books))
			for i, b := range sv.Books {
				out[i] = metrics.ItemCounts{ID: b.ID, Stock: b.Stock, Lucky: b.Lucky}
			}
			return itemReading{items: out, at: now}, nil
		})
		switch {
		case r == nil:
			return nil, fmt.Errorf("items: not surveyed yet")
		case now.Sub(r.at) > 2*itemGaugesEvery:
			return nil, fmt.Errorf("items: last surveyed %s ago", now.Sub(r.at).Round(time.Second))
		}
		return r.items, nil
	}, timeout)
}
