package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"seckill/internal/api"
	"seckill/internal/lab/loadgen"
)

// ledger.go: the end-to-end rows of the ledger's benchmark, the cost of the
// order ledger. The same long rows as the scaling set (calibrated, the
// median of Runs runs), on the locked path (redis backend) and in atomic
// mode, each with the ledger off, on with anonymous sales, on with named
// buyers and an Idempotency-Key per purchase, and that plus durable orders
// (the consumers inserting into MariaDB while the sale runs). The cost is
// each row against its mode's ledger-off row of the same run: sales/s and
// p99, as ratios.

// RowsLedger: the ledger's cost, locked and atomic (E2EConfig.Rows).
const RowsLedger = "ledger"

// Forms of the ledger on a ledger row (E2ERow.Ledger).
const (
	// LedgerOff: stock.ledger false, no order written.
	LedgerOff = "off"
	// LedgerAnonymous: the ledger on, requests without X-User or
	// Idempotency-Key (every existing row runs this way: it is stockd's
	// default).
	LedgerAnonymous = "anonymous"
	// LedgerBuyers: the ledger on, each purchase by one of LedgerUsers
	// buyers with its own Idempotency-Key (no per-user limit, no retries).
	LedgerBuyers = "buyers+key"
	// LedgerDurable: LedgerBuyers with orders.durable, every replica's
	// consumer storing the orders in MariaDB during the sale.
	LedgerDurable = "buyers+key+durable"
)

// LedgerUsers is how many named buyers a buyers row spreads its purchases
// over: enough that a buyer's list stays short (≈ a dozen orders in a 6 s
// run), few enough that the buyers' verdict reads every list in well under
// a second after each run.
const LedgerUsers = 1000

// ledgerForms are the forms in report order.
var ledgerForms = []string{LedgerOff, LedgerAnonymous, LedgerBuyers, LedgerDurable}

// ledgerVariants lists the ledger rows: locked (redis), then atomic, each
// in ledgerForms' order.
func ledgerVariants() []variant {
	var vs []variant
	for _, m := range []struct {
		mode, backend string
		atomic        bool
	}{{"locked", "redis", false}, {"atomic", "none", true}} {
		for _, form := range ledgerForms {
			v := variant{label: ledgerLabel(m.mode, form), backend: m.backend, atomic: m.atomic, segments: 1, ledger: form}
			if form == LedgerBuyers || form == LedgerDurable {
				v.users = LedgerUsers
			}
			vs = append(vs, v)
		}
	}
	return vs
}

// ledgerLabel names a ledger row: "locked, ledger off", "atomic, ledger
// buyers+key".
func ledgerLabel(mode, form string) string { return mode + ", ledger " + form }

// runLedger runs every ledger row on cl, a mode at a time. Within a mode
// the rows' runs are interleaved (each row calibrated, then run 1 of every
// form, run 2 of every form, …) at the price of a replica switch per run:
// on a shared machine the load drifts over the minutes a mode takes, and
// interleaving spreads the drift over every form instead of charging it
// to whichever row ran last, so the ratios to ledger off stay fair.
func runLedger(ctx context.Context, cl replicas, cfg E2EConfig, quick bool, log *slog.Logger) []E2ERow {
	const what = "end to end (ledger)"
	var rows []E2ERow
	vs := ledgerVariants()
	for len(vs) > 0 && ctx.Err() == nil {
		group := vs[:len(ledgerForms)]
		vs = vs[len(ledgerForms):]
		rs := make([]E2ERow, len(group))
		lrs := make([]*longRow, len(group))
		for i, v := range group {
			rs[i] = variantRow(v, cfg)
			lrs[i] = newLongRow(cl.URL(), cl.AdminToken(), cl.Minter(), cfg, quick, v, &rs[i])
			if !switchTo(ctx, cl, cfg, v, &rs[i], what, log) {
				lrs[i].stopped = true
				continue
			}
			lrs[i].calibrate(ctx, log)
		}
		for ctx.Err() == nil {
			ran := false
			for i, v := range group {
				if !lrs[i].more() {
					continue
				}
				ran = true
				if !switchTo(ctx, cl, cfg, v, &rs[i], what, log) {
					lrs[i].stopped = true
					continue
				}
				lrs[i].runOnce(ctx)
			}
			if !ran {
				break
			}
		}
		for i := range group {
			lrs[i].finish()
			logRow(log, what, rs[i])
		}
		rows = append(rows, rs...)
	}
	return rows
}

