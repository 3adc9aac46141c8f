package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/api"
)

// scalingRow builds a synthetic scaling row whose median run sells rate
// per second, the other two runs at rate ± 10%.
func synthScaling(label string, segments int, combine bool, rate float64) E2ERow {
	runs := []E2ERun{
		{Stock: 6000, Requests: 6600, Seconds: 6000 / (rate * 1.1), SalesPerSec: rate * 1.1, OK: true},
		{Stock: 6000, Requests: 6600, Seconds: 6000 / rate, SalesPerSec: rate, OK: true},
		{Stock: 6000, Requests: 6600, Seconds: 6000 / (rate * 0.9), SalesPerSec: rate * 0.9, OK: true},
	}
	return E2ERow{Name: label, Backend: "redis", Mode: "locked", Combine: combine, Segments: segments,
		Concurrency: 50, Stock: 6000, Requests: 6600, Sold: 6000, SoldOut: 600, Seconds: 6000 / rate,
		SalesPerSec: rate, Consistent: true, Runs: runs}
}

// synthScalingRows is a full scaling row set: locked 1000/s, combining
// and segments scaling it up, atomic 4000/s.
func synthScalingRows() []E2ERow {
	rows := []E2ERow{
		synthScaling(LabelLocked, 1, false, 1000),
		synthScaling(LabelLockedCombine, 1, true, 3000),
		synthScaling("segments=2", 2, false, 1800),
		synthScaling("segments=4", 4, false, 2400),
		synthScaling("segments=8", 8, false, 2600),
		synthScaling("segments=2+combine", 2, true, 3200),
		synthScaling("segments=4+combine", 4, true, 3400),
		synthScaling("segments=8+combine", 8, true, 3500),
		synthScaling(LabelAtomic, 1, false, 4000),
		synthScaling("atomic+segments=8", 8, false, 3900),
		synthScaling(LabelUncontended, 1, false, 500),
	}
	rows[8].Mode, rows[9].Mode = "atomic", "atomic"
	rows[10].Concurrency = 1
	return rows
}

// The scaling goals on synthetic rows: no servers needed.
func TestScalingGoals(t *testing.T) {
	const (
		combineGoal = "end to end: locked+combine vs atomic"
		segGoal     = "end to end: segments=8 vs locked"
		invGoal     = "end to end: every scaling row's invariant"
	)
	tests := []struct {
		name   string
		change func([]E2ERow) []E2ERow
		want   map[string]string
	}{
		{"all met", nil, map[string]string{combineGoal: "met", segGoal: "met", invGoal: "met"}},
		{"just under both ratios", func(rows []E2ERow) []E2ERow {
			rows[1].SalesPerSec = 2799 // < 70% of 4000
			rows[4].SalesPerSec = 2499 // < 2.5× 1000
			return rows
		}, map[string]string{combineGoal: "not met", segGoal: "not met", invGoal: "met"}},
		{"exactly at both ratios", func(rows []E2ERow) []E2ERow {
			rows[1].SalesPerSec = 2800
			rows[4].SalesPerSec = 2500
			return rows
		}, map[string]string{combineGoal: "met", segGoal: "met", invGoal: "met"}},
		{"a false sold-out breaks the row and the invariant goal", func(rows []E2ERow) []E2ERow {
			rows[4].FalseSoldOut, rows[4].Consistent = 3, false
			return rows
		}, map[string]string{combineGoal: "met", segGoal: "not measured (segments=8 failed)", invGoal: "not met"}},
		{"a negative segment elsewhere breaks only the invariant goal", func(rows []E2ERow) []E2ERow {
			rows[7].NegativeSegments, rows[7].Consistent = 1, false
			return rows
		}, map[string]string{combineGoal: "met", segGoal: "met", invGoal: "not met"}},
		{"atomic errored", func(rows []E2ERow) []E2ERow {
			rows[8].Error = "calibration: sold nothing"
			return rows
		}, map[string]string{combineGoal: "not measured (atomic failed)", segGoal: "met", invGoal: "not met"}},
		{"locked missing", func(rows []E2ERow) []E2ERow {
			return slices.Delete(rows, 0, 1)
		}, map[string]string{combineGoal: "met", segGoal: "not measured (row not run)", invGoal: "met"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := synthScalingRows()
			if tt.change != nil {
				rows = tt.change(rows)
			}
			rep := &Report{Scaling: rows}
			rep.evaluate()
			seen := 0
			for _, g := range rep.Goals {
				want, ok := tt.want[g.Name]
				if !ok {
					continue
				}
				seen++
				if got := g.Verdict(); got != want {
					t.Errorf("%s: got %q, want %q (%s)", g.Name, got, want, g.Measured)
				}
			}
			if seen != len(tt.want) {
				t.Fatalf("found %d of the %d scaling goals", seen, len(tt.want))
			}
			if wantOK := tt.want[invGoal] == "met"; rep.OK() != wantOK {
				t.Errorf("OK() = %v, want %v (a broken scaling row must fail the run)", rep.OK(), wantOK)
			}
		})
	}
}

