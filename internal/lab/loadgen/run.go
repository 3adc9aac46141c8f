package loadgen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"seckill/internal/api"
	"seckill/internal/auth"
)

// ErrTimeout: the run's time bound passed before every request was sent.
// The Report returned with it covers the requests that were.
var ErrTimeout = errors.New("loadgen: run timed out")

// Config describes one flash sale.
type Config struct {
	// URL is the cluster's base URL, e.g. "http://127.0.0.1:8080".
	URL string
	// Requests is how many reduce requests to send (with Users: how many
	// purchases; the re-sends of RetryRate come on top). The default is 500.
	Requests int
	// Concurrency is how many are in flight at once. The default is 50.
	Concurrency int
	// Stock is the initial stock the run resets to. The default is 300.
	Stock int
	// AdminToken authorises the reset.
	AdminToken string
	// Item, when set, sells that item (docs/items.md) instead of the
	// default sale: the run creates it (POST /items), or starts it over
	// when it exists (POST /items/:id/reset), with Stock units and the
	// window StartsAt..EndsAt (zero: no bound), sells at
	// /items/:id/reduce, reads its books back from GET /items/:id and
	// checks every answer against the window by the server's clock
	// (Report.Window). Not with Users: the buyers' verdict reads the
	// default sale's ledger.
	Item             string
	StartsAt, EndsAt time.Time
	// Timeout bounds the firing phase. The default is 30s; with Rate,
	// Duration + RequestTimeout + 5s, past the open loop's own end.
	Timeout time.Duration
	// RequestTimeout bounds each HTTP request. The default is 10s.
	RequestTimeout time.Duration

	// Rate, when positive, makes the run an open loop (open.go): Rate
	// buyers a second arrive for Duration, each one request, answered or
	// not, instead of Requests at Concurrency in flight (both ignored).
	// With Users each arrival is the next buyer's purchase; RetryRate is
	// refused (an arrival is one send).
	Rate     int
	Duration time.Duration
	// MaxInFlight caps the open loop's requests in flight. The default is
	// DefaultMaxInFlight.
	MaxInFlight int
	// RetryBusy makes each open-loop buyer answered busy send again, up
	// to that many times, after the answer's Retry-After
	// (OpenConfig.RetryBusy). Only with Rate.
	RetryBusy int
	// Late is OpenConfig.Late: how long past Duration a late arrival is
	// still sent (default LateArrivals). Only with Rate.
	Late time.Duration

	// Users, when positive, makes the run buyer-aware: each request is a
	// purchase by one of Users buyers ("u1".."u<Users>", X-User) with its
	// own Idempotency-Key, and the report carries the buyers' verdict
	// (Report.Buyers). Zero: anonymous sales, as in the articles.
	Users int
	// Minter, when set, signs each buyer's token (Authorization: Bearer),
	// as the replicas' auth.buyers jwt wants; without it buyers are sent
	// as X-User, for replicas behind a gateway that trusts this client.
	Minter *auth.Minter
	// RetryRate is the fraction of purchases sent twice with the same user
	// and key (after a cut first send, right after the answer, or racing
	// it; see RetryKind). Only with Users.
	RetryRate float64
	// RetryTimeout is when the client gives up on the first send of a
	// RetryTimeout purchase. The default is 50ms: below a sale's latency
	// under load, so most such sends are cut while the server works.
	RetryTimeout time.Duration
	// Drain bounds the wait for durable orders to reach MySQL after the
	// sale (VerifyConfig.Drain). The default is 30s.
	Drain time.Duration
	// Seed seeds the purchase plan (who buys in which order, which are
	// re-sent); 0 picks a random one.
	Seed uint64
	// NoHistory skips the history check (Report.History), which is on by
	// default; HistoryDir, if set, receives a violation's picture.
	NoHistory  bool
	HistoryDir string

	// gate, when set, is waited on between the reset and the first send
	// (RunItems: every item's run fires together).
	gate func(context.Context) error
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
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.Timeout == 0 && c.Rate > 0 {
		c.Timeout = c.Duration + max(c.Late, LateArrivals) + c.RequestTimeout + 5*time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.RetryTimeout == 0 {
		c.RetryTimeout = 50 * time.Millisecond
	}
	c.URL = strings.TrimRight(c.URL, "/")
}

// open is the open loop's pacing, from the Config.
func (c *Config) open() OpenConfig {
	return OpenConfig{Rate: c.Rate, Duration: c.Duration, MaxInFlight: c.MaxInFlight, RequestTimeout: c.RequestTimeout, RetryBusy: c.RetryBusy, Late: c.Late}
}

// Report is the outcome of one run; its JSON form is `seckill run --json`.
type Report struct {
	Backend string `json:"backend"`
	// Item is the item sold (Config.Item); "" for the default sale.
	Item        string `json:"item,omitempty"`
	Requests    int    `json:"requests"`    // responses received (== Config.Requests unless cut short, plus re-sends with buyers); with Rate, buyers sent
	Concurrency int    `json:"concurrency"` // 0 with Rate: not fixed (OpenLoop.PeakInFlight)
	Sold        int    `json:"sold"`
	SoldOut     int    `json:"sold_out"`
	Busy        int    `json:"busy"`
	Fenced      int    `json:"fenced"`
	LockLost    int    `json:"lock_lost"`
	// Unconfirmed answers may have sold; UnconfirmedSold is how many did,
	// by their receipts, read after the run.
	Unconfirmed     int   `json:"unconfirmed"`
	UnconfirmedSold int   `json:"unconfirmed_sold"`
	Errors          int   `json:"errors"` // with Rate, HTTP answers only: the unanswered are OpenLoop.Unanswered
	Stock           int64 `json:"stock"`
	Lucky           int64 `json:"lucky"`
	Initial         int   `json:"initial"`
	Oversold        int64 `json:"oversold"`
	// Segments is each segment's stock read back, when the stock is split
	// (GET /stock lists them only then); NegativeSegments counts those
	// below zero: a segment that sold a unit it did not have, even when
	// another segment's surplus hides it in the sum.
	Segments         []int64 `json:"segments,omitempty"`
	NegativeSegments int     `json:"negative_segments"`
	// Consistent: the books balance (stock + lucky == initial, lucky ==
	// sales told or settled, plus at most InDoubt), and neither the stock
	// nor any segment is negative.
	Consistent bool `json:"consistent"`
	// InDoubt counts the requests that got no answer after they may have
	// reached a replica (timed out, reset or cut in flight, not refused
	// at connect): each may have sold a unit no buyer was told of.
	InDoubt int `json:"in_doubt,omitempty"`
	// FalseSoldOut counts sold_out answers proven false: received before
	// some later sale's request was even sent. Stock only goes down during
	// a sale, so that sale found a unit left after the sold_out was
	// decided: the buyer was turned away while stock remained.
	FalseSoldOut int     `json:"false_sold_out"`
	RPS          float64 `json:"rps"`
	P50ms        float64 `json:"p50_ms"`
	P99ms        float64 `json:"p99_ms"`
	DurationMS   float64 `json:"duration_ms"`
	// SellingFromMS and SellingUntilMS bound, in unix ms, a time when
	// the sale was certainly under way: its first sold answer had come
	// back (a unit gone) and its last sold request was not yet sent (a
	// unit left). Zero without two sold answers so ordered. Two runs'
	// ranges that overlap sold at once (compose-test's item rows).
	SellingFromMS  int64          `json:"selling_from_ms,omitempty"`
	SellingUntilMS int64          `json:"selling_until_ms,omitempty"`
	Replicas       map[string]int `json:"replicas"` // sales per replica
	TimedOut       bool           `json:"timed_out,omitempty"`
	ErrorSample    []string       `json:"error_sample,omitempty"` // a few distinct errors

	// The buyer-aware answers (Config.Users): replays of an earlier sale
	// (not in Sold), refusals by the per-user limit,
	// and first sends the client cut on purpose (not in Errors).
	Replayed     int `json:"replayed,omitempty"`
	LimitReached int `json:"limit_reached,omitempty"`
	Cut          int `json:"cut,omitempty"`
	// NotStarted and Ended count an item's answers outside its window
	// (not in Errors); Window checks them, and every sale, against it.
	// The default sale has no window: either answer fails its run.
	NotStarted int     `json:"not_started,omitempty"`
	Ended      int     `json:"ended,omitempty"`
	Window     *Window `json:"window,omitempty"`
	// Buyers is the buyers' verdict; nil for anonymous runs.
	Buyers *Buyers `json:"buyers,omitempty"`
	// Ledger is GET /ledger right after an anonymous sale when the ledger
	// is on: its orders and, with durable orders, MySQL's count and the lag
	// still to drain. Shown, not judged (the buyers' verdict judges it).
	Ledger *api.Ledger `json:"ledger,omitempty"`
	// History is the check of every answer as a history against the
	// sale's model (history.go); nil when Config.NoHistory.
	History *History `json:"history,omitempty"`
	// Open is the open loop's rate, buyers sent and unanswered, and its
	// answers per result with their latencies; nil for a closed loop.
	Open *OpenLoop `json:"open_loop,omitempty"`
	// Answers is every response of the run (Settle applied), for a
	// caller's own checks; not in the JSON.
	Answers []Response `json:"-"`
}

// Run resets the stock (or the item, Config.Item), fires the requests (a
// closed loop, or with Config.Rate an open one), reads the stock back and
// verifies it. A reset, info or read-back failure is an error (wrapping
// ErrUnreachable, ErrUnauthorized or ErrBadResponse) with a nil Report,
// and so is an unusable Config (ErrConfig); a run cut short by Timeout
// returns its Report and ErrTimeout.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	switch {
	case cfg.Item != "" && cfg.Users > 0:
		return nil, fmt.Errorf("%w: named buyers with an item (the buyers' verdict reads GET /ledger, the default sale's)", ErrConfig)
	case cfg.Item == "" && (!cfg.StartsAt.IsZero() || !cfg.EndsAt.IsZero()):
		return nil, fmt.Errorf("%w: a window is an item's (Config.Item)", ErrConfig)
	}
	open := cfg.Rate != 0
	if !open && cfg.RetryBusy != 0 {
		return nil, fmt.Errorf("%w: re-sends on busy are the open loop's (Rate)", ErrConfig)
	}
	if open {
		if err := cfg.open().validate(); err != nil {
			return nil, err
		}
		if cfg.RetryRate > 0 {
			return nil, fmt.Errorf("%w: a retry rate with an open loop (an arrival is one send)", ErrConfig)
		}
	}
	client := NewClient(cfg.Concurrency, cfg.RequestTimeout)
	defer client.CloseIdleConnections()

	var window *Window
	if cfg.Item != "" {
		it := api.ItemSettings{ID: cfg.Item, Stock: int64(cfg.Stock), StartsAt: windowMS(cfg.StartsAt), EndsAt: windowMS(cfg.EndsAt)}
		if _, err := ResetItem(ctx, client, cfg.URL, cfg.AdminToken, it); err != nil {
			return nil, err
		}
		w, err := readWindow(ctx, client, cfg.URL, cfg.Item)
		if err != nil {
			return nil, err
		}
		window = w
	} else if err := Reset(ctx, client, cfg.URL, cfg.AdminToken, cfg.Stock); err != nil {
		return nil, err
	}
	info, err := GetInfo(ctx, client, cfg.URL)
	if err != nil {
		return nil, err
	}
	var purchases []Purchase
	if cfg.Users > 0 {
		if !info.Ledger {
			return nil, ErrNoLedger
		}
		seed := cfg.Seed
		if seed == 0 {
			seed = rand.Uint64()
		}
		n := cfg.Requests
		if open {
			n = cfg.open().Planned()
		}
		purchases = Plan(n, cfg.Users, cfg.RetryRate, RunID(), rand.New(rand.NewPCG(seed, seed>>1)))
		if cfg.Minter != nil {
			Sign(purchases, cfg.Minter)
		}
	}

	if cfg.gate != nil {
		if err := cfg.gate(ctx); err != nil {
			return nil, err
		}
	}
	fireCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	start := time.Now()
	var responses []Response
	switch {
	case open:
		responses = FireOpen(fireCtx, cfg.saleURL(), purchases, cfg.open())
	case purchases != nil:
		responses = FireBuyers(fireCtx, client, cfg.saleURL(), purchases, cfg.Concurrency, cfg.RetryTimeout)
	default:
		responses = Fire(fireCtx, client, cfg.saleURL(), cfg.Requests, cfg.Concurrency)
	}
	elapsed := time.Since(start)
	timedOut := errors.Is(fireCtx.Err(), context.DeadlineExceeded)
	cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	stock, err := cfg.readBooks(ctx, client)
	if err != nil {
		return nil, err
	}
	readAt := time.Now()
	if err := settle(ctx, client, cfg.receiptsURL(), responses); err != nil {
		return nil, err
	}
	r := Summarize(info.Backend, cfg.Stock, responses, elapsed, stock)
	r.Answers = responses
	name := "run-" + info.Backend
	if cfg.Item != "" {
		r.Item, r.Window, name = cfg.Item, CheckWindow(responses, *window), name+"-"+cfg.Item
	}
	if !cfg.NoHistory {
		r.History = CheckHistory(ctx, responses, cfg.Stock, stock, readAt, purchases != nil, info.PerUserLimit, cfg.HistoryDir, name)
	}
	r.Concurrency = cfg.Concurrency
	if open {
		r.Open = SummarizeOpen(responses, cfg.open())
		r.Errors -= r.Open.Unanswered // counted apart: Summarize's Errors has them
		r.Concurrency = 0
	}
	if purchases != nil {
		if r.Buyers, err = Verify(ctx, client, cfg.URL, VerifyConfig{Info: info, Drain: cfg.Drain, AdminToken: cfg.AdminToken}, responses); err != nil {
			return nil, err
		}
		r.Buyers.Users, r.Buyers.RetryRate = cfg.Users, cfg.RetryRate
	} else if info.Ledger && cfg.Item == "" {
		// Best effort: a run without buyers never failed on the ledger.
		if l, err := GetLedger(ctx, client, cfg.URL, cfg.AdminToken); err == nil {
			r.Ledger = &l
		}
	}
	if timedOut && open {
		r.TimedOut = true
		return r, fmt.Errorf("%w after %v: %d of %d buyers sent, %d unanswered", ErrTimeout, cfg.Timeout, r.Open.Sent, r.Open.Planned, r.Open.Unanswered)
	}
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
	orders := map[string]bool{} // order ids told (buyer-aware runs)
	buyerAware := false
	for _, resp := range responses {
		latencies = append(latencies, resp.Latency)
		buyerAware = buyerAware || resp.Key != ""
		if resp.Outcome == OutcomeSold || resp.Outcome == OutcomeReplayed {
			orders[cmp.Or(resp.Order, "(none)")] = true
		}
		if resp.Cut {
			r.Cut++
			continue
		}
		switch resp.Outcome {
		case OutcomeReplayed:
			r.Replayed++
		case OutcomeLimitReached:
			r.LimitReached++
		case OutcomeNotStarted:
			r.NotStarted++
		case OutcomeEnded:
			r.Ended++
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
	// Units the buyers were told they got. With idempotency keys a unit
	// can be told only by a replay (its first send was cut), so a
	// buyer-aware run counts distinct order ids instead of sold answers.
	told := int64(r.Sold + r.UnconfirmedSold)
	if buyerAware {
		told = int64(len(orders))
		for _, resp := range responses {
			if resp.Outcome == OutcomeUnconfirmed && resp.Settled && !orders[resp.Attempt] {
				told++
			}
		}
	}
	books := api.Books{Stock: r.Stock, Lucky: r.Lucky, Returned: s.Returned, Initial: want}
	r.Oversold = max(books.Oversold(), told-want)
	if len(s.Segments) > 0 {
		r.Segments = slices.Clone(s.Segments)
	}
	for _, n := range s.Segments {
		if n < 0 {
			r.NegativeSegments++
		}
	}
	// A request that got no answer once it may have reached a replica
	// (timed out, reset, cut; not refused at connect) may have sold: the
	// books may hold up to that many units more than were told.
	for _, resp := range responses {
		if resp.Unanswered() && !resp.Cut && unansweredCause(resp.Err) != CauseRefused {
			r.InDoubt++
		}
	}
	r.Consistent = books.Balanced() && told <= r.Lucky && r.Lucky <= told+int64(r.InDoubt) && r.Stock >= 0 &&
		r.NegativeSegments == 0
	r.FalseSoldOut = falseSoldOuts(responses)
	r.DurationMS = ms(elapsed)
	r.SellingFromMS, r.SellingUntilMS = selling(responses)
	if elapsed > 0 {
		r.RPS = float64(len(responses)) / elapsed.Seconds()
	}
	slices.Sort(latencies)
	r.P50ms = ms(percentile(latencies, 50))
	r.P99ms = ms(percentile(latencies, 99))
	return r
}

// falseSoldOuts counts the sold_out answers received before the send time
// of the latest-sent request that sold (answered sold, or unconfirmed and
// settled sold by its receipt). The criterion is exact, not a heuristic:
// that sale was decided after its request was sent, hence after the
// sold_out answer was decided, and a unit was still there for it; with no
// reset during the run the stock never goes back up, so a unit was there
// when the sold_out was decided too. Sent and Received carry monotonic
// readings from one process, so the comparison is safe against wall-clock
// steps.
func falseSoldOuts(responses []Response) int {
	var lastSale time.Time
	for _, r := range responses {
		if r.Outcome == OutcomeSold || (r.Outcome == OutcomeUnconfirmed && r.Settled) {
			if r.Sent.After(lastSale) {
				lastSale = r.Sent
			}
		}
	}
	n := 0
	for _, r := range responses {
		if r.Outcome == OutcomeSoldOut && !r.Received.IsZero() && r.Received.Before(lastSale) {
			n++
		}
	}
	return n
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
	if r.Open != nil {
		r.Open.writeText(&b, r)
	} else {
		fmt.Fprintf(&b, "%s: %d requests, %d in flight, initial stock %d\n", r.what(), r.Requests, r.Concurrency, r.Initial)
		fmt.Fprintf(&b, "  sold %d  sold out %d  busy %d  fenced %d  lock lost %d  errors %d\n",
			r.Sold, r.SoldOut, r.Busy, r.Fenced, r.LockLost, r.Errors)
	}
	if r.Buyers != nil && r.Open == nil {
		fmt.Fprintf(&b, "  replayed %d  limit reached %d  cut by the client %d\n",
			r.Replayed, r.LimitReached, r.Cut)
	}
	if (r.NotStarted > 0 || r.Ended > 0 || r.Window != nil) && r.Open == nil { // the open loop's table has them
		fmt.Fprintf(&b, "  not started %d  ended %d\n", r.NotStarted, r.Ended)
	}
	if w := r.Window; w != nil {
		fmt.Fprintf(&b, "  %s\n", w.Text())
	}
	if r.Unconfirmed > 0 {
		fmt.Fprintf(&b, "  unconfirmed %d (%d of them sold, by their receipts)\n", r.Unconfirmed, r.UnconfirmedSold)
	}
	fmt.Fprintf(&b, "  stock %d  lucky %d  oversold %d  false sold-out %d\n", r.Stock, r.Lucky, r.Oversold, r.FalseSoldOut)
	if r.InDoubt > 0 {
		fmt.Fprintf(&b, "  no answer after reaching the cluster %d (each may have sold: lucky may exceed the sales told by that many)\n", r.InDoubt)
	}
	if len(r.Segments) > 0 {
		fmt.Fprintf(&b, "  segments %v  negative %d\n", r.Segments, r.NegativeSegments)
	}
	if l := r.Ledger; l != nil {
		fmt.Fprintf(&b, "  ledger: orders %d  buyers %d", l.Orders, l.Buyers)
		if l.Durable != nil && l.Lag != nil {
			fmt.Fprintf(&b, "  MySQL %d  lag %d (right after the sale)", *l.Durable, *l.Lag)
		}
		b.WriteString("\n")
	}
	if len(r.Replicas) > 0 {
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(r.Replicas)) {
			parts = append(parts, fmt.Sprintf("%s %d", name, r.Replicas[name]))
		}
		fmt.Fprintf(&b, "  sold per replica: %s\n", strings.Join(parts, ", "))
	}
	if h := r.History; h != nil {
		fmt.Fprintf(&b, "  history: %s\n", h.Text())
	}
	fmt.Fprintf(&b, "  %.0f req/s  p50 %.1f ms  p99 %.1f ms  (%.0f ms)\n", r.RPS, r.P50ms, r.P99ms, r.DurationMS)
	for _, e := range r.ErrorSample {
		fmt.Fprintf(&b, "  error: %s\n", e)
	}
	switch {
	case r.TimedOut && r.Open != nil:
		b.WriteString("  TIMED OUT before every buyer was sent and answered\n")
	case r.TimedOut:
		b.WriteString("  TIMED OUT before every request was sent\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if r.Buyers != nil {
		if err := r.Buyers.WriteText(w); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "verdict: %s\n", r.Verdict())
	return err
}

// OK reports whether the run passed every check: consistent books, no
// segment negative, no false sold-out, every answer in its place in an
// item's window (and none outside a window for the default sale), every
// buyers' check when the run had buyers, and a linearizable history when
// it was checked. `seckill run` exits non-zero otherwise.
func (r *Report) OK() bool {
	return r.Consistent && r.FalseSoldOut == 0 && r.windowOK() && (r.Buyers == nil || r.Buyers.OK()) && r.History.Passed()
}

// windowOK: the item's answers fit its window; the default sale, which
// has none, answered neither not_started nor ended.
func (r *Report) windowOK() bool {
	if r.Window == nil {
		return r.NotStarted == 0 && r.Ended == 0
	}
	return r.Window.OK()
}

// what names the sale in the text: the backend, and the item if any.
func (r *Report) what() string {
	if r.Item != "" {
		return fmt.Sprintf("backend %s, item %s", r.Backend, r.Item)
	}
	return "backend " + r.Backend
}

// Verdict is "consistent", or the worst failed check: "OVERSOLD",
// "NEGATIVE SEGMENT", "INCONSISTENT", "FALSE SOLD-OUT", "OUTSIDE THE
// WINDOW", "BUYERS: " and the first failed buyers' check, or the history's.
func (r *Report) Verdict() string {
	switch {
	case r.Oversold > 0:
		return "OVERSOLD"
	case r.NegativeSegments > 0:
		return "NEGATIVE SEGMENT"
	case !r.Consistent:
		return "INCONSISTENT"
	case r.FalseSoldOut > 0:
		return "FALSE SOLD-OUT"
	case !r.windowOK():
		return "OUTSIDE THE WINDOW"
	case r.Buyers != nil && !r.Buyers.OK():
		return "BUYERS: " + r.Buyers.Failed()
	case !r.History.Passed() && r.History.Unknown:
		return "HISTORY UNCHECKED: the search ran out of time"
	case !r.History.Passed():
		return "NOT LINEARIZABLE"
	default:
		return "consistent"
	}
}

// selling is Report.SellingFromMS and SellingUntilMS: the first sold
// answer's receipt and the last sold request's sending, when the first
// comes before the last.
func selling(responses []Response) (from, until int64) {
	var first, last time.Time
	for _, r := range responses {
		if r.Outcome != OutcomeSold {
			continue
		}
		if first.IsZero() || r.Received.Before(first) {
			first = r.Received
		}
		if r.Sent.After(last) {
			last = r.Sent
		}
	}
	if first.IsZero() || !first.Before(last) {
		return 0, 0
	}
	return first.UnixMilli(), last.UnixMilli()
}
