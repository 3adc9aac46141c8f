package loadgen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"seckill/internal/api"
)

// open.go: the open loop. Buyers arrive at a fixed rate for a duration
// whether or not the earlier ones were answered, as a flash sale's crowd
// does. The closed loop (Fire) is C clients each waiting for its answer
// before it sends again: when the cluster stalls, its arrivals stall too
// and the stall hides from its latencies. Here a stall piles buyers up,
// and the ones still waiting at their timeout are left unanswered.
//
// vegeta's Attacker paces and sends the requests (a ConstantPacer, workers
// added on demand up to MaxInFlight). Under it a RoundTripper (openTrip)
// names each request's buyer, bounds it by the request timeout and the
// run's context, and keeps its transport error, by vegeta's sequence
// number: the X-Vegeta-Seq header of the request is the Seq of its Result.

// The open loop's bounds (Config.Rate, Config.Duration).
const (
	// DefaultMaxInFlight caps the requests in flight (vegeta's workers,
	// one connection each) so that an attack on a stalled cluster stops
	// by itself; at the cap arrivals wait, and OpenLoop.Sent falls short
	// of Planned.
	DefaultMaxInFlight = 10000
	// MaxRate is the highest rate: vegeta's pacer spaces arrivals by
	// whole nanoseconds.
	MaxRate = 1_000_000
	// MaxDuration bounds how long buyers arrive.
	MaxDuration = 10 * time.Minute
	// MaxBuyers bounds rate × duration: every answer is kept for the
	// verdict.
	MaxBuyers = 2_000_000
	// LateArrivals is how long past the duration an arrival that fell
	// behind (a busy client machine) is still sent; later ones are not,
	// and OpenLoop.Sent falls short of Planned.
	LateArrivals = 100 * time.Millisecond
	// MaxRetryBusy bounds OpenConfig.RetryBusy.
	MaxRetryBusy = 100
)

// ErrConfig: the Config is unusable (an open loop without a duration, …).
var ErrConfig = errors.New("loadgen: bad config")

// OpenConfig is the pacing of one open-loop sale (FireOpen).
type OpenConfig struct {
	// Rate is the buyers per second, Duration how long they arrive.
	Rate     int
	Duration time.Duration
	// MaxInFlight caps the requests in flight. The default is
	// DefaultMaxInFlight.
	MaxInFlight int
	// RequestTimeout bounds each request, its answer read included. The
	// default is 10s. With RetryBusy it bounds the buyer: every send and
	// every wait between them.
	RequestTimeout time.Duration
	// RetryBusy is how many times a buyer answered busy sends again, after
	// the answer's Retry-After (and up to a tenth more, at random, as
	// clients that spread their retries do); 0: a buyer sends once. A
	// buyer whose RequestTimeout would end within that wait does not wait:
	// its answer is the busy one.
	RetryBusy int
	// Late is how long past Duration an arrival that fell behind is still
	// sent; the default is LateArrivals. A check that every planned buyer
	// arrives gives a long one: on a loaded machine the pacer falls
	// behind by more than LateArrivals, and Sent falls short by design.
	Late time.Duration
}

// Planned is how many buyers arrive: rate × duration, rounded up.
func (c OpenConfig) Planned() int {
	return int((int64(c.Rate)*int64(c.Duration) + int64(time.Second) - 1) / int64(time.Second))
}

func (c OpenConfig) validate() error {
	switch {
	case c.Rate <= 0 || c.Rate > MaxRate:
		return fmt.Errorf("%w: rate %d, want 1..%d buyers per second", ErrConfig, c.Rate, MaxRate)
	case c.Duration <= 0 || c.Duration > MaxDuration:
		return fmt.Errorf("%w: duration %v, want above 0 and at most %v", ErrConfig, c.Duration, MaxDuration)
	case c.Planned() > MaxBuyers:
		return fmt.Errorf("%w: %d buyers/s for %v is %d buyers, want at most %d", ErrConfig, c.Rate, c.Duration, c.Planned(), MaxBuyers)
	case c.RetryBusy < 0 || c.RetryBusy > MaxRetryBusy:
		return fmt.Errorf("%w: %d re-sends on busy, want 0..%d", ErrConfig, c.RetryBusy, MaxRetryBusy)
	}
	return nil
}

