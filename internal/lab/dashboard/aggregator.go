package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/metrics"
	"seckill/internal/stock/redisstore"
)

// The metric names stockd exports (internal/metrics).
const (
	metricResults  = "seckill_reduce_total"
	metricLockWait = "seckill_lock_wait_seconds"
)

// Defaults for Config.
const (
	DefaultInterval    = 250 * time.Millisecond
	DefaultRateWindow  = 2 * time.Second
	DefaultWaitWindow  = 10 * time.Second
	DefaultHistory     = 60 * time.Second
	DefaultHTTPTimeout = time.Second
)

// Config says what an Aggregator polls.
type Config struct {
	// Replicas are the stockd base URLs, one per replica (not nginx: the
	// per-replica numbers need each replica's own /metrics). Required.
	Replicas []string
	// Redis, if set, is read for stock, lucky and initial at one instant,
	// by the sale's own reader (redisstore.Store.Books). The caller owns it.
	Redis redis.UniversalClient
	// StockKey and LuckyKey are stock.key and stock.lucky_key (defaults
	// "stock", "lucky"); the initial stock is read from StockKey+":initial",
	// where stockd's reset writes it. Segments is stock.segments (default 1).
	StockKey, LuckyKey string
	Segments           int
	// Client makes the HTTP calls; the default has DefaultHTTPTimeout.
	Client *http.Client
	// Interval is Run's poll period. RateWindow is the span sales/s is
	// measured over; WaitWindow the span of the lock wait quantiles;
	// History how much of the stock and sales/s curves the state carries.
	Interval, RateWindow, WaitWindow, History time.Duration
	// Logger receives poll failures at debug level. The default discards.
	Logger *slog.Logger
}

// State is what the page draws: one poll of the cluster, with rates and
// quantiles over the recent polls. It is the JSON of GET /api/state.
type State struct {
	At       time.Time   `json:"at"`
	Books    Books       `json:"books"`
	Backend  string      `json:"backend"` // lock backend; "mixed (a, b)" when replicas disagree, "" when none answered
	Leader   LeaderView  `json:"leader"`
	Replicas []Replica   `json:"replicas"`
	Results  []Count     `json:"results"` // every api.Results label, summed over replicas, since each started
	LockWait LockWait    `json:"lock_wait"`
	Sales    float64     `json:"sales_per_sec"` // all replicas
	History  []HistPoint `json:"history"`
	Items    Items       `json:"items"` // read at most every second (items.go)
}

// Books are the sale's invariants: stock + lucky must equal initial.
type Books struct {
	Known   bool   `json:"known"` // false when neither Redis nor any replica answered
	Source  string `json:"source"`
	Stock   int64  `json:"stock"`
	Lucky   int64  `json:"lucky"`
	Initial int64  `json:"initial"`
	// Learned: no initial key was found; Initial is learned as the audit
	// learns it (stock + lucky while lucky is 0).
	Learned bool `json:"learned"`
	// Oversold: the books break an invariant, each in Problems
	// (api.Books.Problems, the audit's judge).
	Oversold bool     `json:"oversold"`
	Problems []string `json:"problems,omitempty"`
	Excess   int64    `json:"excess"` // stock + lucky - initial
	Error    string   `json:"error,omitempty"`
	// Census: with reservations, the orders' states against the counters
	// (census.go); nil without them.
	Census   *CensusView `json:"census,omitempty"`
	segments []int64     // each segment's stock, when split
	returned int64       // units reservations gave back (api.Books.Returned)
}

// LeaderView is the election as the replicas report it.
type LeaderView struct {
	Election string `json:"election"` // election backend, "none" when off
	Leader   string `json:"leader"`
	Term     uint64 `json:"term"`
	Error    string `json:"error,omitempty"`
}

