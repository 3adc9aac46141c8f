package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"seckill/internal/api"
	"seckill/internal/lab/loadgen"
)

// verdictCmd judges one `seckill run --json` report against the books read
// from the store after it (compose-test's rows): one line, tab-separated,
// PASS or FAIL, sold, errors, rps and notes (loadgen.Judged.Line). A
// report that is missing or unreadable is a FAIL row, with the tail of
// --err: the run died before it could report.
func verdictCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("verdict", flag.ContinueOnError)
	report := fs.String("report", "", "the run's JSON report (seckill run --json)")
	errFile := fs.String("err", "", "the run's stderr, quoted when it left no report")
	exit := fs.Int("exit", 0, "the run's exit status")
	stock := fs.String("stock", "", "the store's stock after the run")
	lucky := fs.String("lucky", "", "the store's lucky after the run")
	initial := fs.Int64("initial", 0, "the stock the run started from")
	pause := fs.Bool("pause", false, "note busy and fenced answers even when there are none")
	var row loadgen.Row
	fs.Func("want", fmt.Sprintf("a condition on the run (repeatable): %s, %s, %s, %s, %s or %sNAME",
		loadgen.WantExact, loadgen.WantSoldOut, loadgen.WantAllSold, loadgen.WantNoLost, loadgen.WantRouted, loadgen.WantSoldBy),
		func(s string) error { row.Wants = append(row.Wants, s); return nil })
	fs.Func("check", `a condition judged by the caller (repeatable): "LABEL: ok" or "LABEL: NO"`,
		func(s string) error { row.Checks = append(row.Checks, s); return nil })
	if err := parseFlags(fs, args, stderr); err != nil {
		return flagExit(err)
	}
	if *report == "" {
		fmt.Fprintln(stderr, "seckill verdict: --report is required")
		return exitFailure
	}
	failRow := func(why string) int {
		fmt.Fprintf(stdout, "FAIL\t-\t-\t-\t%s\n", strings.NewReplacer("\t", " ", "\n", " ").Replace(why))
		return exitOK
	}
	var rep loadgen.Report
	b, err := os.ReadFile(*report)
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		return failRow(fmt.Sprintf("seckill rc=%d, no report (%v): %s", *exit, err, tail(*errFile, 200)))
	}
	s, errS := strconv.ParseInt(*stock, 10, 64)
	l, errL := strconv.ParseInt(*lucky, 10, 64)
	if errS != nil || errL != nil {
		return failRow(fmt.Sprintf("the store's stock %q / lucky %q unreadable", *stock, *lucky))
	}
	row.Books, row.Exit, row.Pause = api.Books{Stock: s, Lucky: l, Initial: *initial}, *exit, *pause
	j, err := loadgen.Judge(&rep, row)
	if err != nil {
		fmt.Fprintf(stderr, "seckill verdict: %v\n", err)
		return exitFailure
	}
	fmt.Fprintln(stdout, j.Line())
	return exitOK
}

// tail is the last n bytes of the file at path ("" when there is none).
func tail(path string, n int) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b[max(0, len(b)-n):])
}
