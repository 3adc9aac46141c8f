package bench

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/health"
	"seckill/internal/lab/loadgen"
	"seckill/internal/metrics"
	"seckill/internal/servers"
	"seckill/internal/stock"
	"seckill/internal/stockd"
)

// flood.go: the flash sale's flood, open loop. Buyers arrive at a fixed
// rate, as a sale's buyers do, far more of them than units; the locked
// sale (the default), the locked sale with combining and atomic mode take
// the same floods side by side, each the median of Runs runs. What is
// judged is what a buyer sees: every buyer answered, losers told at once,
// busy only while units remain, the stock gone about as fast as atomic
// mode sells it, and latency per result (sold and sold_out apart, so fast
// losers cannot hide slow winners).

// RowsFlood: the floods (E2EConfig.Rows).
const RowsFlood = "flood"

// A flood is a rate of buyers for a duration against a stock.
type flood struct {
	name     string
	stock    int
	rate     int
	duration time.Duration
}

// DefaultFloodRate is the floods' arrival rate, buyers a second, unless
// E2EConfig.FloodRate says otherwise; floodBuyers is how many buyers a
// full flood sends, whatever its rate: 30 for each unit of the first.
const (
	DefaultFloodRate = 6000
	floodBuyers      = 30000
)

// floods are the floods in report order: 30 buyers per unit, most of them
// after the sell-out (the losers' case); and a stock that lasts, at a rate
// above what one lock sells, so the queue for the lock is what is tried.
// A machine that cannot send rate buyers a second (floodGoals says so)
// takes a lower one, and the same buyers over a longer flood.
func floods(quick bool, rate int) []flood {
	if quick {
		return []flood{{"30× stock", 30, 300, time.Second}, {"above the lock's rate", 400, 600, time.Second}}
	}
	rate = cmp.Or(rate, DefaultFloodRate)
	d := time.Duration(floodBuyers) * time.Second / time.Duration(rate)
	return []flood{
		{"30× stock", floodBuyers / 30, rate, d},
		{"above the lock's rate", 20000, rate, d},
	}
}

// LabelLockedRetry is the locked sale whose buyers send again on busy.
const LabelLockedRetry = "locked, buyers retry busy"

// floodRetries is how many times a LabelLockedRetry buyer answered busy
// sends again, after the answer's Retry-After.
const floodRetries = 3

// floodModes are the ways of selling each flood meets, in report order:
// the last is the locked sale again, its busy buyers sending again as a
// client that honours Retry-After does (shown, not judged).
var floodModes = []struct {
	label, backend  string
	atomic, combine bool
	retryBusy       int
}{
	{LabelLocked, "redis", false, false, 0},
	{LabelLockedCombine, "redis", false, true, 0},
	{"atomic", "none", true, false, 0},
	{LabelLockedRetry, "redis", false, false, floodRetries},
}