func (c *OpenConfig) defaults() {
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.Late <= 0 {
		c.Late = LateArrivals
	}
}

// FireOpen sends cfg.Planned() reduce requests (POST) to url, cfg.Rate a
// second, each one as the next of purchases' buyers when purchases is not
// nil (one send each: an arrival is one request), and returns every
// response in no particular order: answered, or unanswered (Status 0,
// Err set) when it got no HTTP answer in time. It returns within
// cfg.Duration + cfg.Late + cfg.RequestTimeout; when
// ctx is done it sends no more and cuts the requests in flight, which
// come back unanswered (CauseCut). An unusable cfg (Run's ErrConfig)
// sends nothing.
func FireOpen(ctx context.Context, url string, purchases []Purchase, cfg OpenConfig) []Response {
	cfg.defaults()
	if cfg.validate() != nil {
		return nil
	}
	planned := cfg.Planned()
	t := NewClient(cfg.MaxInFlight, 0).Transport.(*http.Transport)
	defer t.CloseIdleConnections()
	trip := &openTrip{next: t, ctx: ctx, timeout: cfg.RequestTimeout, retryBusy: cfg.RetryBusy, purchases: purchases,
		sends: make(map[uint64]openSend, planned)}
	atk := vegeta.NewAttacker(
		vegeta.Client(&http.Client{Transport: trip}), // no client timeout: openTrip bounds each request
		vegeta.MaxWorkers(uint64(cfg.MaxInFlight)),
		vegeta.MaxBody(maxAnswer),
	)
	// The pacer stops after the planned arrivals; vegeta stops at its
	// duration when it is not waiting for a free worker; these stop it
	// when it is, and when ctx is done.
	until := cfg.Duration + cfg.Late
	guard := time.AfterFunc(until, func() { atk.Stop() })
	defer guard.Stop()
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()

	pacer := capped{Pacer: vegeta.ConstantPacer{Freq: cfg.Rate, Per: time.Second}, n: uint64(planned)}
	target := vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodPost, URL: url})
	out := make([]Response, 0, planned)
	for res := range atk.Attack(target, pacer, until, "") {
		out = append(out, trip.response(res))
	}
	return out
}

// capped stops a pacer after n hits, so a sale of rate × duration buyers
// is that many however the last arrival falls against the duration.
type capped struct {
	vegeta.Pacer
	n uint64
}

func (c capped) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= c.n {
		return 0, true
	}
	return c.Pacer.Pace(elapsed, hits)
}

// openTrip is the RoundTripper under vegeta's client: it names each
// request's buyer, bounds the request by ctx and timeout (until its body
// is closed, which vegeta does once it has read it), and keeps what
// happened to it by vegeta's sequence number.
type openTrip struct {
	next      http.RoundTripper
	ctx       context.Context
	timeout   time.Duration
	retryBusy int        // re-sends of a buyer answered busy
	purchases []Purchase // nil: anonymous buyers
	taken     atomic.Int64

	mu    sync.Mutex
	sends map[uint64]openSend
}

// openSend is one request as openTrip saw it: its purchase (-1:
// anonymous) and the first error of its send or its answer's read.
type openSend struct {
	purchase int
	err      error
	resends  int // busy answers sent again
}

const seqHeader = "X-Vegeta-Seq" // set by vegeta's attacker on every request

func (t *openTrip) RoundTrip(req *http.Request) (*http.Response, error) {
	seq, err := strconv.ParseUint(req.Header.Get(seqHeader), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("loadgen: a request without vegeta's %s: %w", seqHeader, err)
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.timeout)
	req = req.Clone(ctx)
	s := openSend{purchase: -1}
	if i := int(t.taken.Add(1)) - 1; i < len(t.purchases) {
		s.purchase = i
		SetBuyer(req, t.purchases[i])
	}
	t.note(seq, s)
	for try := 0; ; try++ {
		began := time.Now()
		resp, err := t.next.RoundTrip(req)
		if err != nil {
			t.fail(seq, t.why(ctx, err))
			cancel()
			return nil, err
		}
		wait, busy := busyRetryAfter(resp)
		if busy {
			wait += rand.N(wait/10 + 1)
		}
		if !busy || try >= t.retryBusy || !sendFits(ctx, wait, time.Since(began), t.timeout) {
			// A send that would not fit in the buyer's bound after the
			// wait is not made: the busy answer is what it got, as a
			// client with a deadline reports it, not a buyer left
			// unanswered by the server.
			resp.Body = &openBody{ReadCloser: resp.Body, cancel: cancel, fail: func(err error) { t.fail(seq, t.why(ctx, err)) }}
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		_ = resp.Body.Close()
		t.resent(seq)
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			err := t.why(ctx, ctx.Err())
			t.fail(seq, err)
			cancel()
			return nil, err
		}
		req = req.Clone(ctx)
	}
}

