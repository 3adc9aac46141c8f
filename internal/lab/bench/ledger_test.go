package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"seckill/internal/api"
	"seckill/internal/auth"
	"seckill/internal/lab/loadgen"
)

func TestParseRowSets(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "backends,scaling", want: []string{RowsBackends, RowsScaling}},
		{in: "ledger", want: []string{RowsLedger}},
		{in: " ledger , backends ", want: []string{RowsBackends, RowsLedger}}, // run order, not flag order
		{in: "scaling,ledger,scaling,", want: []string{RowsScaling, RowsLedger}},
		{in: "backends,scaling,ledger,flood,reserve,items,memory,cluster", want: RowSets()},
		{in: "cluster,items", want: []string{RowsItems, RowsCluster}},
		{in: "ledgers", wantErr: true},
		{in: "backends,Ledger", wantErr: true},
		{in: "", wantErr: true},
		{in: " , ", wantErr: true},
	} {
		got, err := ParseRowSets(tc.in)
		if tc.wantErr {
			if !errors.Is(err, ErrBadRowSet) {
				t.Errorf("ParseRowSets(%q) = %v, %v; want an error wrapping ErrBadRowSet", tc.in, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseRowSets(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// The ledger rows: locked then atomic, each form once, buyers only where
// the form has them, and each form's stockd settings.
func TestLedgerVariants(t *testing.T) {
	vs := ledgerVariants()
	if got, want := len(vs), 2*len(ledgerForms); got != want {
		t.Fatalf("got %d ledger rows, want %d", got, want)
	}
	seen := map[string]bool{}
	for i, v := range vs {
		if seen[v.label] {
			t.Errorf("label %q twice", v.label)
		}
		seen[v.label] = true
		wantAtomic := i >= len(ledgerForms)
		if v.atomic != wantAtomic || v.ledger != ledgerForms[i%len(ledgerForms)] {
			t.Errorf("row %d = %+v: want atomic %v, ledger %q", i, v, wantAtomic, ledgerForms[i%len(ledgerForms)])
		}
		if wantBackend := map[bool]string{false: "redis", true: "none"}[wantAtomic]; v.backend != wantBackend {
			t.Errorf("%s: backend %q, want %q", v.label, v.backend, wantBackend)
		}
		wantUsers := 0
		if v.ledger == LedgerBuyers || v.ledger == LedgerDurable {
			wantUsers = LedgerUsers
		}
		if v.users != wantUsers {
			t.Errorf("%s: users %d, want %d", v.label, v.users, wantUsers)
		}
		env := v.env(E2EConfig{})
		wantLedger, wantDurable := "true", ""
		switch v.ledger {
		case LedgerOff:
			wantLedger = "false"
		case LedgerDurable:
			wantDurable = "true"
		}
		if env["STOCKD_STOCK_LEDGER"] != wantLedger || env["STOCKD_ORDERS_DURABLE"] != wantDurable {
			t.Errorf("%s: stock.ledger %q, orders.durable %q; want %q, %q", v.label, env["STOCKD_STOCK_LEDGER"], env["STOCKD_ORDERS_DURABLE"], wantLedger, wantDurable)
		}
		if wantMode := map[bool]string{true: "atomic"}[wantAtomic]; env["STOCKD_STOCK_MODE"] != wantMode {
			t.Errorf("%s: stock.mode %q, want %q", v.label, env["STOCKD_STOCK_MODE"], wantMode)
		}
	}
	// The scaling rows keep stockd's default ledger: none of them sets it.
	for _, v := range scalingVariants() {
		if env := v.env(E2EConfig{}); env["STOCKD_STOCK_LEDGER"] != "" || env["STOCKD_ORDERS_DURABLE"] != "" {
			t.Errorf("scaling row %s sets the ledger: %v", v.label, env)
		}
	}
}

// synthLedger is a clean ledger row selling rate per second with p99 ms.
func synthLedger(mode, form string, rate, p99 float64) E2ERow {
	e := synthScaling(ledgerLabel(mode, form), 1, false, rate)
	e.Mode, e.Ledger, e.P99ms, e.P50ms = mode, form, p99, p99/4
	if mode == "atomic" {
		e.Backend = "none"
	}
	if form == LedgerBuyers || form == LedgerDurable {
		e.Users = LedgerUsers
	}
	return e
}

func synthLedgerRows() []E2ERow {
	return []E2ERow{
		synthLedger("locked", LedgerOff, 1000, 20),
		synthLedger("locked", LedgerAnonymous, 950, 22),
		synthLedger("locked", LedgerBuyers, 800, 25),
		synthLedger("locked", LedgerDurable, 500, 40),
		synthLedger("atomic", LedgerOff, 4000, 10),
		synthLedger("atomic", LedgerAnonymous, 3000, 12),
		synthLedger("atomic", LedgerBuyers, 2000, 15),
		synthLedger("atomic", LedgerDurable, 1000, 30),
	}
}

func TestLedgerCosts(t *testing.T) {
	type cost struct{ sales, p99 float64 }
	all := map[string]cost{
		"locked, ledger anonymous":          {0.95, 1.1},
		"locked, ledger buyers+key":         {0.8, 1.25},
		"locked, ledger buyers+key+durable": {0.5, 2},
		"atomic, ledger anonymous":          {0.75, 1.2},
		"atomic, ledger buyers+key":         {0.5, 1.5},
		"atomic, ledger buyers+key+durable": {0.25, 3},
	}
	tests := []struct {
		name       string
		change     func([]E2ERow) []E2ERow
		unmeasured map[string]string // label -> why; the rest as in all
	}{
		{name: "all measured"},
		{name: "locked off failed: no locked ratio", change: func(rows []E2ERow) []E2ERow {
			rows[0].Consistent, rows[0].Error = false, "run 2: status 500"
			return rows
		}, unmeasured: map[string]string{
			"locked, ledger anonymous":          "locked, ledger off failed",
			"locked, ledger buyers+key":         "locked, ledger off failed",
			"locked, ledger buyers+key+durable": "locked, ledger off failed",
		}},
		{name: "durable unavailable, atomic off missing", change: func(rows []E2ERow) []E2ERow {
			rows[3].Unavailable = true
			return slices.Delete(rows, 4, 5)
		}, unmeasured: map[string]string{
			"locked, ledger buyers+key+durable": "locked, ledger buyers+key+durable unavailable",
			"atomic, ledger anonymous":          "row not run",
			"atomic, ledger buyers+key":         "row not run",
			"atomic, ledger buyers+key+durable": "row not run",
		}},
		{name: "a buyers row missing", change: func(rows []E2ERow) []E2ERow {
			return slices.Delete(rows, 6, 7)
		}, unmeasured: map[string]string{"atomic, ledger buyers+key": "row not run"}},
		{name: "off sold nothing", change: func(rows []E2ERow) []E2ERow {
			rows[4].SalesPerSec = 0
			return rows
		}, unmeasured: map[string]string{
			"atomic, ledger anonymous":          "atomic, ledger off measured nothing",
			"atomic, ledger buyers+key":         "atomic, ledger off measured nothing",
			"atomic, ledger buyers+key+durable": "atomic, ledger off measured nothing",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := synthLedgerRows()
			if tt.change != nil {
				rows = tt.change(rows)
			}
			rep := &Report{Ledger: rows}
			rep.evaluate()
			if len(rep.LedgerCost) != len(all) {
				t.Fatalf("got %d costs, want %d (every ledger-on form, both modes)", len(rep.LedgerCost), len(all))
			}
			for i, c := range rep.LedgerCost {
				if wantMode := []string{"locked", "atomic"}[i/3]; c.Mode != wantMode || c.Ledger != ledgerForms[1+i%3] {
					t.Errorf("cost %d is %s, want %s (locked then atomic, in form order)", i, c.Label(), ledgerLabel(wantMode, ledgerForms[1+i%3]))
				}
				if why, ok := tt.unmeasured[c.Label()]; ok {
					if c.Unmeasured != why || c.Sales != 0 || c.P99 != 0 {
						t.Errorf("%s: got %+v, want unmeasured %q", c.Label(), c, why)
					}
					continue
				}
				w := all[c.Label()]
				if c.Unmeasured != "" || math.Abs(c.Sales-w.sales) > 1e-9 || math.Abs(c.P99-w.p99) > 1e-9 {
					t.Errorf("%s: got %+v, want sales ×%v, p99 ×%v", c.Label(), c, w.sales, w.p99)
				}
			}
		})
	}
	if got := (&Report{}).LedgerCosts(); got != nil {
		t.Errorf("no ledger rows: got %v, want none", got)
	}
}

// A broken ledger row fails the run, as a broken scaling row does.
func TestLedgerRowFailsRun(t *testing.T) {
	rep := &Report{Ledger: synthLedgerRows()}
	if !rep.OK() {
		t.Fatal("clean ledger rows: OK() = false")
	}
	rep.Ledger[2].Error = "durable orders are off in a durable row"
	if rep.OK() {
		t.Fatal("a ledger row with an error: OK() = true, want false")
	}
	rep.Ledger[2].Error, rep.Ledger[2].Unavailable = "no MariaDB", true
	if !rep.OK() {
		t.Fatal("an unavailable ledger row: OK() = false, want true (it is shown, not failed)")
	}
}

func TestLedgerMismatch(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	ledger := func(orders, lucky int64, durable *int64) *api.Ledger {
		return &api.Ledger{Orders: orders, Lucky: lucky, Durable: durable}
	}
	buyers := func(l *api.Ledger) *loadgen.Report { return &loadgen.Report{Buyers: &loadgen.Buyers{Ledger: *l}} }
	for _, tc := range []struct {
		name, form string
		rep        *loadgen.Report
		want       string // a substring; "" for none
	}{
		{"not a ledger row", "", &loadgen.Report{Ledger: ledger(1, 2, nil)}, ""},
		{"off", LedgerOff, &loadgen.Report{}, ""},
		{"off but on", LedgerOff, &loadgen.Report{Ledger: ledger(5, 5, nil)}, "ledger is on"},
		{"anonymous", LedgerAnonymous, &loadgen.Report{Ledger: ledger(5, 5, nil)}, ""},
		{"anonymous but off", LedgerAnonymous, &loadgen.Report{}, "no ledger"},
		{"anonymous, orders behind", LedgerAnonymous, &loadgen.Report{Ledger: ledger(4, 5, nil)}, "orders 4, lucky 5"},
		{"anonymous but durable", LedgerAnonymous, &loadgen.Report{Ledger: ledger(5, 5, n(5))}, "durable orders are on"},
		{"buyers", LedgerBuyers, buyers(ledger(5, 5, nil)), ""},
		{"buyers without a verdict", LedgerBuyers, &loadgen.Report{Ledger: ledger(5, 5, nil)}, "no buyers' verdict"},
		{"durable", LedgerDurable, buyers(ledger(5, 5, n(5))), ""},
		{"durable but off", LedgerDurable, buyers(ledger(5, 5, nil)), "durable orders are off"},
	} {
		got := ledgerMismatch(tc.form, tc.rep)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The markdown section: every row, its ratios to its mode's ledger-off
// row, and a broken row shown as such.
func TestLedgerMarkdown(t *testing.T) {
	rep := &Report{Ledger: synthLedgerRows(), Started: time.Now(), LedgerTarget: 6 * time.Second}
	rep.Ledger[7].Consistent, rep.Ledger[7].Error = false, "BUYERS: MySQL rows == ledger orders (drained)"
	rep.evaluate()
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md, Charts{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## End to end: the order ledger's cost",
		"| locked, ledger off | — | 6000 | 6.0 | 1000 | 1100 / 1000 / 900 | 1 | 5.0 ms | 20.0 ms | 1 | ok |",
		"| locked, ledger buyers+key | 1000 | 6000 | 7.5 | 800 | 880 / 800 / 720 | 0.80× | 6.2 ms | 25.0 ms | 1.25× | ok |",
		"| atomic, ledger anonymous | — | 6000 | 2.0 | 3000 | 3300 / 3000 / 2700 | 0.75× | 3.0 ms | 12.0 ms | 1.20× | ok |",
		// A broken row still shows its figures, but no ratio.
		"| atomic, ledger buyers+key+durable | 1000 | 6000 | 6.0 | 1000 | 1100 / 1000 / 900 | — | 7.5 ms | 30.0 ms | — | **BROKEN** BUYERS: MySQL rows == ledger orders (drained) |",
		"sell for\n6s, a run shorter than 5s not counted",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if rep.OK() {
		t.Error("OK() = true with a broken ledger row")
	}
	md.Reset()
	if err := (&Report{Started: time.Now()}).WriteMarkdown(&md, Charts{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(md.String(), "ledger's cost") {
		t.Error("a report without ledger rows has a ledger section")
	}
}

// fakeReplicas records every switch of the replicas' configuration and
// sends the sale to one fake stockd (which has no ledger); a switch to
// failOn's configuration fails as a replica that refused it.
type fakeReplicas struct {
	url      string
	failOn   string
	switches []string
}

func (f *fakeReplicas) SetBackend(_ context.Context, backend string, env map[string]string) error {
	sw := fmt.Sprintf("%s ledger=%s durable=%s", cmp.Or(env["STOCKD_STOCK_MODE"], "locked"), env["STOCKD_STOCK_LEDGER"], env["STOCKD_ORDERS_DURABLE"])
	f.switches = append(f.switches, sw)
	if sw == f.failOn {
		return errors.New("replica exited: orders.durable refused")
	}
	return nil
}
func (f *fakeReplicas) URL() string        { return f.url }
func (f *fakeReplicas) AdminToken() string { return "t" }
func (f *fakeReplicas) Minter() *auth.Minter {
	return auth.NewMinter([]byte("0123456789abcdef0123456789abcdef"), "seckill", "seckill", time.Hour)
}

// runLedger interleaves a mode's rows (every row switched to once, then
// run 1 of each, run 2 of each), stops only the row that failed, and a
// ledger form the replicas did not take fails its row: the fake stockd
// has no ledger, so only the ledger-off rows measure.
func TestRunLedgerInterleaves(t *testing.T) {
	srv := httptest.NewServer(&serialStockd{})
	t.Cleanup(srv.Close)
	const (
		off     = " ledger=false durable="
		on      = " ledger=true durable="
		durable = " ledger=true durable=true"
	)
	fake := &fakeReplicas{url: srv.URL, failOn: "atomic" + durable}
	cfg := E2EConfig{Concurrency: 4, Runs: 2, Requests: 30, Stock: 20, Timeout: 30 * time.Second}
	rows := runLedger(t.Context(), fake, cfg, true, slog.New(slog.DiscardHandler))

	want := []string{
		// locked: each row once (no calibration when quick), round 1,
		// then round 2 without the buyers rows (stopped: no ledger).
		"locked" + off, "locked" + on, "locked" + on, "locked" + durable,
		"locked" + off, "locked" + on, "locked" + on, "locked" + durable,
		"locked" + off, "locked" + on,
		// atomic: the durable row's switch fails and never runs.
		"atomic" + off, "atomic" + on, "atomic" + on, "atomic" + durable,
		"atomic" + off, "atomic" + on, "atomic" + on,
		"atomic" + off, "atomic" + on,
	}
	if !slices.Equal(fake.switches, want) {
		t.Fatalf("switches:\n got %q\nwant %q", fake.switches, want)
	}
	if len(rows) != len(ledgerVariants()) {
		t.Fatalf("got %d rows, want %d", len(rows), len(ledgerVariants()))
	}
	for _, e := range rows {
		var wantRuns int
		var wantErr string
		switch {
		case e.Ledger == LedgerOff:
			wantRuns = 2
		case e.Ledger == LedgerAnonymous:
			wantRuns, wantErr = 2, "no ledger read back"
		case e.Mode == "atomic" && e.Ledger == LedgerDurable:
			wantErr = "replica exited"
		default:
			wantErr = "the ledger is off"
		}
		if len(e.Runs) != wantRuns || !strings.Contains(e.Error, wantErr) || (wantErr == "") != (e.Error == "") {
			t.Errorf("%s: %d runs, error %q; want %d runs, error with %q", e.Label(), len(e.Runs), e.Error, wantRuns, wantErr)
		}
		if ok := wantErr == ""; e.Consistent != ok || (ok && e.Sold != cfg.Stock) {
			t.Errorf("%s: consistent %v, sold %d; want consistent %v, sold %d", e.Label(), e.Consistent, e.Sold, ok, cfg.Stock)
		}
	}
	rep := &Report{Ledger: rows}
	rep.evaluate()
	for _, c := range rep.LedgerCost {
		if c.Unmeasured == "" {
			t.Errorf("%s measured %s from a row that failed", c.Label(), c)
		}
	}
}