// Replica is one replica's row.
type Replica struct {
	URL   string `json:"url"`
	Name  string `json:"name"`
	Up    bool   `json:"up"`
	Ready bool   `json:"ready"`
	NotOK string `json:"not_ready,omitempty"` // the failing /readyz check
	// Warnings are /readyz's warnings (memory, items, clock, eviction),
	// which leave the replica ready.
	Warnings string  `json:"warnings,omitempty"`
	Backend  string  `json:"backend"`
	Leader   bool    `json:"leader"`
	Sold     int64   `json:"sold"` // sold since the replica started
	Sales    float64 `json:"sales_per_sec"`
	Error    string  `json:"error,omitempty"`
}

// Count is one result label's total.
type Count struct {
	Result string `json:"result"`
	N      int64  `json:"n"`
}

// LockWait is the lock wait distribution, in seconds.
type LockWait struct {
	// Available: some replica exports the histogram at all.
	Available bool `json:"available"`
	// Span says what the quantiles cover: "last 10s", or "since start"
	// when the window saw no acquisition.
	Span  string  `json:"span"`
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
}

// HistPoint is one poll on the curves.
type HistPoint struct {
	T     int64   `json:"t"` // unix ms
	Stock int64   `json:"stock"`
	Sales float64 `json:"sales_per_sec"`
}

// sample is one replica's counters at one poll.
type sample struct {
	at     time.Time
	sold   int64
	wait   histogram
	hasHis bool
}

// Aggregator polls the cluster. Poll and Latest are safe for concurrent use.
type Aggregator struct {
	cfg    Config
	client *http.Client
	log    *slog.Logger

	mu          sync.Mutex
	latest      State
	samples     map[string][]sample // replica URL → recent samples, oldest first
	history     []HistPoint
	initial     api.InitialLearner // the initial stock, when no key holds it
	items       Items              // the last items read
	itemsAt     time.Time          // when they were read
	itemsEvery  time.Duration      // itemsEvery when 0 (tests set it)
	census      *CensusView        // the last census read
	censusAt    time.Time          // when it was read
	censusEvery time.Duration      // censusEvery when 0 (tests set it)
	// store reads the sale's books from Config.Redis; nil without it.
	store *redisstore.Store
}

// New returns an Aggregator for cfg.
func New(cfg Config) (*Aggregator, error) {
	if len(cfg.Replicas) == 0 {
		return nil, errors.New("dashboard: no replica URLs")
	}
	for i, u := range cfg.Replicas {
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, fmt.Errorf("dashboard: replica URL %q: want http://host:port", u)
		}
		cfg.Replicas[i] = u
	}
	if cfg.StockKey == "" {
		cfg.StockKey = "stock"
	}
	if cfg.LuckyKey == "" {
		cfg.LuckyKey = "lucky"
	}
	cfg.Segments = max(cfg.Segments, 1)
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.RateWindow <= 0 {
		cfg.RateWindow = DefaultRateWindow
	}
	if cfg.WaitWindow <= 0 {
		cfg.WaitWindow = DefaultWaitWindow
	}
	if cfg.History <= 0 {
		cfg.History = DefaultHistory
	}
	a := &Aggregator{cfg: cfg, client: cfg.Client, log: cfg.Logger, samples: map[string][]sample{}}
	if cfg.Redis != nil {
		// With the ledger's names, which the census reads; the books
		// read the same keys either way.
		a.store = redisstore.NewStore(cfg.Redis, redisstore.Keys{Stock: cfg.StockKey, Lucky: cfg.LuckyKey, Segments: cfg.Segments}.Derive(true))
	}
	if a.client == nil {
		a.client = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	return a, nil
}

// Replicas returns the replica base URLs, normalized.
func (a *Aggregator) Replicas() []string { return append([]string(nil), a.cfg.Replicas...) }

// Run polls every Interval until ctx is done.
func (a *Aggregator) Run(ctx context.Context) {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		a.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Latest is the state of the last Poll.
func (a *Aggregator) Latest() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.latest
}