// FloodRow is one mode under one flood: its median run's figures.
type FloodRow struct {
	Flood      string  `json:"flood"`
	Mode       string  `json:"mode"`
	Stock      int     `json:"stock"`
	Rate       int     `json:"rate"`
	Seconds    float64 `json:"seconds"`
	Planned    int     `json:"planned"`
	Sent       int     `json:"sent"`
	Sold       int     `json:"sold"`
	SoldOut    int     `json:"sold_out"`
	Busy       int     `json:"busy"`
	Errors     int     `json:"errors"` // HTTP answers that are errors
	Unanswered int     `json:"unanswered"`
	// BusyAfterSellOut counts busy answers sent after the last unit was
	// sold: a buyer turned away when nothing was left to wait for.
	BusyAfterSellOut int `json:"busy_after_sell_out"`
	// Resent is the re-sends of buyers answered busy (LabelLockedRetry),
	// BuyersResent the buyers who made them.
	Resent       int `json:"resent,omitempty"`
	BuyersResent int `json:"buyers_resent,omitempty"`
	// SellOutMS is from the first arrival to the answer of the last unit
	// sold (the whole stock, when Consistent).
	SellOutMS float64 `json:"sell_out_ms"`
	// P50 and P99 per result, in ms.
	SoldP50    float64 `json:"sold_p50_ms"`
	SoldP99    float64 `json:"sold_p99_ms"`
	SoldOutP50 float64 `json:"sold_out_p50_ms"`
	SoldOutP99 float64 `json:"sold_out_p99_ms"`
	BusyP99    float64 `json:"busy_p99_ms"`
	// Consistent: every run's books balanced, no oversale, no false
	// sold-out; SoldAll: every run sold the whole stock.
	Consistent bool `json:"consistent"`
	// RedisBytesPerUnit is what the stock Redis grew by per unit sold
	// (INFO used_memory_dataset after the run less after its reset; median of the
	// runs): the ledger's order, index entry and receipt of an anonymous
	// sale. 0 when not measured.
	RedisBytesPerUnit float64 `json:"redis_bytes_per_unit,omitempty"`
	// Sections is what the lock did in the median run, read from the
	// replicas' metrics: critical sections run, their mean batch (buyers
	// served by one: 1 without combining), and the p99 lock wait (the
	// upper bound of its bucket; with combining, a member's time queued
	// for its batch). Nil when not read (atomic mode takes no lock).
	Sections *Sections `json:"sections,omitempty"`
	SoldAll  bool      `json:"sold_all"`
	Runs     []float64 `json:"runs_sell_out_ms,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// runFlood runs every flood against every mode on cl. The modes' runs are
// interleaved (run 1 of each mode, then run 2, …) so that a machine whose
// load drifts charges the drift to every mode alike.
func runFlood(ctx context.Context, cl replicas, cfg E2EConfig, quick bool, log *slog.Logger) []FloodRow {
	var rows []FloodRow
	for _, f := range floods(quick, cfg.FloodRate) {
		reps := make([][]*loadgen.Report, len(floodModes))
		bytesPerUnit := make([][]float64, len(floodModes))
		errs := make([]string, len(floodModes))
		sections := map[*loadgen.Report]*Sections{}
		for run := 0; run < cfg.Runs && ctx.Err() == nil; run++ {
			for i, m := range floodModes {
				if errs[i] != "" {
					continue
				}
				edit := func(c *stockd.Config) {
					c.Work.Delay = stock.Delay{}
					c.Stock.Combine = m.combine
					if m.atomic {
						c.Stock.Mode = "atomic"
					}
				}
				log.Info("flood: switching replicas", "flood", f.name, "mode", m.label, "run", run+1)
				if err := cl.SetBackend(ctx, m.backend, stockd.Overrides(edit)); err != nil {
					errs[i] = firstLine(err)
					continue
				}
				// A quick run is a smoke test of the rows, not a
				// measurement: it starts cold, as it always has.
				if !quick {
					if err := warmUp(ctx, cl, f); err != nil {
						errs[i] = "warm-up: " + firstLine(err)
						continue
					}
				}
				mem := newMemoryProbe(ctx, cl, f.stock)
				sec := newSectionsProbe(ctx, cl)
				rep, err := loadgen.Run(ctx, loadgen.Config{
					URL: cl.URL(), AdminToken: cl.AdminToken(), Stock: f.stock,
					Rate: f.rate, Duration: f.duration, RetryBusy: m.retryBusy,
					// The lab and the tests check the histories; 30,000
					// buyers with thousands in flight are beyond the
					// checker's minute.
					NoHistory: true,
				})
				if err != nil {
					errs[i] = firstLine(err)
					continue
				}
				bytesPerUnit[i] = append(bytesPerUnit[i], mem.perUnit(ctx, rep.Sold))
				reps[i] = append(reps[i], rep)
				sections[rep] = sec.since(ctx)
			}
		}
		for i, m := range floodModes {
			row := floodRow(f, m.label, reps[i], sections)
			row.RedisBytesPerUnit = median(bytesPerUnit[i])
			if errs[i] != "" {
				row.Error, row.Consistent = errs[i], false
			}
			log.Info("flood", "flood", f.name, "mode", m.label, "sell_out_ms", int(row.SellOutMS),
				"sold_p99_ms", row.SoldP99, "sold_out_p99_ms", row.SoldOutP99, "unanswered", row.Unanswered,
				"busy", row.Busy, "consistent", row.Consistent, "err", row.Error)
			rows = append(rows, row)
		}
	}
	return rows
}

// warmUp runs a short sale on replicas just started, at the flood's rate
// and not measured, so that the flood's first buyers (its winners, at 30×
// stock) do not pay for cold processes: connection pools still dialing
// (the load tool's, nginx's upstream, each replica's Redis), scripts not
// yet cached, heaps not yet grown. On a small machine that start costs a
// fresh replica's first second hundreds of ms, in every mode alike; a
// sale's own buyers meet replicas that have been serving for a while.
func warmUp(ctx context.Context, cl replicas, f flood) error {
	_, err := loadgen.Run(ctx, loadgen.Config{
		URL: cl.URL(), AdminToken: cl.AdminToken(), Stock: max(f.stock/10, 1),
		Rate: f.rate, Duration: warmUpFor, NoHistory: true,
	})
	return err
}

// warmUpFor is how long warmUp's sale lasts.
const warmUpFor = time.Second

// floodRow is a mode's row from its runs: the median run by sell-out time.
func floodRow(f flood, mode string, reps []*loadgen.Report, sections map[*loadgen.Report]*Sections) FloodRow {
	row := FloodRow{Flood: f.name, Mode: mode, Stock: f.stock, Rate: f.rate, Seconds: f.duration.Seconds(),
		Planned: f.rate * int(f.duration/time.Millisecond) / 1000, Consistent: len(reps) > 0}
	if len(reps) == 0 {
		row.Error = "no run"
		return row
	}
	type measured struct {
		rep     *loadgen.Report
		sellOut float64
	}
	ms := make([]measured, len(reps))
	for i, rep := range reps {
		row.SoldAll = row.SoldAll || i == 0
		row.SoldAll = row.SoldAll && rep.Sold == f.stock
		var sell float64
		if rep.Open != nil {
			sell = rep.Open.SellOutMS
		}
		ms[i] = measured{rep, sell}
		row.Runs = append(row.Runs, ms[i].sellOut)
		// Books: every answer accounted for, nothing oversold. A stock
		// the flood did not sell out is no error (SoldAll says so).
		row.Consistent = row.Consistent && rep.OK() && rep.Oversold == 0 && rep.FalseSoldOut == 0 && rep.Open != nil
	}
	slices.SortFunc(ms, func(a, b measured) int { return cmpFloat(a.sellOut, b.sellOut) })
	med := ms[len(ms)/2]
	rep, o := med.rep, med.rep.Open
	row.SellOutMS = med.sellOut
	row.Sections = sections[rep]
	row.Sold, row.SoldOut, row.Busy, row.Errors = rep.Sold, rep.SoldOut, rep.Busy, rep.Errors
	if o != nil {
		row.Sent, row.Unanswered = o.Sent, o.Unanswered
		row.BusyAfterSellOut = o.BusyAfterSellOut
		row.Resent, row.BuyersResent = o.Resent, o.BuyersResent
	}
	// Latencies are the median of the runs' own: one run's p99 of a
	// thousand winners is its ten slowest, and one pause of a replica
	// moves it by tens of ms on a small machine.
	row.SoldP50 = medianOf(reps, api.Sold, func(r loadgen.ResultStats) float64 { return r.P50ms })
	row.SoldP99 = medianOf(reps, api.Sold, func(r loadgen.ResultStats) float64 { return r.P99ms })
	row.SoldOutP50 = medianOf(reps, api.SoldOut, func(r loadgen.ResultStats) float64 { return r.P50ms })
	row.SoldOutP99 = medianOf(reps, api.SoldOut, func(r loadgen.ResultStats) float64 { return r.P99ms })
	row.BusyP99 = medianOf(reps, api.Busy, func(r loadgen.ResultStats) float64 { return r.P99ms })
	return row
}

// medianOf is the median over reps of a figure of their answers of one
// result; runs without an open-loop report count none.
func medianOf(reps []*loadgen.Report, result api.Result, figure func(loadgen.ResultStats) float64) float64 {
	var vs []float64
	for _, rep := range reps {
		if rep.Open != nil {
			vs = append(vs, figure(rep.Open.Result(string(result))))
		}
	}
	return median(vs)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// floodGoals judges each flood's locked rows against its atomic row.
func (r *Report) floodGoals() []Goal {
	var goals []Goal
	for _, f := range floods(r.Quick, 0) { // by name only
		atomic, ok := r.floodRow(f.name, "atomic")
		for _, mode := range []string{LabelLocked, LabelLockedCombine} {
			row, ok2 := r.floodRow(f.name, mode)
			g := Goal{
				Name: fmt.Sprintf("flood %s: %s", f.name, mode),
				Want: "every buyer answered; busy ≤ 5 % and only while units remain; sold out within 2× atomic's time; p99 ≤ 2× atomic's per result; books exact",
			}
			switch {
			case !ok || !ok2:
				g.Unmeasured = "flood rows not run"
			case atomic.Error != "" || !atomic.Consistent:
				g.Unmeasured = "atomic flood row failed"
			case atomic.Sent < atomic.Planned:
				// The load tool itself fell behind the sale that needs no
				// lock: the machine cannot carry this flood, and every
				// latency measured is its queue, not the lock's.
				g.Unmeasured = fmt.Sprintf("this machine could not send the flood: atomic mode got %d of %d buyers out in time (a lower seckill bench --flood-rate fits it)", atomic.Sent, atomic.Planned)
			case row.Error != "":
				g.Unmeasured = row.Error
			default:
				g.Measured, g.Met = floodVerdict(row, atomic)
			}
			goals = append(goals, g)
		}
	}
	return goals
}

// floodVerdict measures row against atomic: what it missed, or "all".
func floodVerdict(row, atomic FloodRow) (string, bool) {
	ratio := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return a / b
	}
	sell := ratio(row.SellOutMS, atomic.SellOutMS)
	// A p99 under a millisecond is the machine's noise: 0.4 ms vs 0.9 ms
	// is no slowdown a buyer sees, so both sides count at least 1 ms.
	p99 := func(a, b float64) float64 { return ratio(max(a, 1), max(b, 1)) }
	soldX, outX := p99(row.SoldP99, atomic.SoldP99), p99(row.SoldOutP99, atomic.SoldOutP99)
	busyPct := 100 * float64(row.Busy) / float64(max(row.Sent, 1))
	if !row.SoldAll {
		sell = 0 // not sold out at all: shown as such below
	}
	ok := row.Unanswered == 0 && row.Sent == row.Planned && busyPct <= 5 && row.BusyAfterSellOut == 0 &&
		row.SoldAll && sell <= 2 && soldX <= 2 && outX <= 2 && row.Consistent
	sold := fmt.Sprintf("sold out in %.0f ms = %.2f× atomic's %.0f", row.SellOutMS, sell, atomic.SellOutMS)
	if !row.SoldAll {
		sold = fmt.Sprintf("sold %d of %d (atomic: all in %.0f ms)", row.Sold, row.Stock, atomic.SellOutMS)
	}
	return fmt.Sprintf("%d/%d answered; busy %.1f %% (%d after the sell-out); %s; p99 sold %.1f ms = %.2f×, sold_out %.1f ms = %.2f×; books %s",
		row.Sent-row.Unanswered, row.Planned, busyPct, row.BusyAfterSellOut, sold,
		row.SoldP99, soldX, row.SoldOutP99, outX, map[bool]string{true: "exact", false: "NOT exact"}[row.Consistent]), ok
}

// floodRow finds the row of mode under the flood named name.
func (r *Report) floodRow(name, mode string) (FloodRow, bool) {
	for _, row := range r.Flood {
		if row.Flood == name && row.Mode == mode {
			return row, true
		}
	}
	return FloodRow{}, false
}

// writeFlood writes the floods' table.
func (r *Report) writeFlood(p func(string, ...any)) {
	if len(r.Flood) == 0 {
		return
	}
	p("\n## Floods (open loop)\n\n")
	p("Buyers arrive at a fixed rate (`seckill run --rate`, vegeta's pacer), far more than units, against\n")
	p("3 replicas behind nginx on stockd's defaults (redis lock, `lock.wait_timeout` 5s, `lock.shed` on).\n")
	p("*%s* is stockd's default sale (`stock.combine` on); *%s* is the articles' sale, one critical\n", LabelLockedCombine, LabelLocked)
	p("section per buyer (`stock.combine: false`).\n")
	p("Each row is the median of its runs by *sold out in*: from the first arrival to the answer of the\n")
	p("last unit. p50/p99 are per result, so fast losers cannot hide slow winners, and the median of the runs' own.\n")
	p("*busy late* are busy answers to buyers who arrived after the last unit was sold. Each run starts on replicas\n")
	p("warmed by a one-second sale at the same rate. *Redis B/unit* is what the stock Redis grew\n")
	p("by per unit sold (INFO used_memory_dataset, after the run less after its reset): anonymous sales, ledger on.\n")
	p("*%s* is the locked sale again, each buyer answered busy sending again after its Retry-After\n", LabelLockedRetry)
	p("(up to %d times, `seckill run --retry-busy %d`); a buyer's row counts its last answer, timed from its first send.\n", floodRetries, floodRetries)
	p("*sections* are the critical sections the replicas ran (`seckill_sale_batch_size`), *batch* the buyers one served\n")
	p("on average (1 without combining), *lock wait p99* the bucket of `seckill_lock_wait_seconds` holding its p99\n")
	p("(with combining, a member's wait queued for its batch too): where a winner's time went before its section.\n\n")
	p("| flood | mode | stock | buyers/s × s | sent | sold | sold out | busy | busy late | re-sent | errors | unanswered | sold out in | runs (ms) | sold p50 | sold p99 | sold_out p50 | sold_out p99 | sections | batch | lock wait p99 | Redis B/unit | books |\n")
	p("|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, row := range r.Flood {
		books := "exact"
		if !row.Consistent {
			books = "**NO** " + cellText(row.Error)
		}
		resent := "-"
		if row.Mode == LabelLockedRetry {
			resent = fmt.Sprintf("%d by %d", row.Resent, row.BuyersResent)
		}
		secs, batch, wait := "-", "-", "-"
		if sc := row.Sections; sc != nil {
			secs, batch, wait = fmt.Sprint(sc.Count), fmt.Sprintf("%.1f", sc.MeanBatch), fmt.Sprintf("≤ %.3g ms", sc.LockWaitP99ms)
		}
		p("| %s | %s | %d | %d × %.0f | %d | %d | %d | %d | %d | %s | %d | %d | %.0f ms | %s | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %s | %s | %s | %.0f | %s |\n",
			row.Flood, row.Mode, row.Stock, row.Rate, row.Seconds, row.Sent, row.Sold, row.SoldOut, row.Busy,
			row.BusyAfterSellOut, resent, row.Errors, row.Unanswered, row.SellOutMS, runList(row.Runs),
			row.SoldP50, row.SoldP99, row.SoldOutP50, row.SoldOutP99, secs, batch, wait, row.RedisBytesPerUnit, books)
	}
}

// Sections is what the replicas' locks did during a run (FloodRow.Sections).
type Sections struct {
	Count         uint64  `json:"count"`
	MeanBatch     float64 `json:"mean_batch"`
	LockWaitP99ms float64 `json:"lock_wait_p99_ms"`
}

// sectionsProbe scrapes every replica's batch and lock-wait histograms
// before a run, so that since can tell what the run added.
type sectionsProbe struct {
	urls          []string
	batch, waited metrics.Hist
}

// newSectionsProbe reads the histograms now; nil when cl cannot name its
// replicas.
func newSectionsProbe(ctx context.Context, cl replicas) *sectionsProbe {
	r, ok := cl.(interface {
		Replicas() int
		ReplicaURL(i int) string
	})
	if !ok {
		return nil
	}
	p := &sectionsProbe{}
	for i := range r.Replicas() {
		p.urls = append(p.urls, r.ReplicaURL(i)+"/metrics")
	}
	p.batch, p.waited = p.read(ctx)
	return p
}

func (p *sectionsProbe) read(ctx context.Context) (batch, waited metrics.Hist) {
	for _, u := range p.urls {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fams, err := metrics.Scrape(sctx, nil, u)
		cancel()
		if err != nil {
			continue // a replica not read counts nothing
		}
		batch = batch.Add(fams.Histogram("seckill_sale_batch_size"))
		waited = waited.Add(fams.Histogram("seckill_lock_wait_seconds"))
	}
	return batch, waited
}

// since is what the replicas' locks did since the probe; nil when no
// section ran (atomic mode) or the probe is nil.
func (p *sectionsProbe) since(ctx context.Context) *Sections {
	if p == nil {
		return nil
	}
	batch, waited := p.read(ctx)
	batch, waited = batch.Sub(p.batch), waited.Sub(p.waited)
	if batch.Count == 0 {
		return nil
	}
	return &Sections{Count: batch.Count, MeanBatch: batch.Mean(), LockWaitP99ms: 1000 * waited.Quantile(0.99)}
}

// memoryProbe reads the stock Redis's used_memory after a reset, so that a
// run's growth can be told per unit sold.
type memoryProbe struct {
	rdb    *redis.Client
	before int64
}

// newMemoryProbe resets the sale (the run resets it again: a no-op for
// memory) and reads used_memory; nil when cl has no Redis to ask.
func newMemoryProbe(ctx context.Context, cl replicas, stockN int) *memoryProbe {
	r, ok := cl.(interface{ Redis() *servers.Process })
	if !ok || r.Redis() == nil {
		return nil
	}
	if err := loadgen.Reset(ctx, loadgen.NewClient(1, 10*time.Second), cl.URL(), cl.AdminToken(), stockN); err != nil {
		return nil
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Redis().Addr()})
	before, err := health.DatasetMemory(ctx, rdb)
	if err != nil {
		_ = rdb.Close()
		return nil
	}
	return &memoryProbe{rdb: rdb, before: before}
}

// perUnit is the growth since the probe per unit sold (0 when unknown),
// and closes the probe.
func (m *memoryProbe) perUnit(ctx context.Context, sold int) float64 {
	if m == nil {
		return 0
	}
	defer m.rdb.Close()
	after, err := health.DatasetMemory(ctx, m.rdb)
	if err != nil || sold <= 0 {
		return 0
	}
	return float64(after-m.before) / float64(sold)
}

// median of vs, 0 for none (the lower middle of an even count).
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
