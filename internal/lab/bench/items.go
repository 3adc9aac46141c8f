package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"seckill/internal/lab/loadgen"
	"seckill/internal/stock"
	"seckill/internal/stockd"
)

// items.go: one lock per item, so items sell side by side. The same buyers
// (ItemsConcurrency in flight, closed loop) buy one item, then 8 items at
// once, each item its own lock, on stockd's default locked sale; every
// request sells (each item's stock is its share of the requests), so the
// rate is units sold over the sale's span. Two critical sections: no work
// in it (the machine's CPU is the bound: its split says so), and
// ItemsWork of work (the lock is the bound, and items multiply it).

// RowsItems: the items rows (E2EConfig.Rows).
const RowsItems = "items"

// ItemsConcurrency is the buyers in flight in every items row, shared
// evenly by the items.
const ItemsConcurrency = 64

// ItemsWork is the work inside the lock of the lock-bound rows.
const ItemsWork = 2 * time.Millisecond

// itemsGoal is the items rows' goal: N items at least this many times one
// item's sales/s.
const itemsGoal = 4.0

// itemCounts are the rows of each critical section, one item first.
var itemCounts = []int{1, 8}

// ItemsRow is one items row: its median run's figures.
type ItemsRow struct {
	Work        time.Duration `json:"work_ns"`
	Items       int           `json:"items"`
	Concurrency int           `json:"concurrency"`
	// Units is every item's stock together, each run's requests (each
	// sells one).
	Units       int       `json:"units"`
	SalesPerSec float64   `json:"sales_per_sec"`
	Runs        []float64 `json:"runs_sales_per_sec,omitempty"`
	SoldP50     float64   `json:"sold_p50_ms"`
	SoldP99     float64   `json:"sold_p99_ms"`
	Busy        int       `json:"busy"`
	Errors      int       `json:"errors"`
	// CPU is the median run's CPU split.
	CPU RunCPU `json:"cpu,omitempty"`
	// Consistent: every run sold every unit once, each item's books
	// exact, nothing oversold.
	Consistent bool   `json:"consistent"`
	Error      string `json:"error,omitempty"`
}

// runItems runs the items rows on cl: per critical section, a calibration
// sale per row, then cfg.Runs runs of each row interleaved.
func runItems(ctx context.Context, cl replicas, cfg E2EConfig, quick bool, log *slog.Logger) []ItemsRow {
	ps, _ := cl.(procSource)
	var rows []ItemsRow
	for _, work := range []time.Duration{0, ItemsWork} {
		log.Info("items: switching replicas", "work", work)
		err := cl.SetBackend(ctx, "redis", stockd.Overrides(func(c *stockd.Config) {
			c.Work.Delay, c.Lock.WaitTimeout = stock.Delay{Min: work, Max: work}, time.Minute
		}))
		units := make([]int, len(itemCounts))
		reps := make([][]itemsRun, len(itemCounts))
		errs := make([]string, len(itemCounts))
		for i, n := range itemCounts {
			switch {
			case err != nil:
				errs[i] = firstLine(err)
			case quick:
				units[i] = 40 * n
			default:
				// Calibrate: a short sale of every row's shape, sized to
				// sell for Target at its rate.
				r := sellItems(ctx, cl, ps, n, max(n*ItemsConcurrency*10, 1000))
				if r.err != "" || r.salesPerSec <= 0 {
					errs[i] = "calibration: " + r.err
					continue
				}
				units[i] = max(int(math.Ceil(r.salesPerSec*cfg.Target.Seconds())), n*ItemsConcurrency)
				log.Info("items: calibrated", "work", work, "items", n, "sales/s", int(r.salesPerSec), "units", units[i])
			}
		}
		for run := 0; run < cfg.Runs && ctx.Err() == nil; run++ {
			for i, n := range itemCounts {
				if errs[i] != "" {
					continue
				}
				r := sellItems(ctx, cl, ps, n, units[i])
				if r.err != "" {
					errs[i] = r.err
				}
				reps[i] = append(reps[i], r)
			}
		}
		for i, n := range itemCounts {
			row := itemsRow(work, n, units[i], reps[i])
			if errs[i] != "" {
				row.Error, row.Consistent = errs[i], false
			}
			log.Info("items", "work", work, "items", n, "sales/s", int(row.SalesPerSec), "consistent", row.Consistent, "err", row.Error)
			rows = append(rows, row)
		}
	}
	return rows
}

// itemsRun is one sale of an items row.
type itemsRun struct {
	salesPerSec    float64
	p50, p99       float64
	busy, errors   int
	cpu            RunCPU
	consistent     bool
	err            string
	sold, expected int
	masters        []float64 // on a Redis Cluster, each master's µs per sale
}

