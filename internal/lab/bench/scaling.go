package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"seckill/internal/auth"
	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/stockd"
)

// scaling.go: the end-to-end rows that sell one hot item past
// the one-lock bound — request combining (stock.combine) and segmented
// stock (stock.segments) — against the locked path and the atomic ceiling,
// through nginx with the same replicas.
//
// The micro-benchmark's rows are stable because they are sized to sell for
// seconds; the older end-to-end rows (3,000 requests, ≈1 s) are not. These
// rows are sized the same way: a short calibration sale (Calibrate, far
// more stock than it can sell) gives the row's rate, the stock is set so
// that one run sells for Target, and a run that still finished under
// MinFiring resizes the next from its own rate. Each row runs Runs times
// and reports the run with the median sales/s, so one descheduled second
// on two shared cores does not decide a goal.

// Row sets of E2EConfig.Rows.
const (
	// RowsBackends: one row per lock backend (locked) and the atomic
	// ceiling, 3,000 requests each: the original end-to-end table.
	RowsBackends = "backends"
	// RowsScaling: combining and segments on the redis backend, the atomic
	// ceiling with and without segments, and the uncontended case; long
	// rows, the median of Runs runs.
	RowsScaling = "scaling"
)

// MinFiring is how long a non-quick scaling run should fire at least.
const MinFiring = 5 * time.Second

// Labels of the scaling rows the goals are judged by.
const (
	LabelLocked        = "locked"
	LabelLockedCombine = "locked+combine"
	LabelAtomic        = "atomic"
	LabelUncontended   = "uncontended (locked, 1 in flight)"
)

// variant is one scaling row's stockd configuration.
type variant struct {
	label       string
	backend     string // lock.backend ("none" with atomic)
	atomic      bool
	combine     bool
	segments    int
	uncontended bool // one request in flight
	// ledger is the order ledger's form (ledger rows only): "" leaves
	// stockd's default (stock.ledger on, anonymous sales).
	ledger string
	// users, when positive, makes each request a purchase by one of users
	// named buyers with its own Idempotency-Key (loadgen.Config.Users).
	users int
}

// segmentsLabel names a segmented row: "segments=8", "segments=8+combine".
func segmentsLabel(n int, combine bool) string {
	s := "segments=" + strconv.Itoa(n)
	if combine {
		s += "+combine"
	}
	return s
}

// scalingVariants lists the rows in report order: the locked path on one
// segment, then by segments (without, then with combining), then the
// ceilings and the uncontended case.
func scalingVariants() []variant {
	vs := []variant{
		{label: LabelLocked, backend: "redis", segments: 1},
		{label: LabelLockedCombine, backend: "redis", combine: true, segments: 1},
	}
	for _, combine := range []bool{false, true} {
		for _, n := range []int{2, 4, 8} {
			vs = append(vs, variant{label: segmentsLabel(n, combine), backend: "redis", combine: combine, segments: n})
		}
	}
	return append(vs,
		variant{label: LabelAtomic, backend: "none", atomic: true, segments: 1},
		variant{label: "atomic+" + segmentsLabel(8, false), backend: "none", atomic: true, segments: 8},
		variant{label: LabelUncontended, backend: "redis", segments: 1, uncontended: true},
	)
}

// env is the variant's replica configuration on top of E2EConfig.env.
func (v variant) env(c E2EConfig) map[string]string {
	return stockd.Overrides(c.env(v.atomic), func(c *stockd.Config) {
		c.Stock.Segments, c.Stock.Combine = max(v.segments, 1), v.combine
		switch v.ledger {
		case LedgerOff:
			c.Stock.Ledger = false
		case LedgerAnonymous, LedgerBuyers:
			c.Stock.Ledger = true
		case LedgerDurable:
			c.Stock.Ledger, c.Orders.Durable = true, true
		}
	})
}