// sendFits says a wait and another send fit before ctx's deadline: the
// send is given twice what the last one took, and a tenth of the buyer's
// bound at least. A resend begun just before the deadline (a wait that
// only just fits) would time out on a loaded server, and leave unanswered
// a buyer that had a busy answer in hand.
func sendFits(ctx context.Context, wait, last, bound time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > wait+max(2*last, bound/10)
}

// busyRetryAfter reads a busy answer's Retry-After (stockd sends one with
// every busy and with nothing else on the sale's path): busy, and the
// wait it asks for.
func busyRetryAfter(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || secs < 0 {
		return 0, false
	}
	return time.Duration(secs) * time.Second, true
}

func (t *openTrip) resent(seq uint64) {
	t.mu.Lock()
	s := t.sends[seq]
	s.resends++
	t.sends[seq] = s
	t.mu.Unlock()
}

// errCut: the run's context ended while the request was in flight (its
// Timeout, or a cancellation).
var errCut = errors.New("loadgen: cut by the run's end")

// why says what ended a request that failed: the run's end, its own
// timeout (its context ctx done), or err alone.
func (t *openTrip) why(ctx context.Context, err error) error {
	switch {
	case t.ctx.Err() != nil:
		return fmt.Errorf("%w: %w", errCut, err)
	case ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w after %v: %w", context.DeadlineExceeded, t.timeout, err)
	}
	return err
}

func (t *openTrip) note(seq uint64, s openSend) {
	t.mu.Lock()
	t.sends[seq] = s
	t.mu.Unlock()
}

func (t *openTrip) fail(seq uint64, err error) {
	t.mu.Lock()
	if s := t.sends[seq]; s.err == nil {
		s.err = err
		t.sends[seq] = s
	}
	t.mu.Unlock()
}

// response turns vegeta's result into a Response: an answer (any HTTP
// status, classified as the closed loop does) or an unanswered send.
func (t *openTrip) response(res *vegeta.Result) Response {
	t.mu.Lock()
	s, ok := t.sends[res.Seq]
	t.mu.Unlock()
	start, end := res.Timestamp, res.End()
	var r Response
	if res.Code != 0 {
		r = answer(int(res.Code), res.Body, start, end)
	} else {
		// vegeta sets Code only once the whole answer was read: no status,
		// or a cut answer, leaves the buyer unanswered.
		err := s.err
		if err == nil {
			err = errors.New(cmp.Or(res.Error, "no answer"))
		}
		r = Response{Err: err, Latency: res.Latency, Sent: start, Received: end, Left: -1}
	}
	r.BusyResends = s.resends
	if ok && s.purchase >= 0 {
		p := t.purchases[s.purchase]
		r.Purchase, r.User, r.Key = s.purchase, p.User, p.Key
	}
	return r
}

// openBody ends its request's context once vegeta closes it, and reports
// a failed read of the answer.
type openBody struct {
	io.ReadCloser
	cancel context.CancelFunc
	fail   func(error)
}

func (b *openBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.fail(err)
	}
	return n, err
}

func (b *openBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// Unanswered reports whether r got no HTTP answer: the connection was
// refused or reset, the request timed out, or the answer was cut.
func (r Response) Unanswered() bool {
	return r.Status == 0 && r.Outcome == OutcomeError && r.Err != nil
}

// The causes of an unanswered send (OpenLoop.UnansweredBy).
const (
	CauseTimeout = "timeout" // the request timeout passed
	CauseRefused = "refused" // connection refused
	CauseReset   = "reset"   // the connection was reset or closed before the answer
	CauseCut     = "cut"     // the run's own end: its bound (Config.Timeout), or a cancellation
	CauseOther   = "other"
)

// unansweredCause names why err left a buyer unanswered.
func unansweredCause(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, errCut), errors.Is(err, context.Canceled):
		return CauseCut
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return CauseTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return CauseRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return CauseReset
	default:
		return CauseOther
	}
}

