// Package metrics holds stockd's Prometheus instruments on a private
// registry, so tests can build as many as they like without colliding on the
// global default registry.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the instruments of one stockd process.
type Metrics struct {
	reg *prometheus.Registry

	// Results counts /stock/reduce outcomes by result label: one of
	// api.Results (sold, sold_out, fenced, busy, … store_lost).
	Results *prometheus.CounterVec
	// LockWait is the time spent in Locker.Acquire, successful or not.
	LockWait prometheus.Histogram
	// SaleDuration is the time of a whole Reduce, lock wait included.
	SaleDuration prometheus.Histogram
	// BatchSize is the buyers one critical section served: 1 without
	// combining, up to stock.combine_max with it.
	BatchSize prometheus.Histogram
	// Events counts what the sale path saw that an operator must be able to
	// see: retried calls, unconfirmed sales, token collisions, tokens
	// advanced past the fence, a fence of another lock (stock.Event).
	Events *prometheus.CounterVec
	// AdminAuthFailures counts refused admin calls (bad or missing token,
	// those answered 429 by the bound included).
	AdminAuthFailures prometheus.Counter
	// AdminThrottled counts the failed admin tries answered 429: beyond
	// the replica's bound on failed admin tries per minute. Alert on it.
	AdminThrottled prometheus.Counter
	// LogSuppressed counts log lines a LogLimiter held back, by kind: the
	// aggregate stays visible when the log does not repeat every line.
	LogSuppressed *prometheus.CounterVec
	// OrdersLag is the ledger entries not yet stored in MySQL
	// (orders.durable), as last sampled by SampleOrdersLag; NaN when the
	// last sample failed. Registered only by SampleOrdersLag, so a replica
	// without durable orders does not export a lag of 0.
	OrdersLag prometheus.Gauge
	// ExpirerRuns counts the expirer's runs (orders.payment_window) by
	// result, ok or error, and Expired the orders its runs expired, each
	// a unit back on sale: an expirer that stopped running shows as a
	// counter that stopped rising, and the lab waits on a run.
	ExpirerRuns *prometheus.CounterVec
	Expired     prometheus.Counter

	constLabels prometheus.Labels
}

// New registers the instruments, plus Go runtime and process collectors, on a
// fresh registry. constLabels (e.g. replica, backend) go on every series.
func New(constLabels prometheus.Labels) *Metrics {
	reg := prometheus.NewRegistry()
	// Buckets from 0.1 ms to ~13 s: an uncontended in-process lock is
	// microseconds, a contended distributed one under load is seconds.
	buckets := prometheus.ExponentialBuckets(0.0001, 2.5, 14)
	m := &Metrics{
		reg:         reg,
		constLabels: constLabels,
		Results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "seckill_reduce_total",
			Help:        "Stock reduce requests by result.",
			ConstLabels: constLabels,
		}, []string{"result"}),
		LockWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        "seckill_lock_wait_seconds",
			Help:        "Time spent acquiring the sale lock.",
			ConstLabels: constLabels,
			Buckets:     buckets,
		}),
		SaleDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        "seckill_sale_duration_seconds",
			Help:        "Duration of a whole reduce, lock wait included.",
			ConstLabels: constLabels,
			Buckets:     buckets,
		}),
		BatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        "seckill_sale_batch_size",
			Help:        "Buyers served by one critical section under the lock: 1 without combining, up to stock.combine_max with it.",
			ConstLabels: constLabels,
			Buckets:     prometheus.ExponentialBuckets(1, 2, 13), // 1 to 4096, combine_max's bound
		}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "seckill_sale_events_total",
			Help:        "Events of the sale path: retried, unconfirmed, token_collision, tokens_advanced, mixed_lock, fence_restarted, sold_out_unlocked, shed, read_after_return.",
			ConstLabels: constLabels,
		}, []string{"event"}),
		AdminAuthFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "seckill_admin_auth_failures_total",
			Help:        "Admin calls refused for a missing or wrong token, those answered 429 included.",
			ConstLabels: constLabels,
		}),
		AdminThrottled: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "seckill_admin_throttled_total",
			Help:        "Failed admin tries answered 429: beyond the replica's bound on failed admin tries per minute.",
			ConstLabels: constLabels,
		}),
		LogSuppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "seckill_log_suppressed_total",
			Help:        "Log lines held back by rate limiting, by kind.",
			ConstLabels: constLabels,
		}, []string{"kind"}),
		OrdersLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "seckill_orders_lag",
			Help:        "Ledger entries not yet stored in MySQL (orders.durable), sampled; NaN when it could not be read.",
			ConstLabels: constLabels,
		}),
		ExpirerRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "seckill_expirer_runs_total",
			Help:        "Runs of the reservations' expirer (orders.payment_window), by result: ok or error.",
			ConstLabels: constLabels,
		}, []string{"result"}),
		Expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "seckill_orders_expired_total",
			Help:        "Reserved orders the expirer ended unpaid, each a unit back on sale.",
			ConstLabels: constLabels,
		}),
	}
	reg.MustRegister(m.Results, m.LockWait, m.SaleDuration, m.BatchSize, m.Events, m.AdminAuthFailures, m.AdminThrottled, m.LogSuppressed,
		m.ExpirerRuns, m.Expired,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveLockWait records one Acquire; it fits stock.ServiceConfig.OnLockWait.
func (m *Metrics) ObserveLockWait(d time.Duration) { m.LockWait.Observe(d.Seconds()) }

// ObserveBatch records one critical section of n buyers; it fits
// stock.ServiceConfig.OnBatch.
func (m *Metrics) ObserveBatch(n int) { m.BatchSize.Observe(float64(n)) }

// CountEvent counts one sale-path event; it fits stock.ServiceConfig.OnEvent
// (by way of a string conversion).
func (m *Metrics) CountEvent(event string) { m.Events.WithLabelValues(event).Inc() }

// ObserveExpirerRun records one run of the expirer that expired n
// orders, or failed with err.
func (m *Metrics) ObserveExpirerRun(n int64, err error) {
	if err != nil {
		m.ExpirerRuns.WithLabelValues("error").Inc()
		return
	}
	m.ExpirerRuns.WithLabelValues("ok").Inc()
	m.Expired.Add(float64(n))
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry exposes the registry, for tests that gather values.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }
