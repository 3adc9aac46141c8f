// Command seckill drives the flash-sale lab from the outside.
//
//	seckill run  --url URL [--requests 500] [--concurrency 50] [--stock 300] [--admin-token T] [--json] [--timeout 30s] [--users U [--retry-rate R]]
//	seckill run  --url URL --rate R [--duration 10s] [--request-timeout 10s] [--stock 300] [--users U] [--json]
//	seckill demo [--backends none,local,redis,...] [--replicas 3] [--requests 500] [--concurrency 50] [--stock 300] [--delay 5ms] [--buyers 500] [--json]
//	seckill lab [--backends ...] [--scenarios ...] [--json]
//	seckill leader --url URL[,URL...] [--duration 30s] [--interval 200ms]
//	seckill bench [--quick] [--out docs/benchmarks.md] [--svg docs/bench.svg] [--json]
//	seckill verdict --report F.json --exit RC --stock S --lucky L --initial N [--want W]... [--check "LABEL: ok"]...
//
// run resets the stock of a running cluster, fires the requests, reads the
// stock back and verifies it; with --users the requests are purchases by
// named buyers, some re-sent with the same Idempotency-Key, and the order
// ledger is checked too (no buyer over the limit, one order per key);
// with --rate buyers arrive at that rate for --duration, answered or not
// (an open loop), and the report adds the buyers left unanswered.
// demo starts a local cluster (redis-server, etcd/ZooKeeper when needed,
// stockd replicas behind nginx), does one run per lock backend and prints
// a table, then the redis row again past the one-lock bound and with
// named buyers (the ledger, a per-user limit, durable orders in MariaDB).
//
// Exit status: 0 consistent; 3 oversold, inconsistent or a buyers' check
// failed (for demo: a backend that should be correct was not); 1 usage,
// connection or start-up errors.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses.
const (
	exitOK           = 0
	exitFailure      = 1 // usage, connection, start-up
	exitInconsistent = 3 // oversold, inconsistent books, a negative segment, a false sold-out or a failed buyers' check
)

// errUsage marks a command-line mistake; its message has been printed by the
// flag package or is printed with the usage.
var errUsage = errors.New("usage")

const usage = `usage:
  seckill run    --url URL [--requests N] [--concurrency C] [--stock S] [--admin-token T] [--json] [--timeout D] [--users U [--retry-rate R]]
  seckill run    --url URL --rate R [--duration D] [--request-timeout D] [--stock S] [--admin-token T] [--json] [--users U]
  seckill demo   [--backends a,b,...] [--replicas N] [--requests N] [--concurrency C] [--stock S] [--delay D] [--buyers U] [--json]
  seckill lab    [--backends a,b,...] [--scenarios a,b,...] [--json]
  seckill leader --url URL[,URL...] [--duration 30s] [--interval 200ms]
  seckill bench  [--quick] [--out docs/benchmarks.md] [--svg docs/bench.svg] [--json]
  seckill dashboard --replicas URL,URL,... [--redis ADDR] [--listen 127.0.0.1:0]
  seckill soak   [--backends a,b,...] [--duration 10m] [--every 30s] [--rps 10] [--concurrency 6] [--json]
  seckill verdict --report F.json --exit RC --stock S --lucky L --initial N [--want W]... [--check "LABEL: ok"]...

Run "seckill <command> -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitFailure
	}
	var cmd func(context.Context, []string, io.Writer, io.Writer) int
	switch args[0] {
	case "run":
		cmd = runCmd
	case "demo":
		cmd = demoCmd
	case "lab":
		cmd = labCmd
	case "leader":
		cmd = leaderCmd
	case "bench":
		cmd = benchCmd
	case "dashboard":
		cmd = dashboardCmd
	case "soak":
		cmd = soakCmd
	case "verdict":
		cmd = verdictCmd
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "seckill: unknown command %q\n%s", args[0], usage)
		return exitFailure
	}
	return cmd(ctx, args[1:], stdout, stderr)
}

// parseFlags parses args into fs and rejects positional arguments. It
// returns flag.ErrHelp for -h and errUsage for anything else wrong.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "seckill %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}

// flagExit maps a parseFlags error to an exit status.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitFailure
}