func TestScalingGoalMeasured(t *testing.T) {
	rep := &Report{Scaling: synthScalingRows()}
	rep.evaluate()
	want := map[string]string{
		"end to end: locked+combine vs atomic":      "75% (3000 vs 4000 sales/s)",
		"end to end: segments=8 vs locked":          "2.60× (2600 vs 1000 sales/s)",
		"end to end: every scaling row's invariant": "11 rows, 33 runs: 0 false sold-out, 0 negative segments",
	}
	for _, g := range rep.Goals {
		if w, ok := want[g.Name]; ok && g.Measured != w {
			t.Errorf("%s: measured %q, want %q", g.Name, g.Measured, w)
		}
	}
}

func TestMedianRun(t *testing.T) {
	runs := func(rates ...float64) []E2ERun {
		var rs []E2ERun
		for _, r := range rates {
			rs = append(rs, E2ERun{SalesPerSec: r})
		}
		return rs
	}
	for _, tc := range []struct {
		rates []float64
		want  int
	}{
		{[]float64{5}, 0},
		{[]float64{3, 1, 2}, 2},
		{[]float64{1, 3, 2}, 2},
		{[]float64{2, 2, 9}, 1}, // ties keep run order
		{[]float64{4, 1}, 1},    // the lower middle of two
	} {
		if got := medianRun(runs(tc.rates...)); got != tc.want {
			t.Errorf("medianRun(%v) = %d, want %d", tc.rates, got, tc.want)
		}
	}
}

// A row is sized to sell for Target at its calibrated rate, clamped, with
// a tenth more requests (at least two per buyer in flight) to sell out.
func TestSize(t *testing.T) {
	c := E2EConfig{Target: 6 * time.Second}
	for _, tc := range []struct {
		rate                float64
		c                   int
		wantStock, wantReqs int
	}{
		{1000, 50, 6000, 6600},
		{10, 50, 200, 300},    // clamped up; the tail is 2 per buyer
		{1e6, 50, 2e6, 2.2e6}, // clamped down
		{333.4, 1, 2001, 2001 + 200},
	} {
		stock, reqs := c.size(tc.rate, tc.c)
		if stock != tc.wantStock || reqs != tc.wantReqs {
			t.Errorf("size(%v, %d) = %d, %d; want %d, %d", tc.rate, tc.c, stock, reqs, tc.wantStock, tc.wantReqs)
		}
	}
}

// The markdown section and the chart of the scaling rows.
func TestScalingOutputs(t *testing.T) {
	rep := &Report{Scaling: synthScalingRows(), Started: time.Now()}
	rep.Scaling[3].Consistent, rep.Scaling[3].FalseSoldOut = false, 2
	rep.evaluate()
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md, Charts{Segments: "bench-segments.svg"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## End to end: combining and segments",
		"![end-to-end sales/s against segments](bench-segments.svg)",
		"| locked+combine | 1 | yes | 50 | 6000 | 2.0 | 3000 | 3300 / 3000 / 2700 | 3.00× | 75% |",
		"| segments=4 | 4 | no | 50 | 6000 |",
		"| 2 | 0 | **BROKEN** |",
		"| uncontended (locked, 1 in flight) | 1 | no | 1 |",
		"| end to end: segments=8 vs locked |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	var svg bytes.Buffer
	if err := rep.WriteSegmentsSVG(&svg); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg.Bytes(), new(struct{})); err != nil {
		t.Fatalf("segments SVG is not well-formed XML: %v", err)
	}
	for _, want := range []string{"stock.segments", "locked + combine", "atomic (no lock)", "1 in flight (locked) = 500",
		">3500<", "failed, not drawn: segments=4"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("segments SVG lacks %q", want)
		}
	}
	// Nothing ran: still a valid, empty chart.
	svg.Reset()
	if err := (&Report{}).WriteSegmentsSVG(&svg); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg.Bytes(), new(struct{})); err != nil {
		t.Fatalf("empty segments SVG is not well-formed XML: %v", err)
	}
}