// replicaRead is what one poll got from one replica.
type replicaRead struct {
	info    api.Info
	infoErr error
	ready   api.Ready
	readyOK bool
	readyE  error
	leader  api.Leader
	leadErr error
	fams    map[string]*dto.MetricFamily
	metrErr error
	stock   api.Stock
	stockE  error
}

// Poll reads every replica (concurrently) and Redis once, folds the result
// into the recent samples, and returns the new state.
func (a *Aggregator) Poll(ctx context.Context) State {
	now := time.Now()
	reads := make([]replicaRead, len(a.cfg.Replicas))
	var wg sync.WaitGroup
	for i, base := range a.cfg.Replicas {
		wg.Go(func() { reads[i] = a.readReplica(ctx, base) })
	}
	var books Books
	wg.Go(func() { books = a.readRedis(ctx) })
	var items *Items
	if a.itemsDue(now) {
		wg.Go(func() {
			it := a.readItems(ctx)
			items = &it
		})
	}
	var census *CensusView
	censusRead := a.censusDue(now)
	if censusRead {
		wg.Go(func() { census = a.readCensus(ctx) })
	}
	wg.Wait()

	a.mu.Lock()
	defer a.mu.Unlock()
	if items != nil {
		a.items = *items
	}
	if censusRead {
		a.census = census
	}
	st := State{At: now, Items: a.items}
	st.Books = a.books(books, reads)
	if st.Books.Known {
		st.Books.Census = a.census
	}
	st.Replicas, st.Results, st.LockWait, st.Sales = a.fold(now, reads)
	st.Backend = backendOf(st.Replicas)
	st.Leader = leaderOf(reads)
	for i := range st.Replicas {
		st.Replicas[i].Leader = st.Leader.Leader != "" && st.Replicas[i].Name == st.Leader.Leader
	}
	if st.Books.Known {
		a.history = append(a.history, HistPoint{T: now.UnixMilli(), Stock: st.Books.Stock, Sales: st.Sales})
	}
	cut := now.Add(-a.cfg.History).UnixMilli()
	for len(a.history) > 0 && a.history[0].T < cut {
		a.history = a.history[1:]
	}
	st.History = append([]HistPoint(nil), a.history...)
	a.latest = st
	return st
}

func (a *Aggregator) readReplica(ctx context.Context, base string) replicaRead {
	var r replicaRead
	var wg sync.WaitGroup
	wg.Go(func() { _, r.infoErr = a.getJSON(ctx, base+"/info", &r.info) })
	wg.Go(func() {
		var code int
		code, r.readyE = a.getJSON(ctx, base+"/readyz", &r.ready)
		r.readyOK = r.readyE == nil && code == http.StatusOK
	})
	wg.Go(func() {
		var code int
		code, r.leadErr = a.getJSON(ctx, base+"/leader", &r.leader)
		if r.leadErr == nil && code != http.StatusOK {
			r.leadErr = fmt.Errorf("GET /leader: %d %s", code, r.leader.Error)
		}
	})
	wg.Go(func() { r.fams, r.metrErr = a.getMetrics(ctx, base+"/metrics") })
	if a.cfg.Redis == nil {
		wg.Go(func() {
			var code int
			code, r.stockE = a.getJSON(ctx, base+"/stock", &r.stock)
			if r.stockE == nil && code != http.StatusOK {
				r.stockE = fmt.Errorf("GET /stock: %d", code)
			}
		})
	}
	wg.Wait()
	return r
}