// E2ERun is one run of a scaling row.
type E2ERun struct {
	Stock       int     `json:"stock"`
	Requests    int     `json:"requests"`
	Seconds     float64 `json:"seconds"`
	SalesPerSec float64 `json:"sales_per_sec"`
	OK          bool    `json:"ok"`
	// Short: it fired for less than E2EConfig.minFiring (MinFiring), so
	// it is not one of the runs the median is taken over.
	Short bool `json:"short,omitempty"`
	// CPU is where the run's CPU went.
	CPU RunCPU `json:"cpu"`
}

// String is the run's sales/s for tables, in parentheses when Short.
func (r E2ERun) String() string {
	if r.Short {
		return fmt.Sprintf("(%.0f)", r.SalesPerSec)
	}
	return fmt.Sprintf("%.0f", r.SalesPerSec)
}

// runScaling runs every scaling row on cl, switching the replicas per row.
func runScaling(ctx context.Context, cl *localcluster.Cluster, cfg E2EConfig, quick bool, log *slog.Logger) []E2ERow {
	return runVariants(ctx, cl, cfg, quick, "end to end (scaling)", scalingVariants(), log)
}

// runVariants runs the long rows vs on cl, one after the other, switching
// the replicas per row; what names them in the log.
func runVariants(ctx context.Context, cl replicas, cfg E2EConfig, quick bool, what string, vs []variant, log *slog.Logger) []E2ERow {
	var rows []E2ERow
	for _, v := range vs {
		if ctx.Err() != nil {
			break
		}
		row := variantRow(v, cfg)
		if switchTo(ctx, cl, cfg, v, &row, what, log) {
			ps, _ := cl.(procSource)
			scalingRow(ctx, cl.URL(), cl.AdminToken(), cl.Minter(), ps, cfg, quick, v, &row, log)
		}
		logRow(log, what, row)
		rows = append(rows, row)
	}
	return rows
}

// replicas is what the long rows need of the cluster
// (*localcluster.Cluster): restarting the replicas with a configuration,
// and where to sell.
type replicas interface {
	SetBackend(ctx context.Context, backend string, env map[string]string) error
	URL() string
	AdminToken() string
	Minter() *auth.Minter
}

// variantRow is v's row before it runs.
func variantRow(v variant, cfg E2EConfig) E2ERow {
	row := E2ERow{Name: v.label, Backend: v.backend, Mode: "locked", Combine: v.combine, Segments: v.segments,
		Ledger: v.ledger, Users: v.users, Concurrency: cfg.Concurrency}
	if v.atomic {
		row.Mode = "atomic"
	}
	if v.uncontended {
		row.Concurrency = 1
	}
	return row
}

// switchTo restarts cl's replicas as v; false (row.Error set) when they
// did not all start.
func switchTo(ctx context.Context, cl replicas, cfg E2EConfig, v variant, row *E2ERow, what string, log *slog.Logger) bool {
	log.Info(what+": switching replicas", "row", v.label)
	if err := cl.SetBackend(ctx, v.backend, v.env(cfg)); err != nil {
		row.Error, row.Consistent = firstLine(err), false
		return false
	}
	return true
}

func logRow(log *slog.Logger, what string, row E2ERow) {
	log.Info(what, "row", row.Label(), "sales/s", int(row.SalesPerSec), "runs", len(row.Runs),
		"seconds", round2(row.Seconds), "consistent", row.Consistent, "false_sold_out", row.FalseSoldOut, "err", row.Error)
}

// scalingRow calibrates (unless quick), runs the row cfg.Runs times against
// the cluster at url and fills row from the median run.
func scalingRow(ctx context.Context, url, token string, mint *auth.Minter, ps procSource, cfg E2EConfig, quick bool, v variant, row *E2ERow, log *slog.Logger) {
	lr := newLongRow(url, token, mint, cfg, quick, v, row)
	lr.procs = ps
	if !lr.calibrate(ctx, log) {
		return
	}
	for lr.more() {
		lr.runOnce(ctx)
	}
	lr.finish()
}

