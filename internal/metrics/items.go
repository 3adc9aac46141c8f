package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ItemCounts are one item's counters: its units left and sold.
type ItemCounts struct {
	ID           string
	Stock, Lucky int64
}

// ItemsFunc reads every item's counters. stockd's reads the items' survey
// at most once a period (redisstore.Items.Survey is a script per item), so
// a scrape a second costs no more than /readyz already does.
type ItemsFunc func(ctx context.Context) ([]ItemCounts, error)

// itemsCollector is the stock collector's twin for items: the same two
// numbers, labelled by item, read at scrape time and not exported when
// they cannot be read.
type itemsCollector struct {
	read         ItemsFunc
	timeout      time.Duration
	stock, lucky *prometheus.Desc
	errs         prometheus.Counter
}

// RegisterItems adds the gauges seckill_item_stock and seckill_item_lucky
// (label item), read by read within timeout on every scrape, and the
// counter seckill_item_read_errors_total of scrapes that could not read
// them. The default sale keeps seckill_stock and seckill_lucky.
func (m *Metrics) RegisterItems(read ItemsFunc, timeout time.Duration) {
	c := &itemsCollector{
		read:    read,
		timeout: timeout,
		stock: prometheus.NewDesc("seckill_item_stock",
			"Units left in an item's stock key, from the items' last survey of Redis.", []string{"item"}, m.constLabels),
		lucky: prometheus.NewDesc("seckill_item_lucky",
			"Units of an item sold (its lucky counter), from the items' last survey of Redis.", []string{"item"}, m.constLabels),
		errs: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "seckill_item_read_errors_total",
			Help:        "Scrapes that could not read the items' counters.",
			ConstLabels: m.constLabels,
		}),
	}
	m.reg.MustRegister(c)
}

func (c *itemsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.stock
	ch <- c.lucky
	c.errs.Describe(ch)
}

func (c *itemsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	items, err := c.read(ctx)
	cancel()
	if err != nil {
		c.errs.Inc()
	}
	for _, it := range items {
		ch <- prometheus.MustNewConstMetric(c.stock, prometheus.GaugeValue, float64(it.Stock), it.ID)
		ch <- prometheus.MustNewConstMetric(c.lucky, prometheus.GaugeValue, float64(it.Lucky), it.ID)
	}
	c.errs.Collect(ch)
}
