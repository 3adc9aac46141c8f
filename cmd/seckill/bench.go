package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"seckill/internal/lab/bench"
)

// benchCmd is `seckill bench`: start a local cluster, run the lock
// micro-benchmark, the peers, the ceilings and the end-to-end runs in one go,
// and write docs/benchmarks.md and docs/bench.svg.
//
// Exit status: 0 when every row that ran kept its invariant (goals met or
// not: they are reported, not enforced), 3 when a row oversold or lost a
// sale, 1 on usage or start-up errors.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "smoke test: tiny stock per row, small end-to-end run; writes files only when --out/--svg are given")
	out := fs.String("out", "docs/benchmarks.md", `markdown report ("" for none)`)
	svg := fs.String("svg", "docs/bench.svg", `SVG chart ("" for none)`)
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout instead of the summary")
	subjects := fs.String("subjects", "", "comma-separated micro-benchmark subjects (default: all)")
	contenders := fs.String("contenders", "1,8,50", "comma-separated contender counts")
	rowTarget := fs.Duration("row-target", 5*time.Second, "how long each calibrated micro row should sell for")
	microRuns := fs.Int("micro-runs", 3, "runs per micro row, interleaved across subjects; the report keeps the median (--quick: 1)")
	skipE2E := fs.Bool("skip-e2e", false, "leave out the end-to-end runs through nginx")
	skipMicro := fs.Bool("skip-micro", false, "leave out the lock micro-benchmark (micro goals then read 'not measured')")
	e2eRows := fs.String("e2e-rows", bench.RowsBackends+","+bench.RowsScaling,
		"comma-separated end-to-end row sets: "+bench.RowsBackends+" (one row per lock backend + atomic), "+
			bench.RowsScaling+" (combining and segments, median of --e2e-runs long runs), "+
			bench.RowsLedger+" (the order ledger's cost, locked and atomic: off, anonymous, buyers+key, +durable; long runs as scaling), "+
			bench.RowsFlood+" (open-loop floods of buyers: locked, locked+combine and atomic side by side, median of --e2e-runs), "+
			bench.RowsReserve+" (what orders.payment_window costs: 600 buyers for 300 units, today's sale against reservations all paying and a third never paying, time to every unit final; median of --e2e-runs), "+
			bench.RowsItems+" (one item vs 8 at once, each its own lock, with and without work in the lock; long runs as scaling), "+
			bench.RowsMemory+" (a million-unit sale, atomic, durable orders: the stock Redis's peak and retained bytes per unit; minutes), "+
			bench.RowsCluster+" (8 items atomic and locked, and a hot sale of 8 segments, on one Redis and on a 3-master Redis Cluster side by side)")
	e2eTarget := fs.Duration("e2e-target", 6*time.Second, "how long each scaling (and ledger) run is sized (by calibration) to sell for; below 5s is a rough run")
	e2eRuns := fs.Int("e2e-runs", 3, "runs per scaling (and ledger) row; the row reports the median (--quick: 1)")
	floodRate := fs.Int("flood-rate", bench.DefaultFloodRate, "buyers a second of the flood rows; a machine that cannot send them is told so, and a lower rate sends the same buyers over a longer flood")
	segSVG := fs.String("segments-svg", "docs/bench-segments.svg", `SVG chart of end-to-end sales/s against segments ("" for none)`)
	holdSVG := fs.String("hold-svg", "docs/bench-hold.svg", `SVG chart of micro sales/s against critical-section time ("" for none)`)
	stockd := fs.String("stockd", "", "stockd binary (default: stockd next to this binary, else built from source)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return flagExit(err)
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if *quick {
		// A smoke test must not overwrite the committed report by default.
		if !explicit["out"] {
			*out = ""
		}
		if !explicit["svg"] {
			*svg = ""
		}
		if !explicit["segments-svg"] {
			*segSVG = ""
		}
		if !explicit["hold-svg"] {
			*holdSVG = ""
		}
		if !explicit["e2e-runs"] {
			*e2eRuns = 1
		}
		if !explicit["micro-runs"] {
			*microRuns = 1
		}
	}
	rows, err := bench.ParseRowSets(*e2eRows)
	if err != nil {
		fmt.Fprintf(stderr, "seckill bench: --e2e-rows: %v\n", err)
		return exitFailure
	}
	if len(rows) == 0 || *e2eRuns <= 0 || *e2eTarget <= 0 || *microRuns <= 0 || *floodRate < 100 || *floodRate > 50000 {
		fmt.Fprintln(stderr, "seckill bench: --e2e-rows must name a row set, --e2e-runs, --e2e-target and --micro-runs be positive, --flood-rate within 100..50000")
		return exitFailure
	}
	var cs []int
	for _, s := range splitList(*contenders) {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			fmt.Fprintf(stderr, "seckill bench: bad --contenders %q\n", *contenders)
			return exitFailure
		}
		cs = append(cs, n)
	}

	// Progress for a person watching stderr: bench's latest step and the
	// rows done, under the log lines; never with --json or off a terminal.
	logw := stderr
	var h slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	live := progressLine(stderr, *asJSON)
	if live != nil {
		defer live.Close()
		logw = live
		h = newBenchProgress(slog.NewTextHandler(live, &slog.HandlerOptions{Level: slog.LevelInfo}), live)
	}
	log := slog.New(h)
	// The lock backends log through slog.Default; during a benchmark only
	// their warnings belong on the terminal.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn})))
	defer slog.SetDefault(prev)

	rep, err := bench.Run(ctx, bench.Config{
		Quick: *quick, Contenders: cs, Subjects: splitList(*subjects), RowTarget: *rowTarget, MicroRuns: *microRuns,
		SkipMicro: *skipMicro,
		E2E:       bench.E2EConfig{Skip: *skipE2E, Rows: rows, Runs: *e2eRuns, Target: *e2eTarget, FloodRate: *floodRate},
		Stockd:    findStockd(*stockd),
		Command:   strings.TrimSpace("seckill bench " + strings.Join(args, " ")),
		Logger:    log,
	})
	live.Close() // before the summary, which may go to the same terminal
	if err != nil {
		fmt.Fprintf(stderr, "seckill bench: %v\n", err)
		return exitFailure
	}
	// Each chart only when its rows ran: a partial run (--skip-micro,
	// --e2e-rows) must not blank a committed chart.
	if *svg != "" && len(rep.Micro) == 0 {
		*svg = ""
	}
	if *svg != "" {
		if err := writeFile(*svg, rep.WriteSVG); err != nil {
			fmt.Fprintf(stderr, "seckill bench: %v\n", err)
			return exitFailure
		}
	}
	if *segSVG != "" && len(rep.Scaling) == 0 {
		*segSVG = ""
	}
	if *segSVG != "" {
		if err := writeFile(*segSVG, rep.WriteSegmentsSVG); err != nil {
			fmt.Fprintf(stderr, "seckill bench: %v\n", err)
			return exitFailure
		}
	}
	if *holdSVG != "" && len(rep.Hold) == 0 {
		*holdSVG = ""
	}
	if *holdSVG != "" {
		if err := writeFile(*holdSVG, rep.WriteHoldSVG); err != nil {
			fmt.Fprintf(stderr, "seckill bench: %v\n", err)
			return exitFailure
		}
	}
	if *out != "" {
		rel := func(path string) string {
			if path == "" {
				return ""
			}
			if r, err := filepath.Rel(filepath.Dir(*out), path); err == nil {
				return filepath.ToSlash(r)
			}
			return ""
		}
		charts := bench.Charts{Micro: rel(*svg), Segments: rel(*segSVG), Hold: rel(*holdSVG)}
		if err := writeFile(*out, func(w io.Writer) error { return rep.WriteMarkdown(w, charts) }); err != nil {
			fmt.Fprintf(stderr, "seckill bench: %v\n", err)
			return exitFailure
		}
	}
	if *asJSON {
		if err := rep.WriteJSON(stdout); err != nil {
			fmt.Fprintf(stderr, "seckill bench: %v\n", err)
			return exitFailure
		}
	} else {
		writeBenchSummary(stdout, rep)
	}
	if !rep.OK() {
		return exitInconsistent
	}
	return exitOK
}