// quiesce returns once two reads of GET /stock agree, and fails when the
// stock keeps moving past its limit.
func TestQuiesce(t *testing.T) {
	var reads, settleAfter atomic.Int64
	settleAfter.Store(3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := min(reads.Add(1), settleAfter.Load())
		_ = json.NewEncoder(w).Encode(api.Stock{Stock: 100 - n, Lucky: n})
	}))
	t.Cleanup(srv.Close)
	if err := quiesce(t.Context(), srv.URL, time.Millisecond, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := reads.Load(); got != 4 {
		t.Fatalf("got %d reads, want 4 (moving three times, then two equal)", got)
	}
	settleAfter.Store(1 << 40) // never settles
	reads.Store(0)
	if err := quiesce(t.Context(), srv.URL, time.Millisecond, 50*time.Millisecond); err == nil {
		t.Fatal("got nil, want an error for a stock that never settles")
	}
}

// serialStockd is a fake stockd that sells one unit at a time, each taking
// perSale: a known rate. A calibration sale (a reset to calibrationStock)
// sells at slowCalibration per sale instead, so the row's first run
// outgrows its sizing; the first stallCalibrations of them sell nothing,
// each request held until the client cuts it.
type serialStockd struct {
	perSale, slowCalibration time.Duration
	stallCalibrations        int

	mu           sync.Mutex
	calibrations int
	calibrating  bool
	stock, lucky int64
}

// windows is how many calibration sales were started.
func (f *serialStockd) windows() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calibrations
}

func (f *serialStockd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(code int, v any) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	f.mu.Lock()
	if r.URL.Path == "/stock/reduce" && f.calibrating && f.calibrations <= f.stallCalibrations {
		f.mu.Unlock()
		<-r.Context().Done()
		return
	}
	defer f.mu.Unlock()
	switch r.URL.Path {
	case "/stock/reset":
		var body api.Reset
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.stock, f.lucky = body.Stock, 0
		f.calibrating = body.Stock == calibrationStock
		if f.calibrating {
			f.calibrations++
		}
		reply(http.StatusOK, api.Stock{Stock: f.stock})
	case "/info":
		reply(http.StatusOK, api.Info{Backend: "fake"})
	case "/stock":
		reply(http.StatusOK, api.Stock{Stock: f.stock, Lucky: f.lucky})
	case "/stock/reduce":
		if f.stock <= 0 {
			reply(http.StatusConflict, api.Sale{Result: api.SoldOut})
			return
		}
		d := f.perSale
		if f.calibrating {
			d = f.slowCalibration
		}
		time.Sleep(d)
		f.stock--
		f.lucky++
		left := f.stock
		reply(http.StatusOK, api.Sale{Result: api.Sold, Stock: &left})
	default:
		http.NotFound(w, r)
	}
}

// A calibration window that sold nothing (the machine too busy to answer a
// sale in it) is sent again, longer, not taken as the row's failure; one
// that never sells fails after calibrationTries windows.
func TestCalibrationRetriesAWindowThatSoldNothing(t *testing.T) {
	// The first window sells nothing by design; the second, which must
	// sell, is 4 s: a must-happen wait, not a short bound.
	cfg := E2EConfig{Calibrate: time.Second}
	fake := &serialStockd{perSale: time.Millisecond, slowCalibration: time.Millisecond, stallCalibrations: 1}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	rate, err := calibrateE2E(t.Context(), srv.URL, "t", nil, cfg, 2, 0)
	if err != nil || rate <= 0 {
		t.Fatalf("calibrateE2E = %v, %v; want a rate from the second window", rate, err)
	}
	if n := fake.windows(); n != 2 {
		t.Fatalf("%d calibration windows, want 2 (the first sold nothing)", n)
	}
	never := &serialStockd{stallCalibrations: calibrationTries}
	srv2 := httptest.NewServer(never)
	t.Cleanup(srv2.Close)
	cfg.Calibrate = 10 * time.Millisecond
	if _, err := calibrateE2E(t.Context(), srv2.URL, "t", nil, cfg, 2, 0); err == nil || never.windows() != calibrationTries {
		t.Fatalf("calibrateE2E on a stockd that never sells: err %v after %d windows, want an error after %d", err, never.windows(), calibrationTries)
	}
}

