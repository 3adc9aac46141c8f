package main

import (
	"cmp"
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

// runCmd is `seckill run`: one verified flash sale against a running
// cluster, closed loop (--requests at --concurrency) or open (--rate for
// --duration).
func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var cfg loadgen.Config
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080", "cluster base URL (nginx)")
	fs.IntVar(&cfg.Requests, "requests", 500, "reduce requests to send (with --users: purchases; re-sends come on top)")
	fs.IntVar(&cfg.Concurrency, "concurrency", 50, "requests in flight at once")
	fs.IntVar(&cfg.Stock, "stock", 300, "initial stock to reset to")
	fs.StringVar(&cfg.Item, "item", "", "sell this item (docs/items.md) instead of the default sale: created, or reset when it exists, with --stock and no window")
	items := fs.Int("items", 0, fmt.Sprintf("sell N items at once (1..%d), <item>-1..<item>-N (--item, default \"item\"), each with --stock units and 1/N of the buyers: --requests and --concurrency, or --rate", loadgen.MaxSpreadItems))
	fs.StringVar(&cfg.AdminToken, "admin-token", os.Getenv("SECKILL_ADMIN_TOKEN"), "X-Admin-Token for the reset (default $SECKILL_ADMIN_TOKEN)")
	fs.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "bound on the firing phase (with --rate: default --duration + --request-timeout + 5s)")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", 10*time.Second, "bound on each request, its answer read included (with --rate: a buyer past it is unanswered)")
	fs.IntVar(&cfg.Rate, "rate", 0, "open loop: buyers arriving per second, answered or not (vegeta's pacer), instead of --requests and --concurrency")
	fs.IntVar(&cfg.RetryBusy, "retry-busy", 0, fmt.Sprintf("with --rate: a buyer answered busy sends again after its Retry-After (unless that outlasts --request-timeout: its answer is then busy), up to this many times (0..%d)", loadgen.MaxRetryBusy))
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, fmt.Sprintf("with --rate: how long buyers arrive (at most %v)", loadgen.MaxDuration))
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
	neverPay := fs.Int("never-pay", 0, "a sale with reservations (the replicas' orders.payment_window): --requests buyers, each its own, trying until it wins or nothing is left to come back; every Nth never pays for what it wins, so its unit expires and sells again. Passes when every unit is paid once, the books and census are exact and each order's lifecycle holds (docs/reservations.md)")
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
	if cfg.RequestTimeout <= 0 {
		fmt.Fprintln(stderr, "seckill run: --request-timeout must be positive")
		return exitFailure
	}
	if msg := openFlags(fs, &cfg); msg != "" {
		fmt.Fprintln(stderr, "seckill run: "+msg)
		return exitFailure
	}

	if *items != 0 {
		return runItems(ctx, cfg, *items, *asJSON, stdout, stderr)
	}
	if *neverPay != 0 {
		return runReserve(ctx, fs, cfg, *neverPay, *jwtSecret, *jwtIssuer, *jwtAudience, *asJSON, stdout, stderr)
	}

	// Progress only for a person watching: never with --json or when the
	// output goes to a pipe or a file.
	stopProgress := func() {}
	if !*asJSON && isTerminal(stdout) && cfg.Item == "" { // it reads the default sale's GET /stock
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

// openFlags checks the open loop's flags (--rate, --duration) against the
// closed loop's and returns what is wrong, or "". With --rate and no
// --timeout it leaves the fire phase's bound to loadgen (past the open
// loop's own end).
func openFlags(fs *flag.FlagSet, cfg *loadgen.Config) string {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["rate"] {
		if set["duration"] || set["retry-busy"] {
			return "--duration and --retry-busy are the open loop's: give them with --rate"
		}
		return ""
	}
	open := loadgen.OpenConfig{Rate: cfg.Rate, Duration: cfg.Duration}
	switch {
	case set["requests"] || set["concurrency"]:
		return "--rate/--duration (open loop: buyers arrive at a fixed rate) and --requests/--concurrency (closed loop: a fixed number in flight) are two modes; give one"
	case cfg.Rate <= 0 || cfg.Rate > loadgen.MaxRate:
		return fmt.Sprintf("--rate must be 1..%d buyers per second", loadgen.MaxRate)
	case cfg.Duration <= 0 || cfg.Duration > loadgen.MaxDuration:
		return fmt.Sprintf("--duration must be positive and at most %v", loadgen.MaxDuration)
	case open.Planned() > loadgen.MaxBuyers:
		return fmt.Sprintf("--rate %d for --duration %v is %d buyers, more than %d", cfg.Rate, cfg.Duration, open.Planned(), loadgen.MaxBuyers)
	case cfg.RetryRate > 0:
		return "--retry-rate re-sends a purchase, and an open-loop arrival is one send: use it with --requests/--concurrency"
	case cfg.RetryBusy < 0 || cfg.RetryBusy > loadgen.MaxRetryBusy:
		return fmt.Sprintf("--retry-busy must be 0..%d", loadgen.MaxRetryBusy)
	}
	if !set["timeout"] {
		cfg.Timeout = 0
	}
	return ""
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

// runItems is `seckill run --items N`: the sale spread over N items.
func runItems(ctx context.Context, cfg loadgen.Config, n int, asJSON bool, stdout, stderr io.Writer) int {
	if n < 1 || n > loadgen.MaxSpreadItems {
		fmt.Fprintf(stderr, "seckill run: --items must be 1..%d\n", loadgen.MaxSpreadItems)
		return exitFailure
	}
	if cfg.Users > 0 {
		fmt.Fprintln(stderr, "seckill run: --items with --users: the buyers' verdict reads the default sale's ledger")
		return exitFailure
	}
	report, err := loadgen.RunItems(ctx, cfg, loadgen.ItemIDs(cfg.Item, n))
	if report == nil {
		fmt.Fprintf(stderr, "seckill run: %v\n", err)
		return exitFailure
	}
	var perr error
	if asJSON {
		var b []byte
		if b, perr = json.Marshal(report); perr == nil {
			_, perr = fmt.Fprintf(stdout, "%s\n", b)
		}
	} else {
		perr = report.WriteText(stdout)
	}
	if perr != nil {
		fmt.Fprintf(stderr, "seckill run: %v\n", perr)
		return exitFailure
	}
	for _, r := range report.Items {
		if !r.OK() {
			return exitInconsistent
		}
	}
	if err != nil || !report.OK(n) {
		fmt.Fprintf(stderr, "seckill run: %v\n", cmp.Or(err, error(errors.New("an item's run is missing"))))
		return exitFailure
	}
	return exitOK
}
