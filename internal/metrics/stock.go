package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StockFunc reads the sale's counters: the stock left (all segments) and
// the units sold (lucky). redisstore.Store's Status fits, by way of a closure.
type StockFunc func(ctx context.Context) (stock, lucky int64, err error)

// stockCollector reads the counters at scrape time rather than caching
// them, so a board shows what Redis holds now, whichever replica answered
// the sale: every replica reports the same two numbers (take max() of
// them). A scrape that cannot read Redis within its bound exports neither
// series rather than failing the scrape: the replica's other series, which
// say why (errors, 503s), stay visible.
type stockCollector struct {
	read         StockFunc
	timeout      time.Duration
	stock, lucky *prometheus.Desc
	errs         prometheus.Counter
}

// RegisterStock adds the gauges seckill_stock and seckill_lucky, read by
// read within timeout on every scrape, and the counter
// seckill_stock_read_errors_total of scrapes that could not read them.
func (m *Metrics) RegisterStock(read StockFunc, timeout time.Duration) {
	c := &stockCollector{
		read:    read,
		timeout: timeout,
		stock: prometheus.NewDesc("seckill_stock",
			"Units left in the stock key(s), read from Redis at scrape time.", nil, m.constLabels),
		lucky: prometheus.NewDesc("seckill_lucky",
			"Units sold (the lucky counter), read from Redis at scrape time; stock + lucky is the initial stock while nothing is oversold.", nil, m.constLabels),
		errs: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "seckill_stock_read_errors_total",
			Help:        "Scrapes that could not read stock and lucky from Redis.",
			ConstLabels: m.constLabels,
		}),
	}
	m.reg.MustRegister(c)
}

func (c *stockCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.stock
	ch <- c.lucky
	c.errs.Describe(ch)
}

func (c *stockCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	stock, lucky, err := c.read(ctx)
	cancel()
	if err != nil {
		c.errs.Inc()
	} else {
		ch <- prometheus.MustNewConstMetric(c.stock, prometheus.GaugeValue, float64(stock))
		ch <- prometheus.MustNewConstMetric(c.lucky, prometheus.GaugeValue, float64(lucky))
	}
	c.errs.Collect(ch)
}
