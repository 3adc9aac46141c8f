package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"seckill/internal/auth"
	"seckill/internal/lab/loadgen"
)

// runCmd is `seckill run`: one verified flash sale against a running cluster.
func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var cfg loadgen.Config
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080", "cluster base URL (nginx)")
	fs.IntVar(&cfg.Requests, "requests", 500, "reduce requests to send (with --users: purchases; re-sends come on top)")
	fs.IntVar(&cfg.Concurrency, "concurrency", 50, "requests in flight at once")
	fs.IntVar(&cfg.Stock, "stock", 300, "initial stock to reset to")
	fs.StringVar(&cfg.AdminToken, "admin-token", os.Getenv("SECKILL_ADMIN_TOKEN"), "X-Admin-Token for the reset (default $SECKILL_ADMIN_TOKEN)")
	fs.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "bound on the firing phase")
	fs.IntVar(&cfg.Users, "users", 0, `buyers "u1".."uU": every request a purchase by one of them with its own Idempotency-Key, verified against the ledger (0: anonymous sales)`)
	jwtSecret := fs.String("jwt-secret", "", "with --users: sign each buyer's token (HS256) with this secret, the replicas' auth.jwt_secret (default $SECKILL_JWT_SECRET); without one, buyers are sent as X-User (for replicas behind a gateway that trusts this client, auth.buyers proxy)")
	jwtIssuer := fs.String("jwt-issuer", "seckill", "the tokens' iss: the replicas' auth.jwt_issuer")
	jwtAudience := fs.String("jwt-audience", "seckill", "the tokens' aud: the replicas' auth.jwt_audience")
	fs.Float64Var(&cfg.RetryRate, "retry-rate", 0, "with --users: fraction of purchases re-sent with the same key (after a cut first send, after the answer, or racing it)")
	fs.DurationVar(&cfg.RetryTimeout, "retry-timeout", 50*time.Millisecond, "with --users: when a re-sent purchase's first send is cut by the client")
	fs.DurationVar(&cfg.Drain, "drain", 30*time.Second, "with --users and durable orders: bound on the wait for MySQL to catch up")
	check := fs.Bool("check", true, fmt.Sprintf("check every answer as a history against the sale's model (Porcupine; runs up to %d requests in flight, else says it did not)", loadgen.HistoryMaxInFlight))
	fs.StringVar(&cfg.HistoryDir, "history-dir", os.TempDir(), "where a violation's picture (HTML) is written")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the summary")
	if err := parseFlags(fs, args, stderr); err != nil {
		return flagExit(err)
	}
	cfg.NoHistory = !*check
	if *jwtSecret == "" {
		*jwtSecret = os.Getenv("SECKILL_JWT_SECRET")
	}
	if *jwtSecret != "" && cfg.Users > 0 {
		// Test buyers' tokens: an hour outlasts any run.
		cfg.Minter = auth.NewMinter([]byte(*jwtSecret), *jwtIssuer, *jwtAudience, time.Hour)
	}
	if cfg.Requests <= 0 || cfg.Concurrency <= 0 || cfg.Stock <= 0 || cfg.Timeout <= 0 {
		fmt.Fprintln(stderr, "seckill run: --requests, --concurrency, --stock and --timeout must be positive")
		return exitFailure
	}
	if cfg.Users < 0 || cfg.RetryRate < 0 || cfg.RetryRate > 1 || (cfg.RetryRate > 0 && cfg.Users == 0) ||
		cfg.RetryTimeout <= 0 || cfg.Drain <= 0 {
		fmt.Fprintln(stderr, "seckill run: --users must be >= 0, --retry-rate in [0, 1] and only with --users, --retry-timeout and --drain positive")
		return exitFailure
	}

	// Progress only for a person watching: never with --json or when the
	// output goes to a pipe or a file.
	stopProgress := func() {}
	if !*asJSON && isTerminal(stdout) {
		stopProgress = startProgress(ctx, stdout, strings.TrimRight(cfg.URL, "/"), cfg.Stock, 200*time.Millisecond)
	}
	report, err := loadgen.Run(ctx, cfg)
	stopProgress()
	if report == nil {
		fmt.Fprintf(stderr, "seckill run: %v\n", err)
		return exitFailure
	}
	if perr := printReport(stdout, report, *asJSON); perr != nil {
		fmt.Fprintf(stderr, "seckill run: %v\n", perr)
		return exitFailure
	}
	switch {
	case !report.OK(): // books, segments, false sold-outs and the buyers' checks
		return exitInconsistent
	case err != nil: // a timed-out run that happens to be consistent is still a failed run
		fmt.Fprintf(stderr, "seckill run: %v\n", err)
		return exitFailure
	}
	return exitOK
}

func printReport(w io.Writer, r *loadgen.Report, asJSON bool) error {
	if !asJSON {
		return r.WriteText(w)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return errors.Join(errors.New("encode report"), err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
