package election

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the election's Prometheus instruments. A nil *Metrics is
// valid and records nothing.
type Metrics struct {
	leading     prometheus.Gauge
	term        prometheus.Gauge
	transitions *prometheus.CounterVec
	runs        *prometheus.CounterVec
	lastOK      prometheus.Gauge
}

// NewMetrics registers the instruments on reg with constLabels (e.g.
// replica, backend) on every series. A nil reg returns nil.
func NewMetrics(reg prometheus.Registerer, constLabels prometheus.Labels) *Metrics {
	if reg == nil {
		return nil
	}
	m := &Metrics{
		leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_election_is_leader", Help: "1 while this replica leads the election.",
			ConstLabels: constLabels,
		}),
		term: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_election_term", Help: "Term of the current tenure, 0 when not leading.",
			ConstLabels: constLabels,
		}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_election_transitions_total", Help: "Times this replica started (leader) or stopped (follower) leading.",
			ConstLabels: constLabels,
		}, []string{"to"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_audit_runs_total", Help: "Leader job (sale audit) runs by result: ok, violation, fenced, error.",
			ConstLabels: constLabels,
		}, []string{"result"}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_audit_last_ok", Help: "1 if the last recorded audit found the sale consistent, 0 if not.",
			ConstLabels: constLabels,
		}),
	}
	reg.MustRegister(m.leading, m.term, m.transitions, m.runs, m.lastOK)
	return m
}

// ObserveStatus fits RunnerConfig.OnChange.
func (m *Metrics) ObserveStatus(s Status) {
	if m == nil {
		return
	}
	to := "follower"
	v := 0.0
	if s.Leading {
		to, v = "leader", 1
	}
	m.leading.Set(v)
	m.term.Set(float64(s.Term))
	m.transitions.WithLabelValues(to).Inc()
}

// ObserveRun counts one job run; for ok and violation it also sets the
// last-result gauge.
func (m *Metrics) ObserveRun(result string) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(result).Inc()
	switch result {
	case "ok":
		m.lastOK.Set(1)
	case "violation":
		m.lastOK.Set(0)
	}
}