// maxRedo is how many runs a long row may run beyond cfg.Runs to replace
// runs that were too short to count.
const maxRedo = 2

// longRow is a long row between its runs: its sizing and the runs so far,
// so that the runs of several rows can be interleaved (runLedger).
type longRow struct {
	url, token        string
	mint              *auth.Minter // signs the named buyers' tokens
	cfg               E2EConfig
	quick             bool
	v                 variant
	row               *E2ERow
	stock, requests   int
	reps              []*loadgen.Report
	counted, attempts int
	stopped           bool       // an error ended the row
	procs             procSource // for the runs' CPU split; may be nil
}

// newLongRow sizes row from cfg: the quick size, until calibrate.
func newLongRow(url, token string, mint *auth.Minter, cfg E2EConfig, quick bool, v variant, row *E2ERow) *longRow {
	lr := &longRow{url: url, token: token, mint: mint, cfg: cfg, quick: quick, v: v, row: row, stock: cfg.Stock, requests: cfg.Requests}
	if v.uncontended && quick {
		lr.stock, lr.requests = min(lr.stock, 20), min(lr.requests, 30)
	}
	row.Consistent = true
	return lr
}

// calibrate sizes the row from a calibration sale (not when quick); false
// (row.Error set, the row stopped) when it failed.
func (lr *longRow) calibrate(ctx context.Context, log *slog.Logger) bool {
	if lr.quick {
		return true
	}
	rate, err := calibrateE2E(ctx, lr.url, lr.token, lr.mint, lr.cfg, lr.row.Concurrency, lr.v.users)
	if err != nil {
		lr.stop("calibration: " + firstLine(err))
		return false
	}
	lr.stock, lr.requests = lr.cfg.size(rate, lr.row.Concurrency)
	log.Info("end to end: calibrated", "row", lr.v.label, "sales/s", int(rate), "stock", lr.stock, "requests", lr.requests)
	return true
}

// stop ends the row with an error: it is not measured as asked.
func (lr *longRow) stop(why string) {
	lr.row.Error, lr.row.Consistent, lr.stopped = why, false, true
}

// more reports whether the row wants another run: fewer than cfg.Runs
// counted and redo runs left. A run that fired for less than minFiring
// (the rate outgrew its calibration) is not counted and is run again,
// resized from its own rate, at most maxRedo times per row; its sale still
// counts for the invariant.
func (lr *longRow) more() bool {
	return !lr.stopped && lr.counted < lr.cfg.Runs && lr.attempts < lr.cfg.Runs+maxRedo
}

// runOnce runs the row once at its current size.
func (lr *longRow) runOnce(ctx context.Context) {
	row := lr.row
	lr.attempts++
	if ctx.Err() != nil {
		lr.stop(ctx.Err().Error())
		return
	}
	before := sampleCPU(lr.procs)
	rep, err := loadgen.Run(ctx, loadgen.Config{
		URL: lr.url, AdminToken: lr.token, Requests: lr.requests,
		Concurrency: row.Concurrency, Stock: lr.stock, Timeout: lr.cfg.Timeout, Users: lr.v.users, Minter: lr.mint,
	})
	after := sampleCPU(lr.procs)
	if rep != nil {
		run := E2ERun{Stock: lr.stock, Requests: lr.requests, Seconds: rep.DurationMS / 1000, OK: runOK(rep, lr.stock)}
		run.CPU = after.split(before, rep.Sold)
		if run.Seconds > 0 {
			run.SalesPerSec = float64(rep.Sold) / run.Seconds
		}
		run.Short = !lr.quick && run.Seconds < lr.cfg.minFiring().Seconds() && run.SalesPerSec > 0
		if run.Short {
			lr.stock, lr.requests = lr.cfg.size(run.SalesPerSec, row.Concurrency)
		} else {
			lr.counted++
		}
		if why := ledgerMismatch(lr.v.ledger, rep); why != "" {
			run.OK = false
			row.Error = why
		}
		if !run.OK && row.Error == "" {
			row.Error = runWhy(rep, lr.stock)
		}
		row.Runs = append(row.Runs, run)
		lr.reps = append(lr.reps, rep)
		row.Consistent = row.Consistent && run.OK
		row.FalseSoldOut += rep.FalseSoldOut
		row.NegativeSegments += rep.NegativeSegments
	}
	if err != nil {
		// Cut short or unreachable: the row is not measured as asked.
		lr.stop(firstLine(err))
	}
}

