package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// spread.go: one sale spread over several items at once (RunItems,
// `seckill run --items N`). Each item is its own Run, on its own lock,
// with its share of the buyers; the runs start firing together, so the
// sales per second of the whole is what N locks sell side by side.

// MaxSpreadItems bounds RunItems: every item is a Run of its own, with
// its own client and goroutines.
const MaxSpreadItems = 64

// SpreadReport is a run over several items at once.
type SpreadReport struct {
	Items []*Report `json:"items"` // one per item, in ItemIDs order
	// Sold and Initial are the items' sums; Oversold the sum of each
	// item's (one item's surplus never hides another's oversale).
	Sold     int   `json:"sold"`
	Initial  int   `json:"initial"`
	Oversold int64 `json:"oversold"`
	// SellOutMS is from the first request sent, of any item, to the answer
	// of the last unit sold, of any item; SalesPerSec is Sold over it.
	SellOutMS   float64 `json:"sell_out_ms"`
	SalesPerSec float64 `json:"sales_per_sec"`
	// SoldP50ms and SoldP99ms are the latencies of every item's sold
	// answers together.
	SoldP50ms float64 `json:"sold_p50_ms"`
	SoldP99ms float64 `json:"sold_p99_ms"`
	// Failed is each item's run that returned an error, by item id.
	Failed map[string]string `json:"failed,omitempty"`

	errs map[string]error
}

// Err is item id's run's error, or nil.
func (s *SpreadReport) Err(id string) error { return s.errs[id] }

// ItemIDs are the ids RunItems sells: prefix-1..prefix-n ("item" when
// prefix is empty).
func ItemIDs(prefix string, n int) []string {
	if prefix == "" {
		prefix = "item"
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i+1)
	}
	return ids
}

// RunItems sells each of ids as Run sells cfg.Item, all at once, each with
// cfg.Stock units and an even share of the load: cfg.Requests and
// cfg.Concurrency (closed loop) or cfg.Rate (open loop) divided by
// len(ids), rounded up. Every item is reset before any fires. The report
// has every item's run that returned a report, each run's error by item
// (Err, Failed), and is nil only with an unusable cfg; the error joins the
// runs' errors.
func RunItems(ctx context.Context, cfg Config, ids []string) (*SpreadReport, error) {
	n := len(ids)
	switch {
	case n == 0 || n > MaxSpreadItems:
		return nil, fmt.Errorf("%w: %d items, want 1..%d", ErrConfig, n, MaxSpreadItems)
	case cfg.Users > 0:
		return nil, fmt.Errorf("%w: named buyers with items (the buyers' verdict reads the default sale's ledger)", ErrConfig)
	}
	cfg.defaults()
	share := func(v int) int { return max((v+n-1)/n, 1) }
	cfg.Requests, cfg.Concurrency = share(cfg.Requests), share(cfg.Concurrency)
	if cfg.Rate > 0 {
		cfg.Rate = share(cfg.Rate)
		if cfg.MaxInFlight > 0 {
			cfg.MaxInFlight = share(cfg.MaxInFlight)
		}
	}
	gate := newBarrier(n)
	reports := make([]*Report, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		c := cfg
		c.Item = id
		var once sync.Once
		arrive := func() { once.Do(gate.arrive) }
		c.gate = func(ctx context.Context) error {
			arrive()
			return gate.wait(ctx)
		}
		wg.Go(func() {
			defer arrive() // a run that failed before firing must not hold the others
			reports[i], errs[i] = Run(ctx, c)
		})
	}
	wg.Wait()
	out := &SpreadReport{errs: map[string]error{}}
	for i, r := range reports {
		if r != nil {
			out.Items = append(out.Items, r)
		}
		if errs[i] != nil {
			errs[i] = fmt.Errorf("item %s: %w", ids[i], errs[i])
			out.errs[ids[i]] = errs[i]
			if out.Failed == nil {
				out.Failed = map[string]string{}
			}
			out.Failed[ids[i]] = errs[i].Error()
		}
	}
	out.sum()
	return out, errors.Join(errs...)
}

// sum totals the items and times the sale from the first send to the last
// unit's answer.
func (s *SpreadReport) sum() {
	var first, last time.Time
	var sold []time.Duration
	for _, r := range s.Items {
		s.Sold += r.Sold + r.UnconfirmedSold
		s.Initial += r.Initial
		s.Oversold += r.Oversold
		for _, a := range r.Answers {
			if first.IsZero() || a.Sent.Before(first) {
				first = a.Sent
			}
			if (a.Outcome == OutcomeSold || (a.Outcome == OutcomeUnconfirmed && a.Settled)) && a.Received.After(last) {
				last = a.Received
			}
			if a.Outcome == OutcomeSold {
				sold = append(sold, a.Latency)
			}
		}
	}
	slices.Sort(sold)
	s.SoldP50ms, s.SoldP99ms = ms(percentile(sold, 50)), ms(percentile(sold, 99))
	if last.After(first) {
		span := last.Sub(first)
		s.SellOutMS = ms(span)
		s.SalesPerSec = float64(s.Sold) / span.Seconds()
	}
}

// OK: every item's run passed its checks (Report.OK) and none is missing.
func (s *SpreadReport) OK(items int) bool {
	if s == nil || len(s.Items) != items || len(s.Failed) > 0 {
		return false
	}
	for _, r := range s.Items {
		if !r.OK() {
			return false
		}
	}
	return true
}

// WriteText writes each item's report, then the whole sale in one line.
func (s *SpreadReport) WriteText(w io.Writer) error {
	for _, r := range s.Items {
		if err := r.WriteText(w); err != nil {
			return err
		}
	}
	verdict := "consistent"
	for _, r := range s.Items {
		if v := r.Verdict(); v != "consistent" {
			verdict = fmt.Sprintf("item %s: %s", r.Item, v)
			break
		}
	}
	ids := make([]string, len(s.Items))
	for i, r := range s.Items {
		ids[i] = r.Item
	}
	_, err := fmt.Fprintf(w, "%d items (%s): sold %d of %d, oversold %d, sold in %.0f ms = %.0f sales/s: %s\n",
		len(s.Items), strings.Join(ids, ", "), s.Sold, s.Initial, s.Oversold, s.SellOutMS, s.SalesPerSec, verdict)
	return err
}

// barrier opens once n members have arrived (each arrives once: a run
// before it fires, or at its end if it never fired).
type barrier struct {
	mu      sync.Mutex
	waiting int
	open    chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{waiting: n, open: make(chan struct{})} }

// wait blocks until the barrier opens or ctx is done.
func (b *barrier) wait(ctx context.Context) error {
	select {
	case <-b.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *barrier) arrive() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiting > 0 {
		b.waiting--
		if b.waiting == 0 {
			close(b.open)
		}
	}
}