// ledgerMismatch says how a run's report contradicts the ledger form its
// row asked for ("" when it does not): a switch the replicas did not take
// would measure the wrong thing under the right label.
func ledgerMismatch(form string, rep *loadgen.Report) string {
	var l *api.Ledger
	switch {
	case rep.Buyers != nil:
		l = &rep.Buyers.Ledger
	case rep.Ledger != nil:
		l = rep.Ledger
	}
	switch {
	case form == "":
		return ""
	case form == LedgerOff:
		if l != nil {
			return "the ledger is on in a ledger-off row"
		}
		return ""
	case l == nil:
		return "no ledger read back in a ledger row"
	case l.Orders != l.Lucky:
		return fmt.Sprintf("ledger orders %d, lucky %d", l.Orders, l.Lucky)
	case (form == LedgerBuyers || form == LedgerDurable) && rep.Buyers == nil:
		return "no buyers' verdict in a buyers row"
	case form == LedgerDurable && l.Durable == nil:
		return "durable orders are off in a durable row"
	case form != LedgerDurable && l.Durable != nil:
		return "durable orders are on in a row without them"
	}
	return ""
}

// ErrBadRowSet: a row set name E2EConfig.Rows does not know.
var ErrBadRowSet = errors.New("bench: unknown end-to-end row set")

// RowSets are the end-to-end row sets, in the order a run takes them.
func RowSets() []string {
	return []string{RowsBackends, RowsScaling, RowsLedger, RowsFlood, RowsReserve, RowsItems, RowsMemory, RowsCluster}
}

// ParseRowSets parses a comma-separated list of row sets (spaces and
// empty items ignored, duplicates dropped) into RowSets' order. An unknown
// name wraps ErrBadRowSet; an empty list is an error too.
func ParseRowSets(s string) ([]string, error) {
	var picked []string
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if !slices.Contains(RowSets(), item) {
			return nil, fmt.Errorf("%w: %q (want %s)", ErrBadRowSet, item, strings.Join(RowSets(), ", "))
		}
		if !slices.Contains(picked, item) {
			picked = append(picked, item)
		}
	}
	if len(picked) == 0 {
		return nil, fmt.Errorf("%w: none named in %q", ErrBadRowSet, s)
	}
	var out []string
	for _, set := range RowSets() {
		if slices.Contains(picked, set) {
			out = append(out, set)
		}
	}
	return out, nil
}

// LedgerCost is one ledger row against its mode's ledger-off row of the
// same run.
type LedgerCost struct {
	Mode   string `json:"mode"`
	Ledger string `json:"ledger"`
	// Sales is the row's sales/s over the ledger-off row's: 0.9 means the
	// ledger costs a tenth of the throughput.
	Sales float64 `json:"sales_ratio"`
	// P99 is the row's p99 over the ledger-off row's (of the median runs).
	P99 float64 `json:"p99_ratio"`
	// Unmeasured says why the ratios could not be taken ("" when they
	// were): a row missing, failed or unavailable.
	Unmeasured string `json:"unmeasured,omitempty"`
}

// Label is the label of the row it measures ("locked, ledger buyers+key").
func (c LedgerCost) Label() string { return ledgerLabel(c.Mode, c.Ledger) }

// String is the cost for tables: "0.93× sales/s, 1.10× p99", or why not.
func (c LedgerCost) String() string {
	if c.Unmeasured != "" {
		return "not measured (" + c.Unmeasured + ")"
	}
	return fmt.Sprintf("%.2f× sales/s, %.2f× p99", c.Sales, c.P99)
}

// LedgerRow returns the ledger row with label, if it ran.
func (r *Report) LedgerRow(label string) (E2ERow, bool) {
	for _, e := range r.Ledger {
		if e.Label() == label {
			return e, true
		}
	}
	return E2ERow{}, false
}

// LedgerCosts are the ratios of every ledger row but the ledger-off ones,
// locked then atomic, to the ledger-off row of their mode; empty when no
// ledger row ran.
func (r *Report) LedgerCosts() []LedgerCost {
	if len(r.Ledger) == 0 {
		return nil
	}
	var out []LedgerCost
	for _, mode := range []string{"locked", "atomic"} {
		off, offOK := r.LedgerRow(ledgerLabel(mode, LedgerOff))
		for _, form := range ledgerForms[1:] {
			c := LedgerCost{Mode: mode, Ledger: form}
			on, onOK := r.LedgerRow(ledgerLabel(mode, form))
			switch {
			case usableE2E(on, onOK) != "":
				c.Unmeasured = usableE2E(on, onOK)
			case usableE2E(off, offOK) != "":
				c.Unmeasured = usableE2E(off, offOK)
			case off.SalesPerSec <= 0 || off.P99ms <= 0:
				c.Unmeasured = off.Label() + " measured nothing"
			default:
				c.Sales, c.P99 = on.SalesPerSec/off.SalesPerSec, on.P99ms/off.P99ms
			}
			out = append(out, c)
		}
	}
	return out
}