// finish fills the row from its median run.
func (lr *longRow) finish() {
	row := lr.row
	if len(lr.reps) == 0 {
		row.Consistent = false
		return
	}
	m := medianRun(row.Runs)
	rep, run := lr.reps[m], row.Runs[m]
	row.Requests, row.Stock, row.Seconds, row.SalesPerSec = run.Requests, run.Stock, run.Seconds, run.SalesPerSec
	row.Sold, row.SoldOut, row.Busy, row.Errors = rep.Sold, rep.SoldOut, rep.Busy, rep.Errors
	row.RPS, row.P50ms, row.P99ms = rep.RPS, rep.P50ms, rep.P99ms
	row.CPU = run.CPU
}

// runOK is a scaling run's invariant: the books balance, no segment went
// negative, no buyer was turned away while stock remained, and exactly the
// stock was sold with no error; a run with named buyers also passes every
// check of the buyers' verdict (rep.OK).
func runOK(rep *loadgen.Report, stock int) bool {
	return rep.OK() && rep.Oversold == 0 && rep.Errors == 0 && rep.Sold == stock
}

// runWhy says which of runOK's checks a run failed, for the row's error:
// a row that reads only "consistent false" cannot be diagnosed.
func runWhy(rep *loadgen.Report, stock int) string {
	var why []string
	if !rep.Consistent {
		why = append(why, fmt.Sprintf("books (stock %d, lucky %d, initial %d)", rep.Stock, rep.Lucky, rep.Initial))
	}
	if rep.Oversold != 0 || rep.FalseSoldOut != 0 {
		why = append(why, fmt.Sprintf("oversold %d, false sold-out %d", rep.Oversold, rep.FalseSoldOut))
	}
	if rep.Errors != 0 {
		why = append(why, fmt.Sprintf("%d errors %v", rep.Errors, rep.ErrorSample))
	}
	if rep.Sold != stock {
		why = append(why, fmt.Sprintf("sold %d of %d", rep.Sold, stock))
	}
	if rep.Buyers != nil && !rep.Buyers.OK() {
		why = append(why, "buyers' check "+rep.Buyers.Failed())
	}
	if !rep.History.Passed() {
		why = append(why, "history check failed")
	}
	if len(why) == 0 {
		return "run failed its window check"
	}
	return "run failed: " + strings.Join(why, "; ")
}

// medianRun is the index of the run with the median sales/s (the lower
// middle of an even count) among the runs that are not Short, or among all
// when every run was.
func medianRun(runs []E2ERun) int {
	var idx []int
	for i, r := range runs {
		if !r.Short {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		for i := range runs {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case runs[a].SalesPerSec < runs[b].SalesPerSec:
			return -1
		case runs[a].SalesPerSec > runs[b].SalesPerSec:
			return 1
		}
		return 0
	})
	return idx[(len(idx)-1)/2]
}

// minFiring is how long a run must fire to be counted: MinFiring, or five
// sixths of Target when that is lower (a shorter, rougher run on purpose).
// The sixth is the margin a run needs when it sells a little faster than
// it was sized for.
func (c E2EConfig) minFiring() time.Duration { return min(MinFiring, c.Target*5/6) }

// calibrationStock is the calibration sale's stock: more than any row sells
// in Calibrate here (the atomic ceiling is ≈10–15k/s), and small enough
// that loadgen's response buffer for it stays a few MiB.
const calibrationStock = 100_000

// calibrationTries is how many times a calibration that sold nothing is
// sent again, each window four times the last: on a loaded machine the
// first window may pass before the first sale is answered, and a rate needs
// at least one.
const calibrationTries = 3

