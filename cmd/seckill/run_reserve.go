package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"seckill/internal/auth"
	"seckill/internal/lab/loadgen"
)

// runReserve is `seckill run --never-pay N`: the demo's reservations row
// against any cluster whose replicas have orders.payment_window
// (loadgen.RunReserve), as compose-test's reserve variant runs it.
func runReserve(ctx context.Context, fs *flag.FlagSet, cfg loadgen.Config, neverPay int, secret, issuer, audience string,
	asJSON bool, stdout, stderr io.Writer) int {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, other := range []string{"rate", "users", "retry-rate", "item", "items"} {
		if set[other] {
			fmt.Fprintf(stderr, "seckill run: --never-pay names its own buyers and closes its own loop: not with --%s\n", other)
			return exitFailure
		}
	}
	if neverPay < 0 {
		fmt.Fprintln(stderr, "seckill run: --never-pay must be positive (every Nth buyer never pays)")
		return exitFailure
	}
	rc := loadgen.ReserveConfig{
		URL: cfg.URL, AdminToken: cfg.AdminToken,
		Stock: cfg.Stock, Buyers: cfg.Requests, NeverPay: neverPay, Concurrency: cfg.Concurrency,
		// Every round of resales waits out a window and the expirer.
		Timeout: cfg.Timeout,
	}
	if secret != "" {
		rc.Minter = auth.NewMinter([]byte(secret), issuer, audience, time.Hour)
	}
	rep, err := loadgen.RunReserve(ctx, rc)
	if rep == nil {
		fmt.Fprintf(stderr, "seckill run: %v\n", err)
		return exitFailure
	}
	if perr := printReserve(stdout, rep, asJSON); perr != nil {
		fmt.Fprintf(stderr, "seckill run: %v\n", perr)
		return exitFailure
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "seckill run: %v\n", err)
		return exitFailure
	case !rep.Consistent || rep.Errors != 0:
		return exitInconsistent
	}
	return exitOK
}

// printReserve writes the report as JSON, or as a few lines.
func printReserve(w io.Writer, r *loadgen.ReserveReport, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	census := "not read"
	if r.Census != nil {
		census = "ok"
		if !r.Census.OK {
			census = fmt.Sprint(r.Census.Problems)
		}
	}
	verdict := "CONSISTENT"
	if !r.Consistent || r.Errors != 0 {
		verdict = "INCONSISTENT"
	}
	_, err := fmt.Fprintf(w, "stock %d, buyers %d: paid %d (all paid after %.0f ms), never paid %d, returned %d, refunds %d, lost %d, errors %d, units paid twice %d\n"+
		"books: stock %d + lucky %d - returned %d; census %s; lifecycles %d orders, %d broken\n%s\n",
		r.Stock, r.Buyers, r.Paid, r.PaidAllMS, r.NeverPay, r.Returned, r.Refunds, r.Lost, r.Errors, r.PaidTwice,
		r.Left, r.Lucky, r.Returned, census, r.Lifecycles.Orders, r.Lifecycles.Broken, verdict)
	return err
}
