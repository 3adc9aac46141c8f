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

	"seckill/internal/bench"
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
	skipE2E := fs.Bool("skip-e2e", false, "leave out the end-to-end runs through nginx")
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

	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// The lock backends log through slog.Default; during a benchmark only
	// their warnings belong on the terminal.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	defer slog.SetDefault(prev)

	rep, err := bench.Run(ctx, bench.Config{
		Quick: *quick, Contenders: cs, Subjects: splitList(*subjects), RowTarget: *rowTarget,
		E2E:     bench.E2EConfig{Skip: *skipE2E},
		Stockd:  findStockd(*stockd),
		Command: strings.TrimSpace("seckill bench " + strings.Join(args, " ")),
		Logger:  log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "seckill bench: %v\n", err)
		return exitFailure
	}
	if *svg != "" {
		if err := writeFile(*svg, rep.WriteSVG); err != nil {
			fmt.Fprintf(stderr, "seckill bench: %v\n", err)
			return exitFailure
		}
	}
	if *out != "" {
		svgRef := ""
		if *svg != "" {
			if rel, err := filepath.Rel(filepath.Dir(*out), *svg); err == nil {
				svgRef = filepath.ToSlash(rel)
			}
		}
		if err := writeFile(*out, func(w io.Writer) error { return rep.WriteMarkdown(w, svgRef) }); err != nil {
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

// writeBenchSummary prints the rows at the goal's contender count and the goals.
func writeBenchSummary(w io.Writer, rep *bench.Report) {
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
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
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
	for _, g := range rep.Goals {
		fmt.Fprintf(w, "goal %-32s %-28s %s\n", g.Name+":", g.Verdict(), g.Measured)
	}
}