// getJSON decodes any answer with a JSON body (a 503 /readyz carries which
// check failed) and returns its status.
func (a *Aggregator) getJSON(ctx context.Context, url string, into any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("dashboard: %w", err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("dashboard: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(into); err != nil {
		return resp.StatusCode, fmt.Errorf("dashboard: GET %s: %d: %w", url, resp.StatusCode, err)
	}
	return resp.StatusCode, nil
}

func (a *Aggregator) getMetrics(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	fams, err := metrics.Scrape(ctx, a.client, url)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return fams, nil
}

// readRedis reads the books as the sale does (redisstore.Store.Books, at
// one instant); Known is false without Redis.
func (a *Aggregator) readRedis(ctx context.Context) Books {
	if a.store == nil {
		return Books{}
	}
	b, err := a.store.Books(ctx)
	if err != nil {
		return Books{Source: "redis", Error: err.Error()}
	}
	return Books{Known: true, Source: "redis", Stock: b.Stock, Lucky: b.Lucky, Initial: b.Initial, Learned: !b.HaveInitial, segments: b.Segments, returned: b.Returned}
}

// books settles the books from Redis or, without it, from the first
// replica's GET /stock; it learns the initial stock when no key holds it.
// Called with a.mu held.
func (a *Aggregator) books(b Books, reads []replicaRead) Books {
	if a.cfg.Redis == nil {
		b = Books{Source: "replica", Learned: true}
		var errs []string
		for _, r := range reads {
			if r.stockE == nil {
				b.Known, b.Stock, b.Lucky, b.returned = true, r.stock.Stock, r.stock.Lucky, r.stock.Returned
				break
			}
			errs = append(errs, r.stockE.Error())
		}
		if !b.Known {
			b.Error = strings.Join(errs, "; ")
		}
	}
	if !b.Known {
		return b
	}
	if b.Learned {
		b.Initial = a.initial.Learn(b.Stock, b.Lucky-b.returned) // as the audit learns it
	}
	judged := api.Books{Stock: b.Stock, Lucky: b.Lucky, Returned: b.returned, Initial: b.Initial, Segments: b.segments}
	b.Excess, b.Problems = judged.Excess(), judged.Problems()
	b.Oversold = len(b.Problems) > 0
	return b
}

// fold adds this poll's counters to the samples and derives the rows, the
// result totals, the lock wait quantiles and the total sales rate. Called
// with a.mu held.
func (a *Aggregator) fold(now time.Time, reads []replicaRead) ([]Replica, []Count, LockWait, float64) {
	rows := make([]Replica, len(reads))
	totals := map[string]int64{}
	var waitNow, waitThen histogram
	var lw LockWait
	var sales float64
	keepFrom := now.Add(-max(a.cfg.RateWindow, a.cfg.WaitWindow) - a.cfg.Interval)
	for i, r := range reads {
		base := a.cfg.Replicas[i]
		row := Replica{URL: base, Name: base, Backend: r.info.Backend}
		if r.infoErr == nil && r.info.Replica != "" {
			row.Name = r.info.Replica
		}
		row.Up = r.infoErr == nil || r.metrErr == nil
		row.Ready = r.readyOK
		if !row.Ready {
			row.NotOK = notReady(r)
		}
		if r.readyE == nil {
			row.Warnings = warnings(r.ready)
		}
		if err := errors.Join(r.infoErr, r.metrErr); err != nil {
			row.Error = err.Error()
		}
		if r.metrErr == nil {
			counts := resultCounts(r.fams[metricResults])
			for k, v := range counts {
				totals[k] += v
			}
			s := sample{at: now, sold: counts[string(api.Sold)]}
			s.wait, s.hasHis = histogramOf(r.fams[metricLockWait])
			lw.Available = lw.Available || s.hasHis
			ss := a.samples[base]
			// A counter that went down is a restarted replica: its old
			// samples describe another process.
			if n := len(ss); n > 0 && s.sold < ss[n-1].sold {
				ss = nil
			}
			ss = append(ss, s)
			for len(ss) > 1 && ss[0].at.Before(keepFrom) {
				ss = ss[1:]
			}
			a.samples[base] = ss
			row.Sold = s.sold
			if then, ok := oldestSince(ss, now.Add(-a.cfg.RateWindow)); ok && now.Sub(then.at) > 0 {
				row.Sales = float64(s.sold-then.sold) / now.Sub(then.at).Seconds()
			}
			sales += row.Sales
			if s.hasHis {
				waitNow.add(s.wait)
				if then, ok := oldestSince(ss, now.Add(-a.cfg.WaitWindow)); ok && then.hasHis {
					waitThen.add(then.wait)
				} else {
					waitThen.add(s.wait)
				}
			}
		} else {
			delete(a.samples, base)
		}
		rows[i] = row
	}
	counts := make([]Count, 0, len(api.Results))
	for _, res := range api.Results {
		counts = append(counts, Count{Result: string(res), N: totals[string(res)]})
	}
	if lw.Available {
		win := waitNow.sub(waitThen)
		lw.Span = fmt.Sprintf("last %s", a.cfg.WaitWindow)
		if win.count == 0 {
			win, lw.Span = waitNow, "since start"
		}
		// An empty histogram has no quantiles (NaN, which JSON cannot
		// carry): the page shows "no acquisition yet" for a zero count.
		if lw.Count = int64(win.count); lw.Count > 0 {
			lw.P50, lw.P99 = win.quantile(0.5), win.quantile(0.99)
		}
	}
	return rows, counts, lw, sales
}

// oldestSince is the oldest sample at or after from, excluding the newest
// one (which is now); false when there is only one.
func oldestSince(ss []sample, from time.Time) (sample, bool) {
	for _, s := range ss[:len(ss)-1] {
		if !s.at.Before(from) {
			return s, true
		}
	}
	if len(ss) > 1 {
		// Polls slower than the window: the previous one is the best base.
		return ss[len(ss)-2], true
	}
	return sample{}, false
}

func notReady(r replicaRead) string {
	if r.readyE != nil {
		return r.readyE.Error()
	}
	var bad []string
	for _, c := range []struct{ name, v string }{{"redis", r.ready.Redis}, {"lock", r.ready.Lock}, {"fence", r.ready.Fence}} {
		if c.v != api.OK {
			bad = append(bad, c.name+": "+c.v)
		}
	}
	return strings.Join(bad, "; ")
}

// warnings joins /readyz's warnings, each named by its field.
func warnings(r api.Ready) string {
	var out []string
	for _, c := range []struct{ name, v string }{{"memory", r.Memory}, {"items", r.Items}, {"clock", r.Clock}, {"eviction", r.Eviction}} {
		if c.v != "" {
			out = append(out, c.name+": "+c.v)
		}
	}
	return strings.Join(out, "; ")
}

// resultCounts reads seckill_reduce_total by result label.
func resultCounts(f *dto.MetricFamily) map[string]int64 {
	out := map[string]int64{}
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "result" {
				out[l.GetValue()] += int64(m.GetCounter().GetValue())
			}
		}
	}
	return out
}

func backendOf(rows []Replica) string {
	var seen []string
	for _, r := range rows {
		if r.Backend != "" && !contains(seen, r.Backend) {
			seen = append(seen, r.Backend)
		}
	}
	switch len(seen) {
	case 0:
		return ""
	case 1:
		return seen[0]
	}
	return "mixed (" + strings.Join(seen, ", ") + ")"
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// leaderOf picks the highest term any replica reports: a replica that has
// not yet seen a failover still reports the old, lower term.
func leaderOf(reads []replicaRead) LeaderView {
	var v LeaderView
	var errs []string
	answered := false
	for _, r := range reads {
		if r.leadErr != nil {
			errs = append(errs, r.leadErr.Error())
			continue
		}
		if !answered || r.leader.Term > v.Term || (v.Leader == "" && r.leader.Leader != "") {
			v = LeaderView{Election: r.leader.Backend, Leader: r.leader.Leader, Term: r.leader.Term}
			answered = true
		}
	}
	if !answered && len(errs) > 0 {
		v.Error = strings.Join(errs, "; ")
	}
	if v.Election == "" && answered {
		v.Election = "on"
	}
	return v
}