// A row calibrates, sizes its runs, does not count a run that fired for
// less than its target (run again, resized from its own rate), and
// reports the median of the counted runs, every run keeping the invariant.
func TestScalingRowRedoesShortRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("sells for a few seconds")
	}
	// The calibration sells at a 25th of the runs' speed, so the first run
	// is sized at the floor of 200 units (size), and must fire for less
	// than minFiring: 200 sales of 1ms each, plus what a loaded machine
	// adds to every one. With a 1s target (minFiring 833ms) that was 3ms
	// of slack, and under stress-ng each sale took ~5ms, so the first run
	// counted; with a 4s target (minFiring 3.3s) a sale may take 16ms.
	fake := &serialStockd{perSale: time.Millisecond, slowCalibration: 25 * time.Millisecond}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	cfg := E2EConfig{Concurrency: 4, Runs: 2, Target: 4 * time.Second, Calibrate: time.Second, Timeout: 30 * time.Second}
	row := E2ERow{Name: LabelLocked, Concurrency: 4}
	scalingRow(t.Context(), srv.URL, "t", nil, nil, cfg, false, variant{label: LabelLocked}, &row, slog.New(slog.DiscardHandler))
	if row.Error != "" || !row.Consistent {
		t.Fatalf("row error %q consistent %v, want a clean row", row.Error, row.Consistent)
	}
	counted, short := 0, 0
	for _, run := range row.Runs {
		if !run.OK {
			t.Errorf("run %+v did not keep the invariant", run)
		}
		if run.Short {
			short++
			continue
		}
		counted++
		if run.Seconds < cfg.minFiring().Seconds() {
			t.Errorf("counted run %+v fired for less than %v", run, cfg.minFiring())
		}
	}
	if short == 0 || !row.Runs[0].Short || counted == 0 {
		t.Fatalf("runs %+v: want the first (sized at the floor, from a calibration at a 25th of the speed) short, then counted ones", row.Runs)
	}
	// Every short run is redone resized from its own rate. How many are
	// short is the machine's pace: a busy one varies from run to run, and
	// then the row stops at its redo budget with fewer counted runs.
	for i, run := range row.Runs[:len(row.Runs)-1] {
		if run.Short && row.Runs[i+1].Stock == run.Stock {
			t.Errorf("run %d %+v was short, and run %d was not resized (stock %d)", i, run, i+1, run.Stock)
		}
	}
	if counted != cfg.Runs && len(row.Runs) != cfg.Runs+maxRedo {
		t.Fatalf("runs %+v: %d counted, want %d or the redo budget (%d runs) spent", row.Runs, counted, cfg.Runs, cfg.Runs+maxRedo)
	}
	if row.Seconds < cfg.minFiring().Seconds() || row.Sold != row.Stock || row.SoldOut == 0 {
		t.Fatalf("row %+v: want the median of the counted runs, sold out at the end", row)
	}
}

// A micro row reports its median run, unless one run failed: then that run,
// so that a broken invariant is never outvoted.
func TestMedianRow(t *testing.T) {
	ok := func(rate float64) MicroRow { return MicroRow{SalesPerSec: rate, InvariantOK: true} }
	got := medianRow([]MicroRow{ok(300), ok(100), ok(200)})
	if got.SalesPerSec != 200 || !slices.Equal(got.Runs, []float64{300, 100, 200}) {
		t.Errorf("median of 300/100/200 = %v, runs %v; want 200 and the runs in order", got.SalesPerSec, got.Runs)
	}
	broken := MicroRow{SalesPerSec: 250, Error: "invariant broken"}
	got = medianRow([]MicroRow{ok(300), broken, ok(200)})
	if got.Error != broken.Error || got.InvariantOK {
		t.Errorf("with a broken run, reported %+v; want the broken run", got)
	}
	if got := medianRow([]MicroRow{ok(300)}); got.Runs != nil {
		t.Errorf("a single run reports runs %v, want none", got.Runs)
	}
}

// A long row's invariant reads the same in the summary and the markdown,
// and a broken row says BROKEN in both, with its error where it has one.
func TestRowInvariant(t *testing.T) {
	for _, tc := range []struct {
		ok       bool
		err      string
		text, md string
	}{
		{true, "", "ok", "ok"},
		{true, "1 run short", "ok, but 1 run short", "ok, but 1 run short"},
		{false, "", "BROKEN", "**BROKEN**"},
		{false, "a|b", "BROKEN: a|b", "**BROKEN** a/b"},
	} {
		e := E2ERow{Consistent: tc.ok, Error: tc.err}
		if got := e.Invariant(); got != tc.text {
			t.Errorf("Invariant(%v, %q) = %q, want %q", tc.ok, tc.err, got, tc.text)
		}
		if got := invariantCell(e); got != tc.md {
			t.Errorf("invariantCell(%v, %q) = %q, want %q", tc.ok, tc.err, got, tc.md)
		}
	}
	e := E2ERow{Runs: []E2ERun{{SalesPerSec: 3300}, {SalesPerSec: 2999.6, Short: true}, {SalesPerSec: 2700}}}
	if got, want := e.RunsText(" / "), "3300 / (3000) / 2700"; got != want {
		t.Errorf("RunsText = %q, want %q", got, want)
	}
	if got := (E2ERow{}).RunsText("/"); got != "" {
		t.Errorf("RunsText of no runs = %q, want empty", got)
	}
}