// writeFile writes through a temp file so an interrupted run leaves the old
// report in place.
func writeFile(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bench-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after the rename this fails harmlessly
	if err := write(tmp); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeBenchSummary prints the rows that ran and the goals.
func writeBenchSummary(w io.Writer, rep *bench.Report) {
	if len(rep.Micro) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "subject\tcontenders\tN\tsales/s\tacquire rt/sale\tfairness\twait p99\tinvariant")
		for _, m := range rep.Micro {
			inv := "ok"
			switch {
			case m.Unavailable:
				inv = "unavailable"
			case !m.InvariantOK:
				inv = "BROKEN: " + m.Error
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.2fms\t%s\n", m.Subject, m.Contenders, m.Stock, m.SalesPerSec, m.AcquireRT, m.Fairness, m.WaitP99ms, inv)
		}
		fmt.Fprintf(tw, "serial bound\t\t\t%.0f\t\t\t\t\n", rep.SerialBound)
		_ = tw.Flush()
		fmt.Fprintln(w)
	}
	if len(rep.E2E) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "end to end\tsales/s\tp99\tconsistent")
		for _, e := range rep.E2E {
			state := fmt.Sprint(e.Consistent)
			if e.Error != "" {
				state = e.Error
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%.1fms\t%s\n", e.Label(), e.SalesPerSec, e.P99ms, state)
		}
		_ = tw.Flush()
		fmt.Fprintln(w)
	}
	if len(rep.Scaling) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "end to end (scaling)\tin flight\tstock\ts/run\tsales/s\truns\tp99\tsold out\tfalse sold-out\tneg. seg.\tinvariant")
		for _, e := range rep.Scaling {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.0f\t%s\t%.1fms\t%d\t%d\t%d\t%s\n", e.Label(), e.Concurrency, e.Stock, e.Seconds,
				e.SalesPerSec, e.RunsText("/"), e.P99ms, e.SoldOut, e.FalseSoldOut, e.NegativeSegments, e.Invariant())
		}
		_ = tw.Flush()
		fmt.Fprintln(w)
	}
	if len(rep.Ledger) > 0 {
		costs := map[string]bench.LedgerCost{}
		for _, c := range rep.LedgerCost {
			costs[c.Label()] = c
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "end to end (ledger)	buyers	stock	s/run	sales/s	runs	p99	vs ledger off	invariant")
		for _, e := range rep.Ledger {
			cost := "—"
			if c, ok := costs[e.Label()]; ok {
				cost = c.String()
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.0f\t%s\t%.1fms\t%s\t%s\n", e.Label(), e.Users, e.Stock, e.Seconds,
				e.SalesPerSec, e.RunsText("/"), e.P99ms, cost, e.Invariant())
		}
		_ = tw.Flush()
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, g := range rep.Goals {
		fmt.Fprintf(tw, "goal %s:\t%s\t%s\n", g.Name, g.Verdict(), g.Measured)
	}
	_ = tw.Flush()
}
