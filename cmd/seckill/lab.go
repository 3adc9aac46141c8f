package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"seckill/internal/lab"
	"seckill/internal/lab/localcluster"
)

// labCmd runs the fault-injection matrix: every scenario on every lock
// backend (package lab), on a local cluster with the fault layer on, and
// prints one row per cell. Exit 0 when every cell that could run showed what
// it must (safe for correct backends, the failure for controls and flawed
// backends); 3 when one did not; 1 when the cluster could not be run.
func labCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	backends := fs.String("backends", "", "comma-separated backends (default: "+strings.Join(lab.Correct, ",")+" and the flawed redis-nocheck,redis-checkdel,setnx)")
	scenarios := fs.String("scenarios", "", "comma-separated scenarios (default: "+strings.Join(lab.Scenarios(), ",")+")")
	asJSON := fs.Bool("json", false, "print one JSON object per cell per line instead of the table")
	stockd := fs.String("stockd", "", "stockd binary (default: stockd next to this binary, else built from source)")
	dir := fs.String("dir", "", "keep the cluster's logs and data here (default: a temp dir, removed)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return flagExit(err)
	}
	for _, s := range splitList(*scenarios) {
		if lab.Summary(s) == "" {
			fmt.Fprintf(stderr, "seckill lab: unknown scenario %q (want %s)\n", s, strings.Join(lab.Scenarios(), ", "))
			return exitFailure
		}
	}
	for _, b := range splitList(*backends) {
		for _, s := range splitList(*scenarios) {
			if why := lab.Inapplicable(b, s); why != "" {
				fmt.Fprintf(stderr, "seckill lab: %s/%s does not apply: %s\n", b, s, why)
			}
		}
	}
	cells := lab.Matrix(splitList(*backends), splitList(*scenarios))
	if len(cells) == 0 {
		fmt.Fprintln(stderr, "seckill lab: no cells match --backends and --scenarios")
		return exitFailure
	}

	// Progress for a person watching stderr: the cell running and how many
	// are done, under the log lines; never with --json or off a terminal.
	logw := stderr
	live := progressLine(stderr, *asJSON)
	if live != nil {
		defer live.Close()
		logw = live
	}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := lab.ClusterConfig()
	cfg.Dir, cfg.Stockd, cfg.Logger = *dir, findStockd(*stockd), log
	c, err := localcluster.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "seckill lab: start cluster: %v\n", err)
		return exitFailure
	}
	defer func() {
		if err := c.Close(); err != nil {
			log.Warn("cluster close", "err", err)
		}
	}()

	start := time.Now()
	var results []lab.Result
	code := exitOK
	for i, cell := range cells {
		live.Set(fmt.Sprintf("lab: cell %d/%d %s", i+1, len(cells), cell))
		if ctx.Err() != nil {
			fmt.Fprintln(logw, "seckill lab: interrupted; tearing the cluster down")
			return exitFailure
		}
		log.Info("cell", "cell", cell.String())
		r, err := lab.Run(ctx, c, cell)
		switch {
		case err != nil:
			r.Status, r.Note = "ERROR", firstLine(err)
			log.Error("cell could not run", "cell", cell.String(), "err", err)
			code = exitFailure
		case !r.Passed():
			code = max(code, exitInconsistent)
		}
		if *asJSON {
			b, _ := json.Marshal(r)
			fmt.Fprintf(stdout, "%s\n", b)
		}
		results = append(results, r)
	}
	live.Close() // before the table, which may go to the same terminal
	if !*asJSON {
		writeLabTable(stdout, results)
		fmt.Fprintf(stdout, "%d cells in %s; recovery expected within %v (later is reported slow, not failed)\n", len(results), time.Since(start).Round(time.Second), lab.RecoveryBound)
	}
	return code
}

func writeLabTable(w io.Writer, rows []lab.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\tscenario\tfencing\texpect\toversold\tfenced\tlock_lost\terrors\tsold\tunconfirmed\tlucky+stock\trecovery\tstatus\tnote")
	for _, r := range rows {
		scenario := r.Scenario
		if r.Sale != "" {
			scenario += " (" + r.Sale + ")"
		}
		if r.Buyers {
			scenario += " (buyers)"
		}
		if f := r.Failover; f != nil {
			scenario += fmt.Sprintf(" (acks %d: %d lost, switch %dms)", f.Acks, f.Lost, f.SwitchMS)
		}
		rec := "-"
		if r.RecoveryMS >= 0 {
			rec = fmt.Sprintf("%dms", r.RecoveryMS)
		}
		if len(r.Slow) > 0 {
			rec += fmt.Sprintf(" (slow: %s)", strings.Join(r.Slow, "; "))
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%d\t%d\t%d\t%d\t%d\t%d (%d sold)\t%d/%d\t%s\t%s\t%s\n",
			r.Backend, scenario, r.Fencing, r.Expect, r.Oversold, r.Fenced, r.LockLost, r.Errors, r.Sold,
			r.Unconfirmed, r.UnconfirmedSold, r.Lucky+r.Stock, r.Initial, rec, r.Status, r.Note)
	}
	_ = tw.Flush()
}