// OpenLoop is an open-loop run's part of the Report (Config.Rate).
type OpenLoop struct {
	Rate       int     `json:"rate"`        // buyers per second asked
	DurationMS float64 `json:"duration_ms"` // how long they arrived
	Planned    int     `json:"planned"`     // rate × duration
	// Sent is the buyers sent; SentRate their rate from the first
	// arrival to the last.
	Sent     int     `json:"sent"`
	SentRate float64 `json:"sent_rate"`
	// PeakInFlight is the most requests in flight at once; MaxInFlight
	// the cap.
	PeakInFlight int `json:"peak_in_flight"`
	MaxInFlight  int `json:"max_in_flight"`
	// Answered got an HTTP answer; Unanswered did not (UnansweredBy: by
	// cause), and are not in the Report's Errors, which counts the HTTP
	// answers that are errors.
	Answered     int            `json:"answered"`
	Unanswered   int            `json:"unanswered"`
	UnansweredBy map[string]int `json:"unanswered_by,omitempty"`
	// Results is the answers per result, each with its own latencies,
	// in a fixed order ("unanswered" last: the time until the buyer was
	// given up).
	Results []ResultStats `json:"results"`
	// SellOutMS is from the first arrival to the answer of the last unit
	// sold (0 when none sold); BusyAfterSellOut the busy answers to buyers
	// who arrived after that: turned away with nothing left to wait for.
	SellOutMS        float64 `json:"sell_out_ms"`
	BusyAfterSellOut int     `json:"busy_after_sell_out"`
	// RetryBusy is the re-sends a buyer answered busy was allowed
	// (OpenConfig.RetryBusy); Resent the re-sends made, by BuyersResent
	// buyers. Each buyer is one answer above: its last.
	RetryBusy    int `json:"retry_busy,omitempty"`
	Resent       int `json:"resent,omitempty"`
	BuyersResent int `json:"buyers_resent,omitempty"`
}

