package bench

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"seckill/internal/lab/loadgen"
	"seckill/internal/stock"
	"seckill/internal/stockd"
)

// reserve.go: what reservations cost (docs/reservations.md). The same
// buyers (twice the units, each its own user) meet stockd's default sale
// three ways, side by side, the median of Runs runs each:
//   - today's sale: a unit sold is final;
//   - reservations, every winner paying at once: the price of the
//     lifecycle itself (a deadline set, a payment made and waited for);
//   - reservations, every third winner never paying: its unit comes
//     back after the window and sells again, until every unit is paid.
//
// The figure is the time from the first buyer to every unit final: sold,
// or paid. Every run is held to the books, and the reservations' to the
// census and each order's lifecycle (loadgen.RunReserve).

// RowsReserve: the reservations' cost (E2EConfig.Rows).
const RowsReserve = "reserve"

// The rows' sale: the demo's (cmd/seckill's reservations row).
const (
	reserveStock       = 300
	reserveBuyers      = 600
	reserveConcurrency = 50
	reserveWindow      = 2 * time.Second
	// reserveNeverPay: every third winner never pays.
	reserveNeverPay = 3
)

// reserveModes are the rows, in report order.
var reserveModes = []struct {
	label    string
	window   bool
	neverPay int
}{
	{"sale, no window", false, 0},
	{"reservations, every winner pays", true, 0},
	{"reservations, a third never pay", true, reserveNeverPay},
}

// ReserveRow is one mode's median run.
type ReserveRow struct {
	Mode   string  `json:"mode"`
	Stock  int     `json:"stock"`
	Buyers int     `json:"buyers"`
	Window float64 `json:"window_s"` // orders.payment_window; 0 for today's sale
	// Final is how many units ended final: sold, or paid.
	Final    int   `json:"final"`
	NeverPay int   `json:"never_pay"` // winners that never paid
	Returned int64 `json:"returned"`  // units that came back and sold again
	// FinalMS is from the first buyer to every unit final; Runs each
	// run's, the row's the median.
	FinalMS float64   `json:"final_ms"`
	Runs    []float64 `json:"runs_final_ms,omitempty"`
	// Ratio is FinalMS over today's sale's, in the same run.
	Ratio      float64 `json:"ratio,omitempty"`
	Consistent bool    `json:"consistent"`
	Error      string  `json:"error,omitempty"`
}

// reserveRun is one run of a mode: its time and figures, or why none.
type reserveRun struct {
	ms              float64
	final, neverPay int
	returned        int64
	consistent      bool
	err             string
}

// runReserve runs every mode Runs times on cl, interleaved (run 1 of each
// mode, then run 2, …) so that a machine whose load drifts charges the
// drift to every mode alike.
func runReserve(ctx context.Context, cl replicas, cfg E2EConfig, quick bool, log *slog.Logger) []ReserveRow {
	units, buyers, conc, window := reserveStock, reserveBuyers, reserveConcurrency, reserveWindow
	if quick {
		units, buyers, conc, window = 20, 40, 10, time.Second
	}
	runs := make([][]reserveRun, len(reserveModes))
	for run := 0; run < cfg.Runs && ctx.Err() == nil; run++ {
		for i, m := range reserveModes {
			w := time.Duration(0)
			if m.window {
				w = window
			}
			edit := func(c *stockd.Config) {
				c.Work.Delay = stock.Delay{}
				c.Stock.Ledger, c.Stock.PerUserLimit, c.Orders.PaymentWindow = true, 0, w
			}
			log.Info("reserve: switching replicas", "mode", m.label, "run", run+1)
			if err := cl.SetBackend(ctx, "redis", stockd.Overrides(edit)); err != nil {
				runs[i] = append(runs[i], reserveRun{err: firstLine(err)})
				continue
			}
			runs[i] = append(runs[i], reserveOnce(ctx, cl, m.window, m.neverPay, units, buyers, conc, w))
		}
	}
	rows := make([]ReserveRow, len(reserveModes))
	for i, m := range reserveModes {
		row := ReserveRow{Mode: m.label, Stock: units, Buyers: buyers, Consistent: len(runs[i]) > 0}
		if m.window {
			row.Window = window.Seconds()
		}
		var ok []reserveRun
		for _, r := range runs[i] {
			row.Consistent = row.Consistent && r.consistent
			if r.err != "" && row.Error == "" {
				row.Error = r.err
			}
			if r.err == "" {
				ok = append(ok, r)
				row.Runs = append(row.Runs, r.ms)
			}
		}
		if len(ok) > 0 {
			slices.SortFunc(ok, func(a, b reserveRun) int { return int(a.ms - b.ms) })
			mid := ok[len(ok)/2]
			row.FinalMS, row.Final, row.NeverPay, row.Returned = mid.ms, mid.final, mid.neverPay, mid.returned
		}
		if base := rows[0].FinalMS; i > 0 && base > 0 && row.FinalMS > 0 {
			row.Ratio = row.FinalMS / base
		}
		log.Info("reserve", "mode", m.label, "final_ms", int(row.FinalMS), "consistent", row.Consistent, "err", row.Error)
		rows[i] = row
	}
	return rows
}