// sellItems sells units over n items at once (ItemsConcurrency in flight,
// every request one unit) and measures it.
func sellItems(ctx context.Context, cl replicas, ps procSource, n, units int) itemsRun {
	per := (units + n - 1) / n
	before := sampleCPU(ps)
	s, err := loadgen.RunItems(ctx, loadgen.Config{
		URL: cl.URL(), AdminToken: cl.AdminToken(), Requests: per * n, Concurrency: ItemsConcurrency,
		Stock: per, Timeout: 2 * time.Minute,
		// The lab and the tests check the histories; these runs measure.
		NoHistory: true,
	}, loadgen.ItemIDs("bench", n))
	r := itemsRun{expected: per * n}
	if err != nil {
		r.err = firstLine(err)
	}
	if s == nil {
		return r
	}
	r.cpu = sampleCPU(ps).split(before, s.Sold)
	r.salesPerSec, r.sold = s.SalesPerSec, s.Sold
	r.consistent = s.OK(n) && s.Sold == r.expected && s.Oversold == 0
	r.p50, r.p99 = s.SoldP50ms, s.SoldP99ms
	for _, rep := range s.Items {
		r.busy += rep.Busy
		r.errors += rep.Errors
	}
	return r
}

// summarize is what a row takes from its runs (at least one): each run's
// sales/s, whether every run was consistent, and the median run by
// sales/s.
func summarize(runs []itemsRun) (rates []float64, consistent bool, median itemsRun) {
	consistent = true
	for _, r := range runs {
		rates = append(rates, r.salesPerSec)
		consistent = consistent && r.consistent
	}
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b itemsRun) int { return cmpFloat(a.salesPerSec, b.salesPerSec) })
	return rates, consistent, sorted[(len(sorted)-1)/2]
}

// itemsRow is a row from its runs: the median run by sales/s.
func itemsRow(work time.Duration, n, units int, runs []itemsRun) ItemsRow {
	row := ItemsRow{Work: work, Items: n, Concurrency: ItemsConcurrency, Units: units, Consistent: len(runs) > 0}
	if len(runs) == 0 {
		row.Error = "no run"
		return row
	}
	var med itemsRun
	row.Runs, row.Consistent, med = summarize(runs)
	row.SalesPerSec, row.SoldP50, row.SoldP99, row.Busy, row.Errors, row.CPU = med.salesPerSec, med.p50, med.p99, med.busy, med.errors, med.cpu
	return row
}

// itemsGoals judges each critical section's N items row against its one
// item row.
func (r *Report) itemsGoals() []Goal {
	var goals []Goal
	for _, work := range []time.Duration{0, ItemsWork} {
		one, ok1 := r.itemsRow(work, 1)
		for _, n := range itemCounts[1:] {
			g := Goal{
				Name: fmt.Sprintf("items, %v of work in the lock: %d items vs 1", work, n),
				Want: fmt.Sprintf("%d items ≥ %.0f× one item's sales/s, every book exact", n, itemsGoal),
			}
			many, ok2 := r.itemsRow(work, n)
			switch {
			case !ok1 || !ok2:
				g.Unmeasured = "items rows not run"
			case one.Error != "" || !one.Consistent || one.SalesPerSec <= 0:
				g.Unmeasured = "the one-item row failed"
			case many.Error != "" || !many.Consistent:
				g.Unmeasured = fmt.Sprintf("the %d-items row failed", n)
			default:
				x := many.SalesPerSec / one.SalesPerSec
				g.Measured = fmt.Sprintf("%.2f× (%.0f vs %.0f sales/s; CPU ceiling %.0f sales/s, %.2f cores busy)",
					x, many.SalesPerSec, one.SalesPerSec, many.CPU.ceiling(r.Machine.CPUs), many.CPU.CoresBusy)
				g.Met = x >= itemsGoal
			}
			goals = append(goals, g)
		}
	}
	return goals
}

// itemsRow finds the row of n items at work.
func (r *Report) itemsRow(work time.Duration, n int) (ItemsRow, bool) {
	for _, row := range r.Items {
		if row.Work == work && row.Items == n {
			return row, true
		}
	}
	return ItemsRow{}, false
}

// writeItems writes the items' table.
func (r *Report) writeItems(p func(string, ...any)) {
	if len(r.Items) == 0 {
		return
	}
	p("\n## Items side by side (one lock per item)\n\n")
	p("The same %d buyers in flight (closed loop, `seckill run --items N`) buy one item, then 8 items at\n", ItemsConcurrency)
	p("once, each its own lock, on stockd's default locked sale (redis lock) behind nginx; each row's stock\n")
	p("is sized from a calibration sale to sell for about %s and every request sells one unit, so *sales/s* is\n", r.ItemsTarget)
	p("units over the sale's span; median of the runs. With no work in the lock the machine's CPU is the\n")
	p("bound (*CPU ceiling*: the cores ÷ all CPU µs per sale); with %v of work in it each lock is.\n\n", ItemsWork)
	p("| work in the lock | items | units | sales/s | runs | sold p50 | sold p99 | busy | errors | cores busy | stockd µs/sale | Redis µs/sale | loadgen µs/sale | other µs/sale | CPU ceiling | books |\n")
	p("|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, row := range r.Items {
		books := "exact"
		if !row.Consistent {
			books = "**NO** " + cellText(row.Error)
		}
		c := row.CPU
		p("| %v | %d | %d | %.0f | %s | %.1f ms | %.1f ms | %d | %d | %.2f | %.0f | %.0f | %.0f | %.0f | %.0f | %s |\n",
			row.Work, row.Items, row.Units, row.SalesPerSec, runList(row.Runs), row.SoldP50, row.SoldP99, row.Busy, row.Errors,
			c.CoresBusy, c.Stockd, c.Redis, c.Loadgen, c.Other, c.ceiling(r.Machine.CPUs), books)
	}
}