// ledgerCost is row e's cost, if it has one.
func (r *Report) ledgerCost(e E2ERow) (LedgerCost, bool) {
	for _, c := range r.LedgerCosts() {
		if c.Label() == e.Label() {
			return c, true
		}
	}
	return LedgerCost{}, false
}

// writeLedger is the markdown section of the ledger rows.
func (r *Report) writeLedger(p func(string, ...any)) {
	if len(r.Ledger) == 0 {
		return
	}
	p("\n## End to end: the order ledger's cost (loadgen → nginx → 3 stockd replicas)\n\n")
	p("The ledger: every sale appends its order to a Redis stream in the same script that\n")
	p("takes the unit. *locked* is lock backend `redis` (the ledger written by the fenced write),\n")
	p("*atomic* is `stock.mode: atomic` (by the sale's one script); `work.delay` 0, %d in flight.\n", r.ledgerConcurrency())
	p("Ledger *off* is `stock.ledger: false`; *anonymous* is the ledger on with requests that carry\n")
	p("no buyer (stockd's default, as every other row here runs); *buyers+key* spreads the purchases\n")
	p("over %d buyers (each with a signed token), each purchase with its own `Idempotency-Key`, no per-user limit,\n", LedgerUsers)
	p("no retries (each run also passes the buyers' verdict of `seckill run --users`); *durable* adds\n")
	p("`orders.durable: true`: every replica's consumer inserts the orders into MariaDB while the\n")
	p("sale runs (the drain after the sale is not timed).\n")
	if r.Quick {
		p("Quick run: one tiny run per row, no calibration: the ratios are not meaningful.\n")
	} else {
		p("Rows are sized and repeated as the scaling rows are: sized by a calibration sale to sell for\n")
		p("%s, a run shorter than %s not counted, the run with the median sales/s shown.\n", r.LedgerTarget, E2EConfig{Target: r.LedgerTarget}.minFiring())
	}
	p("*× off* is the row's sales/s (and p99) over its mode's ledger-off row: the ledger's cost as a\n")
	p("ratio, both sides measured in the same run.\n\n")
	p("| row | buyers | stock | s/run | sales/s | runs (sales/s) | × off sales/s | p50 | p99 | × off p99 | invariant |\n")
	p("|---|--:|--:|--:|--:|---|--:|--:|--:|--:|---|\n")
	for _, e := range r.Ledger {
		buyers := "—"
		if e.Users > 0 {
			buyers = fmt.Sprint(e.Users)
		}
		if e.Error != "" && len(e.Runs) == 0 {
			p("| %s | %s | | | | | | | | | %s |\n", e.Label(), buyers, cell(e.Error, e.Unavailable))
			continue
		}
		xs, xp := "1", "1"
		if e.Ledger != LedgerOff {
			xs, xp = "—", "—"
			if c, ok := r.ledgerCost(e); ok && c.Unmeasured == "" {
				xs, xp = fmt.Sprintf("%.2f×", c.Sales), fmt.Sprintf("%.2f×", c.P99)
			}
		}
		p("| %s | %s | %d | %.1f | %.0f | %s | %s | %.1f ms | %.1f ms | %s | %s |\n",
			e.Label(), buyers, e.Stock, e.Seconds, e.SalesPerSec, e.RunsText(" / "), xs, e.P50ms, e.P99ms, xp, invariantCell(e))
	}
}

// invariantCell is a long row's invariant (E2ERow.Invariant) for the
// markdown tables.
func invariantCell(e E2ERow) string {
	switch {
	case !e.Consistent && e.Error != "":
		return "**BROKEN** " + cellText(e.Error)
	case !e.Consistent:
		return "**BROKEN**"
	case e.Error != "":
		return "ok, but " + cellText(e.Error)
	}
	return "ok"
}

// ledgerConcurrency is the ledger rows' in-flight count.
func (r *Report) ledgerConcurrency() int {
	if len(r.Ledger) == 0 {
		return 0
	}
	return r.Ledger[0].Concurrency
}