// ResultStats is one result's answers and their latencies.
type ResultStats struct {
	Result string  `json:"result"`
	Count  int     `json:"count"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
}

// resultOrder names the outcomes in the report's order; "error" is an
// HTTP answer that is none of the others.
var resultOrder = []struct {
	o    Outcome
	name string
}{
	{OutcomeSold, string(api.Sold)},
	{OutcomeSoldOut, string(api.SoldOut)},
	{OutcomeBusy, string(api.Busy)},
	{OutcomeFenced, string(api.Fenced)},
	{OutcomeLockLost, string(api.LockLost)},
	{OutcomeUnconfirmed, string(api.Unconfirmed)},
	{OutcomeReplayed, "replayed"},
	{OutcomeLimitReached, string(api.LimitReached)},
	{OutcomeNotStarted, string(api.NotStarted)},
	{OutcomeEnded, string(api.Ended)},
	{OutcomeError, string(api.Error)},
}

// ResultUnanswered is the results' name for the buyers left unanswered.
const ResultUnanswered = "unanswered"

// SummarizeOpen is the open-loop part of a report on responses (FireOpen).
func SummarizeOpen(responses []Response, cfg OpenConfig) *OpenLoop {
	cfg.defaults()
	o := &OpenLoop{
		Rate: cfg.Rate, DurationMS: ms(cfg.Duration), Planned: cfg.Planned(), MaxInFlight: cfg.MaxInFlight,
		Sent: len(responses), UnansweredBy: map[string]int{}, RetryBusy: cfg.RetryBusy,
	}
	byResult := map[string][]time.Duration{}
	var first, last time.Time
	for _, r := range responses {
		if r.BusyResends > 0 {
			o.Resent += r.BusyResends
			o.BuyersResent++
		}
		name := ResultUnanswered
		if r.Unanswered() {
			o.Unanswered++
			o.UnansweredBy[unansweredCause(r.Err)]++
		} else {
			o.Answered++
			for _, ro := range resultOrder {
				if ro.o == r.Outcome {
					name = ro.name
				}
			}
		}
		byResult[name] = append(byResult[name], r.Latency)
		if first.IsZero() || r.Sent.Before(first) {
			first = r.Sent
		}
		if r.Sent.After(last) {
			last = r.Sent
		}
	}
	if span := last.Sub(first); len(responses) > 1 && span > 0 {
		o.SentRate = float64(len(responses)-1) / span.Seconds()
	}
	names := make([]string, 0, len(resultOrder)+1)
	for _, ro := range resultOrder {
		names = append(names, ro.name)
	}
	for _, name := range append(names, ResultUnanswered) {
		lat := byResult[name]
		if len(lat) == 0 {
			continue
		}
		slices.Sort(lat)
		o.Results = append(o.Results, ResultStats{Result: name, Count: len(lat), P50ms: ms(percentile(lat, 50)), P99ms: ms(percentile(lat, 99))})
	}
	o.PeakInFlight = peakInFlight(responses)
	var lastSold time.Time
	for _, r := range responses {
		if end := r.Sent.Add(r.Latency); r.Outcome == OutcomeSold && !r.Unanswered() && end.After(lastSold) {
			lastSold = end
		}
	}
	if !lastSold.IsZero() {
		o.SellOutMS = ms(lastSold.Sub(first))
		for _, r := range responses {
			if r.Outcome == OutcomeBusy && !r.Unanswered() && r.Sent.After(lastSold) {
				o.BusyAfterSellOut++
			}
		}
	}
	return o
}

// Result is the stats of one result by name (zero when none).
func (o *OpenLoop) Result(name string) ResultStats {
	for _, s := range o.Results {
		if s.Result == name {
			return s
		}
	}
	return ResultStats{Result: name}
}

// peakInFlight is the most responses whose send-to-answer intervals
// overlap at one instant.
func peakInFlight(responses []Response) int {
	type event struct {
		at    time.Time
		delta int
	}
	events := make([]event, 0, 2*len(responses))
	for _, r := range responses {
		events = append(events, event{r.Sent, 1}, event{r.Sent.Add(r.Latency), -1})
	}
	// At a tie the answer goes first: an answer and a send at one instant
	// did not overlap.
	slices.SortFunc(events, func(a, b event) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.delta, b.delta))
	})
	n, peak := 0, 0
	for _, e := range events {
		n += e.delta
		peak = max(peak, n)
	}
	return peak
}

// writeText prints the open loop's head and its table of results.
func (o *OpenLoop) writeText(b *strings.Builder, r *Report) {
	fmt.Fprintf(b, "%s: open loop, %d buyers/s for %v: %d of %d buyers sent (%.0f/s), peak %d in flight (cap %d), initial stock %d\n",
		r.what(), o.Rate, time.Duration(o.DurationMS*float64(time.Millisecond)).Round(time.Millisecond), o.Sent, o.Planned, o.SentRate,
		o.PeakInFlight, o.MaxInFlight, r.Initial)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  result\tanswers\tp50 ms\tp99 ms")
	for _, s := range o.Results {
		fmt.Fprintf(tw, "  %s\t%d\t%.1f\t%.1f\n", s.Result, s.Count, s.P50ms, s.P99ms)
	}
	if o.Unanswered == 0 {
		fmt.Fprintf(tw, "  %s\t0\t-\t-\n", ResultUnanswered)
	}
	_ = tw.Flush()
	if o.Unanswered > 0 {
		var parts []string
		for _, cause := range slices.Sorted(maps.Keys(o.UnansweredBy)) {
			parts = append(parts, fmt.Sprintf("%s %d", cause, o.UnansweredBy[cause]))
		}
		fmt.Fprintf(b, "  unanswered %d of %d buyers: %s\n", o.Unanswered, o.Sent, strings.Join(parts, ", "))
	}
	if o.RetryBusy > 0 {
		fmt.Fprintf(b, "  busy buyers sent again after Retry-After (up to %d times): %d re-sends by %d buyers; each buyer's row above is its last answer\n",
			o.RetryBusy, o.Resent, o.BuyersResent)
	}
}