// reserveOnce is one run of a mode on replicas already switched to it.
func reserveOnce(ctx context.Context, cl replicas, window bool, neverPay, units, buyers, conc int, w time.Duration) reserveRun {
	if !window {
		rep, err := loadgen.Run(ctx, loadgen.Config{
			URL: cl.URL(), AdminToken: cl.AdminToken(), Stock: units,
			// The same named buyers, each with its key, as the
			// reservations' rows send.
			Requests: buyers, Users: buyers, Minter: cl.Minter(), Concurrency: conc, NoHistory: true,
		})
		if err != nil {
			return reserveRun{err: firstLine(err)}
		}
		// The closed loop's whole run: its losers are answered sold out
		// at once, so it ends with its last sale, give or take a loser's
		// round trip.
		return reserveRun{ms: rep.DurationMS, final: rep.Sold, consistent: rep.Consistent && rep.Sold == units}
	}
	rep, err := loadgen.RunReserve(ctx, loadgen.ReserveConfig{
		URL: cl.URL(), AdminToken: cl.AdminToken(), Minter: cl.Minter(),
		Stock: units, Buyers: buyers, NeverPay: neverPay, Concurrency: conc,
		Timeout: 5 * time.Minute, Window: w, SameClock: true,
	})
	if err != nil {
		return reserveRun{err: firstLine(err)}
	}
	// To the last unit paid: the buyers left waiting out a Retry-After
	// for a unit that was paid meanwhile are not the sale's cost.
	return reserveRun{ms: rep.PaidAllMS, final: rep.Paid, neverPay: rep.NeverPay, returned: rep.Returned, consistent: rep.Consistent}
}

// writeReserve is the report's section.
func (r *Report) writeReserve(p func(string, ...any)) {
	if len(r.Reserve) == 0 {
		return
	}
	p("\n## Reservations\n\n")
	p("What `orders.payment_window` costs ([reservations.md](reservations.md)): the same %d buyers, each its own\n", r.Reserve[0].Buyers)
	p("user, for %d units on stockd's default sale (redis lock, combining, the ledger, no work), 3 replicas behind nginx.\n", r.Reserve[0].Stock)
	p("*final in* is from the first buyer to every unit final: the last sold (today's sale), or the last paid. *ratio* is\n")
	p("that over today's sale's, in the same run; each row is the median of its runs. A buyer who never pays holds its\n")
	p("unit for the window, and")
	p(" the expirer returns it: the time to every unit paid is then mostly windows, one per round of resales.\n")
	p("Every run is held to the books; the reservations' also to the census and each order's lifecycle.\n\n")
	p("| mode | stock | buyers | window | final | never paid | returned | final in | runs (ms) | ratio | books |\n")
	p("|---|--:|--:|--:|--:|--:|--:|--:|---|--:|---|\n")
	for _, row := range r.Reserve {
		books := "exact"
		if !row.Consistent {
			books = "**NO** " + cellText(row.Error)
		}
		window, ratio := "-", "-"
		if row.Window > 0 {
			window = fmt.Sprintf("%g s", row.Window)
		}
		if row.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f×", row.Ratio)
		}
		p("| %s | %d | %d | %s | %d | %d | %d | %.0f ms | %s | %s | %s |\n",
			row.Mode, row.Stock, row.Buyers, window, row.Final, row.NeverPay, row.Returned, row.FinalMS, runList(row.Runs), ratio, books)
	}
}
