package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"seckill/internal/api"
)

// ErrTimeout: the run's time bound passed before every request was sent.
// The Report returned with it covers the requests that were.
var ErrTimeout = errors.New("loadgen: run timed out")

// Config describes one flash sale.
type Config struct {
	// URL is the cluster's base URL, e.g. "http://127.0.0.1:8080".
	URL string
	// Requests is how many reduce requests to send. The default is 500.
	Requests int
	// Concurrency is how many are in flight at once. The default is 50.
	Concurrency int
	// Stock is the initial stock the run resets to. The default is 300.
	Stock int
	// AdminToken authorises the reset.
	AdminToken string
	// Timeout bounds the firing phase. The default is 30s.
	Timeout time.Duration
	// RequestTimeout bounds each HTTP request. The default is 10s.
	RequestTimeout time.Duration
}

func (c *Config) defaults() {
	if c.Requests == 0 {
		c.Requests = 500
	}
	if c.Concurrency == 0 {
		c.Concurrency = 50
	}
	if c.Stock == 0 {
		c.Stock = 300
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 10 * time.Second
	}
	c.URL = strings.TrimRight(c.URL, "/")
}

// Report is the outcome of one run; its JSON form is `seckill run --json`.
type Report struct {
	Backend     string `json:"backend"`
	Requests    int    `json:"requests"` // responses received (== Config.Requests unless cut short)
	Concurrency int    `json:"concurrency"`
	Sold        int    `json:"sold"`
	SoldOut     int    `json:"sold_out"`
	Busy        int    `json:"busy"`
	Fenced      int    `json:"fenced"`
	LockLost    int    `json:"lock_lost"`
	// Unconfirmed answers may have sold; UnconfirmedSold is how many did,
	// by their receipts, read after the run.
	Unconfirmed     int            `json:"unconfirmed"`
	UnconfirmedSold int            `json:"unconfirmed_sold"`
	Errors          int            `json:"errors"`
	Stock           int64          `json:"stock"`
	Lucky           int64          `json:"lucky"`
	Initial         int            `json:"initial"`
	Oversold        int64          `json:"oversold"`
	Consistent      bool           `json:"consistent"`
	RPS             float64        `json:"rps"`
	P50ms           float64        `json:"p50_ms"`
	P99ms           float64        `json:"p99_ms"`
	DurationMS      float64        `json:"duration_ms"`
	Replicas        map[string]int `json:"replicas"` // sales per replica
	TimedOut        bool           `json:"timed_out,omitempty"`
	ErrorSample     []string       `json:"error_sample,omitempty"` // a few distinct errors
}

// Run resets the stock, fires the requests, reads the stock back and
// verifies it. A reset, info or read-back failure is an error (wrapping
// ErrUnreachable, ErrUnauthorized or ErrBadResponse) with a nil Report; a
// run cut short by Timeout returns its Report and ErrTimeout.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	client := NewClient(cfg.Concurrency, cfg.RequestTimeout)
	defer client.CloseIdleConnections()

	if err := Reset(ctx, client, cfg.URL, cfg.AdminToken, cfg.Stock); err != nil {
		return nil, err
	}
	info, err := GetInfo(ctx, client, cfg.URL)
	if err != nil {
		return nil, err
	}

	fireCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	start := time.Now()
	responses := Fire(fireCtx, client, cfg.URL+"/stock/reduce", cfg.Requests, cfg.Concurrency)
	elapsed := time.Since(start)
	timedOut := errors.Is(fireCtx.Err(), context.DeadlineExceeded)
	cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	stock, err := GetStock(ctx, client, cfg.URL)
	if err != nil {
		return nil, err
	}
	if err := Settle(ctx, client, cfg.URL, responses); err != nil {
		return nil, err
	}
	r := Summarize(info.Backend, cfg.Stock, responses, elapsed, stock)
	r.Concurrency = cfg.Concurrency
	if timedOut {
		r.TimedOut = true
		return r, fmt.Errorf("%w after %v: %d of %d requests sent", ErrTimeout, cfg.Timeout, r.Requests, cfg.Requests)
	}
	return r, nil
}