// calibrateE2E sells for cfg.Calibrate with far more stock than that takes
// and returns the sales/s it reached; users > 0 sells to named buyers, as
// the row does. The run is cut by its timeout, so its books (and buyers'
// verdict) are not checked: a request in flight at the cut may still sell.
// A window that sold nothing is sent again, longer (calibrationTries).
func calibrateE2E(ctx context.Context, url, token string, mint *auth.Minter, cfg E2EConfig, concurrency, users int) (float64, error) {
	window := cfg.Calibrate
	for try := 1; ; try++ {
		rep, err := loadgen.Run(ctx, loadgen.Config{
			URL: url, AdminToken: token, Requests: calibrationStock, Minter: mint,
			Concurrency: concurrency, Stock: calibrationStock, Timeout: window, Users: users,
		})
		if err != nil && !errors.Is(err, loadgen.ErrTimeout) {
			return 0, err
		}
		// The cut left sales in flight on the replicas; one still writing
		// after the next reset (which clears the fences) would corrupt
		// that run's books. Wait until the stock stops moving.
		if err := quiesce(ctx, url, 100*time.Millisecond, 10*time.Second); err != nil {
			return 0, err
		}
		if rep != nil && rep.Sold > 0 && rep.DurationMS > 0 {
			return float64(rep.Sold) / (rep.DurationMS / 1000), nil
		}
		if try == calibrationTries {
			return 0, fmt.Errorf("bench: calibration sold nothing in %d windows, the last %v", try, window)
		}
		window *= 4
	}
}

// quiesce reads GET /stock every interval until two reads in a row agree,
// or fails after limit.
func quiesce(ctx context.Context, url string, interval, limit time.Duration) error {
	client := loadgen.NewClient(1, limit)
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	prev, err := loadgen.GetStock(ctx, client, url)
	for {
		if err != nil {
			return fmt.Errorf("bench: waiting for the stock to settle: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: stock still moving %v after the calibration cut: %w", limit, ctx.Err())
		case <-tick.C:
		}
		cur, err2 := loadgen.GetStock(ctx, client, url)
		if err2 == nil && cur.Stock == prev.Stock && cur.Lucky == prev.Lucky {
			return nil
		}
		prev, err = cur, err2
	}
}

// size is the stock that sells for Target at rate, and the requests that
// sell it: a tenth more (at least two per buyer in flight), so every run
// ends with sold_out answers for the false sold-out check to judge.
func (c E2EConfig) size(rate float64, concurrency int) (stock, requests int) {
	stock = int(math.Ceil(rate * c.Target.Seconds()))
	stock = min(max(stock, 200), 2_000_000)
	return stock, stock + max(stock/10, 2*concurrency)
}

// ScalingRow returns the scaling row with label, if it ran.
func (r *Report) ScalingRow(label string) (E2ERow, bool) {
	for _, e := range r.Scaling {
		if e.Label() == label {
			return e, true
		}
	}
	return E2ERow{}, false
}

// usableE2E says why an end-to-end row cannot be judged, or "".
func usableE2E(e E2ERow, ok bool) string {
	switch {
	case !ok:
		return "row not run"
	case e.Unavailable:
		return e.Label() + " unavailable"
	case e.Error != "" || !e.Consistent:
		return e.Label() + " failed"
	}
	return ""
}

