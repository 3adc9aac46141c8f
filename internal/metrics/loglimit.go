package metrics

import (
	"sync"
	"time"
)

// LogLimiter lets at most one log line of each kind through per interval
// and counts the rest in seckill_log_suppressed_total{kind}, so a flood of
// identical warnings (every busy sale, every wrong admin token, a driver
// retrying a dead server) costs one line per interval, not one per event.
// Kinds must come from a small fixed set: each is a metric label.
type LogLimiter struct {
	every   time.Duration
	counter func(kind string)
	now     func() time.Time

	mu   sync.Mutex
	last map[string]time.Time
	held map[string]int
}

// NewLogLimiter returns a limiter allowing one line per kind per every
// (default 1s). m may be nil: the limiter then only limits.
func NewLogLimiter(m *Metrics, every time.Duration) *LogLimiter {
	if every <= 0 {
		every = time.Second
	}
	l := &LogLimiter{every: every, now: time.Now, last: map[string]time.Time{}, held: map[string]int{}}
	if m != nil {
		l.counter = func(kind string) { m.LogSuppressed.WithLabelValues(kind).Inc() }
	}
	return l
}

// Allow reports whether a line of kind may be logged now and, if so, how
// many of that kind were held back since the last one let through (log it
// with the line).
func (l *LogLimiter) Allow(kind string) (ok bool, suppressed int) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, seen := l.last[kind]; seen && now.Sub(last) < l.every {
		l.held[kind]++
		if l.counter != nil {
			l.counter(kind)
		}
		return false, 0
	}
	l.last[kind] = now
	suppressed = l.held[kind]
	l.held[kind] = 0
	return true, suppressed
}