// Summarize counts responses and verifies them against the stock read back.
func Summarize(backend string, initial int, responses []Response, elapsed time.Duration, s api.Stock) *Report {
	r := &Report{
		Backend:  backend,
		Requests: len(responses),
		Initial:  initial,
		Stock:    s.Stock,
		Lucky:    s.Lucky,
		Replicas: map[string]int{},
	}
	latencies := make([]time.Duration, 0, len(responses))
	seen := map[string]bool{}
	for _, resp := range responses {
		latencies = append(latencies, resp.Latency)
		switch resp.Outcome {
		case OutcomeSold:
			r.Sold++
			r.Replicas[resp.Replica]++
		case OutcomeSoldOut:
			r.SoldOut++
		case OutcomeBusy:
			r.Busy++
		case OutcomeFenced:
			r.Fenced++
		case OutcomeLockLost:
			r.LockLost++
		case OutcomeUnconfirmed:
			r.Unconfirmed++
			if resp.Settled {
				r.UnconfirmedSold++
			}
		default:
			r.Errors++
			msg := fmt.Sprintf("status %d", resp.Status)
			if resp.Err != nil {
				msg += ": " + resp.Err.Error()
			}
			if !seen[msg] && len(r.ErrorSample) < 5 {
				seen[msg] = true
				r.ErrorSample = append(r.ErrorSample, msg)
			}
		}
	}
	want := int64(initial)
	r.Oversold = max(0, r.Stock+r.Lucky-want, int64(r.Sold+r.UnconfirmedSold)-want)
	r.Consistent = r.Stock+r.Lucky == want && int64(r.Sold+r.UnconfirmedSold) == r.Lucky && r.Stock >= 0
	r.DurationMS = ms(elapsed)
	if elapsed > 0 {
		r.RPS = float64(len(responses)) / elapsed.Seconds()
	}
	slices.Sort(latencies)
	r.P50ms = ms(percentile(latencies, 50))
	r.P99ms = ms(percentile(latencies, 99))
	return r
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// WriteText prints the report for a human.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "backend %s: %d requests, %d in flight, initial stock %d\n", r.Backend, r.Requests, r.Concurrency, r.Initial)
	fmt.Fprintf(&b, "  sold %d  sold out %d  busy %d  fenced %d  lock lost %d  errors %d\n",
		r.Sold, r.SoldOut, r.Busy, r.Fenced, r.LockLost, r.Errors)
	if r.Unconfirmed > 0 {
		fmt.Fprintf(&b, "  unconfirmed %d (%d of them sold, by their receipts)\n", r.Unconfirmed, r.UnconfirmedSold)
	}
	fmt.Fprintf(&b, "  stock %d  lucky %d  oversold %d\n", r.Stock, r.Lucky, r.Oversold)
	if len(r.Replicas) > 0 {
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(r.Replicas)) {
			parts = append(parts, fmt.Sprintf("%s %d", name, r.Replicas[name]))
		}
		fmt.Fprintf(&b, "  sold per replica: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "  %.0f req/s  p50 %.1f ms  p99 %.1f ms  (%.0f ms)\n", r.RPS, r.P50ms, r.P99ms, r.DurationMS)
	for _, e := range r.ErrorSample {
		fmt.Fprintf(&b, "  error: %s\n", e)
	}
	if r.TimedOut {
		b.WriteString("  TIMED OUT before every request was sent\n")
	}
	fmt.Fprintf(&b, "verdict: %s\n", r.Verdict())
	_, err := io.WriteString(w, b.String())
	return err
}

// Verdict is "consistent", "OVERSOLD" or "INCONSISTENT".
func (r *Report) Verdict() string {
	switch {
	case r.Consistent:
		return "consistent"
	case r.Oversold > 0:
		return "OVERSOLD"
	default:
		return "INCONSISTENT"
	}
}