// scalingGoals are the scaling goals, ratios of scaling rows of this run.
func (r *Report) scalingGoals() []Goal {
	ratio := func(name, a, b string, want float64, pct bool) Goal {
		g := Goal{Name: name}
		if pct {
			g.Want = fmt.Sprintf("%s ≥ %.0f%% of %s sales/s (median of runs, same run)", a, 100*want, b)
		} else {
			g.Want = fmt.Sprintf("%s ≥ %.1f× %s sales/s (median of runs, same run)", a, want, b)
		}
		ra, oka := r.ScalingRow(a)
		rb, okb := r.ScalingRow(b)
		if why := usableE2E(ra, oka); why != "" {
			g.Unmeasured = why
			return g
		}
		if why := usableE2E(rb, okb); why != "" {
			g.Unmeasured = why
			return g
		}
		if rb.SalesPerSec <= 0 {
			g.Unmeasured = b + " sold nothing"
			return g
		}
		x := ra.SalesPerSec / rb.SalesPerSec
		if pct {
			g.Measured = fmt.Sprintf("%.0f%% (%.0f vs %.0f sales/s)", 100*x, ra.SalesPerSec, rb.SalesPerSec)
		} else {
			g.Measured = fmt.Sprintf("%.2f× (%.0f vs %.0f sales/s)", x, ra.SalesPerSec, rb.SalesPerSec)
		}
		g.Met = x >= want
		return g
	}
	inv := Goal{Name: "end to end: every scaling row's invariant",
		Want: "every run of every scaling row: books balance, sold = stock, no error, 0 false sold-out, no segment negative"}
	runs, bad := 0, []string{}
	falseSO, neg := 0, 0
	for _, e := range r.Scaling {
		if e.Unavailable {
			continue
		}
		runs += len(e.Runs)
		falseSO += e.FalseSoldOut
		neg += e.NegativeSegments
		if !e.Consistent || e.Error != "" {
			bad = append(bad, e.Label())
		}
	}
	switch {
	case len(r.Scaling) == 0:
		inv.Unmeasured = "scaling rows not run"
	default:
		inv.Measured = fmt.Sprintf("%d rows, %d runs: %d false sold-out, %d negative segments", len(r.Scaling), runs, falseSO, neg)
		if len(bad) > 0 {
			inv.Measured += fmt.Sprintf("; failed: %v", bad)
		}
		inv.Met = len(bad) == 0
	}
	return []Goal{
		ratio("end to end: locked+combine vs atomic", LabelLockedCombine, LabelAtomic, 0.7, true),
		ratio("end to end: segments=8 vs locked", segmentsLabel(8, false), LabelLocked, 2.5, false),
		inv,
	}
}

