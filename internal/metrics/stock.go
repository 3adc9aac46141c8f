package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StockFunc reads the sale's counters: the stock left (all segments) and
// the units sold (lucky). redisstore.Store's Status fits, by way of a closure.
type StockFunc func(ctx context.Context) (stock, lucky int64, err error)

// ItemCounts are one item's counters: its units left and sold.
type ItemCounts struct {
	ID           string
	Stock, Lucky int64
}

// ItemsFunc reads every item's counters. stockd's reads the items' survey
// at most once a period (redisstore.Items.Survey is a script per item), so
// a scrape a second costs no more than /readyz already does.
type ItemsFunc func(ctx context.Context) ([]ItemCounts, error)

// countersCollector reads a sale's two counters at scrape time rather
// than caching them, so a board shows what Redis holds now, whichever
// replica answered the sale: every replica reports the same numbers (take
// max() of them). A scrape that cannot read them within its bound exports
// none of them rather than failing the scrape: the replica's other series,
// which say why (errors, 503s), stay visible. The default sale's series
// have no label; the items' are labelled item.
type countersCollector struct {
	read         ItemsFunc // the default sale's: one entry, ID ""
	timeout      time.Duration
	labelled     bool
	stock, lucky *prometheus.Desc
	errs         prometheus.Counter
}

// RegisterStock adds the gauges seckill_stock and seckill_lucky, read by
// read within timeout on every scrape, and the counter
// seckill_stock_read_errors_total of scrapes that could not read them.
func (m *Metrics) RegisterStock(read StockFunc, timeout time.Duration) {
	m.registerCounters("seckill_stock", "seckill_lucky", "seckill_stock_read_errors_total",
		"Units left in the stock key(s), read from Redis at scrape time.",
		"Units sold (the lucky counter), read from Redis at scrape time; stock + lucky is the initial stock while nothing is oversold.",
		"Scrapes that could not read stock and lucky from Redis.",
		false, func(ctx context.Context) ([]ItemCounts, error) {
			stock, lucky, err := read(ctx)
			if err != nil {
				return nil, err
			}
			return []ItemCounts{{Stock: stock, Lucky: lucky}}, nil
		}, timeout)
}

// RegisterItems adds the gauges seckill_item_stock and seckill_item_lucky
// (label item), read by read within timeout on every scrape, and the
// counter seckill_item_read_errors_total of scrapes that could not read
// them. The default sale keeps seckill_stock and seckill_lucky.
func (m *Metrics) RegisterItems(read ItemsFunc, timeout time.Duration) {
	m.registerCounters("seckill_item_stock", "seckill_item_lucky", "seckill_item_read_errors_total",
		"Units left in an item's stock key, from the items' last survey of Redis.",
		"Units of an item sold (its lucky counter), from the items' last survey of Redis.",
		"Scrapes that could not read the items' counters.",
		true, read, timeout)
}

func (m *Metrics) registerCounters(stock, lucky, errs, stockHelp, luckyHelp, errsHelp string, labelled bool, read ItemsFunc, timeout time.Duration) {
	var labels []string
	if labelled {
		labels = []string{"item"}
	}
	m.reg.MustRegister(&countersCollector{
		read:     read,
		timeout:  timeout,
		labelled: labelled,
		stock:    prometheus.NewDesc(stock, stockHelp, labels, m.constLabels),
		lucky:    prometheus.NewDesc(lucky, luckyHelp, labels, m.constLabels),
		errs:     prometheus.NewCounter(prometheus.CounterOpts{Name: errs, Help: errsHelp, ConstLabels: m.constLabels}),
	})
}

func (c *countersCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.stock
	ch <- c.lucky
	c.errs.Describe(ch)
}

func (c *countersCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	rows, err := c.read(ctx)
	cancel()
	if err != nil {
		c.errs.Inc()
		rows = nil
	}
	for _, r := range rows {
		var labels []string
		if c.labelled {
			labels = []string{r.ID}
		}
		ch <- prometheus.MustNewConstMetric(c.stock, prometheus.GaugeValue, float64(r.Stock), labels...)
		ch <- prometheus.MustNewConstMetric(c.lucky, prometheus.GaugeValue, float64(r.Lucky), labels...)
	}
	c.errs.Collect(ch)
}