// writeScaling is the markdown section of the scaling rows.
func (r *Report) writeScaling(p func(string, ...any), chart string) {
	if len(r.Scaling) == 0 {
		return
	}
	runs := 0
	for _, e := range r.Scaling {
		n := 0
		for _, run := range e.Runs {
			if !run.Short {
				n++
			}
		}
		runs = max(runs, n)
	}
	p("\n## End to end: combining and segments (loadgen → nginx → 3 stockd replicas)\n\n")
	p("Lock backend `redis`, `work.delay` 0, %d in flight (the uncontended row: 1). *combine* is\n", r.scalingConcurrency())
	p("`stock.combine: true` (the lock holder sells to every buyer queued in its process in one read\n")
	p("and one write); *segments* is `stock.segments` (the stock split over N keys, each with its own\n")
	p("lock and fence); *atomic* is `stock.mode: atomic` (one Lua script per sale, no lock).\n")
	if r.Quick {
		p("Quick run: one tiny run per row, no calibration.\n")
	} else {
		p("Each row's stock is sized from a short calibration sale to sell for %s per run; a run that\n", r.ScalingTarget)
		p("fired for less than %s is shown in parentheses, not counted, and run again resized from its\n", E2EConfig{Target: r.ScalingTarget}.minFiring())
		p("own rate. Each row shows the run with the median sales/s of its %d counted runs (*s/run* is\n", runs)
		p("that run's firing time), with every run's sales/s beside it.\n")
	}
	p("sales/s is units sold over the run's duration. *false sold-out* counts `sold_out` answers\n")
	p("received before a later sale's request was sent (a buyer turned away while stock remained);\n")
	p("*neg. seg.* counts segments read back below zero; both are summed over the runs, and the\n")
	p("invariant also wants the books balanced, every unit sold and no error in every run.\n")
	if chart != "" {
		p("\n![end-to-end sales/s against segments](%s)\n", chart)
	}
	p("\n| row | segments | combine | in flight | stock | s/run | sales/s | runs (sales/s) | × locked | %% of atomic | p50 | p99 | sold out | false sold-out | neg. seg. | invariant |\n")
	p("|---|--:|---|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	locked, lockedOK := r.ScalingRow(LabelLocked)
	atom, atomOK := r.ScalingRow(LabelAtomic)
	for _, e := range r.Scaling {
		if e.Error != "" && len(e.Runs) == 0 {
			p("| %s | %d | %s | %d | | | | | | | | | | | | %s |\n", e.Label(), max(e.Segments, 1), yesNo(e.Combine), e.Concurrency, cell(e.Error, e.Unavailable))
			continue
		}
		xl, pa := "—", "—"
		if lockedOK && locked.SalesPerSec > 0 {
			xl = fmt.Sprintf("%.2f×", e.SalesPerSec/locked.SalesPerSec)
		}
		if atomOK && atom.SalesPerSec > 0 {
			pa = fmt.Sprintf("%.0f%%", 100*e.SalesPerSec/atom.SalesPerSec)
		}
		p("| %s | %d | %s | %d | %d | %.1f | %.0f | %s | %s | %s | %.1f ms | %.1f ms | %d | %d | %d | %s |\n",
			e.Label(), max(e.Segments, 1), yesNo(e.Combine), e.Concurrency, e.Stock, e.Seconds, e.SalesPerSec,
			e.RunsText(" / "), xl, pa, e.P50ms, e.P99ms, e.SoldOut, e.FalseSoldOut, e.NegativeSegments, invariantCell(e))
	}
	r.writeScalingCPU(p, r.Machine.CPUs)
}

// writeScalingCPU writes where the scaling rows' CPU went: on two cores,
// rows whose machine is busy throughout sell at what the CPU per sale
// allows, whatever the lock does.
func (r *Report) writeScalingCPU(p func(string, ...any), cpus int) {
	writeCPU(p, r.Scaling, cpus, "the median run of each row")
}

// writeCPU writes rows' CPU split (see writeScalingCPU); which says which
// run of a row it is.
func writeCPU(p func(string, ...any), rows []E2ERow, cpus int, which string) {
	measured := false
	for _, e := range rows {
		measured = measured || e.CPU.CoresBusy > 0
	}
	if !measured {
		return
	}
	cpus = max(cpus, 1)
	p("\nWhere the CPU went (%s; /proc over the run): *cores busy* is the whole\n", which)
	p("machine's non-idle CPU over the run's wall time, %d being every core busy; the rest is CPU µs per unit\n", cpus)
	p("sold: the 3 stockd replicas together, the stock's Redis, the load generator (this process), and\n")
	p("*other* (nginx, the lock server's own process when it is not the stock's Redis, and whatever else ran\n")
	p("on the shared machine). *CPU ceiling* is %d cores ÷ all of it: what the row could sell with every\n", cpus)
	p("core its own. A row near its ceiling with the cores busy is bound by the machine, not by its lock.\n\n")
	p("| row | sales/s | cores busy | stockd µs/sale | Redis µs/sale | loadgen µs/sale | other µs/sale | all µs/sale | CPU ceiling sales/s |\n")
	p("|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, e := range rows {
		c := e.CPU
		if c.CoresBusy <= 0 {
			continue
		}
		p("| %s | %.0f | %.2f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n",
			e.Label(), e.SalesPerSec, c.CoresBusy, c.Stockd, c.Redis, c.Loadgen, c.Other, c.Stockd+c.Redis+c.Loadgen+c.Other, c.ceiling(cpus))
	}
}

// scalingConcurrency is the contended rows' in-flight count.
func (r *Report) scalingConcurrency() int {
	for _, e := range r.Scaling {
		if e.Label() != LabelUncontended {
			return e.Concurrency
		}
	}
	return 0
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
