// Command stockd is one replica of the flash-sale service: it sells units of
// a stock kept in Redis, guarded by a configurable lock backend, behind an
// HTTP API (see internal/handler). This file is the process: flags,
// signals and exit codes; the service itself is package internal/stockd.
//
//	stockd --config configs/stockd.yaml
//	STOCKD_LOCK_BACKEND=local STOCKD_REDIS_ADDR=127.0.0.1:6379 stockd
//
// Exit codes: 0 after a clean shutdown on SIGTERM/SIGINT, 2 for an invalid
// configuration, a Redis that may evict keys (its maxmemory-policy) or,
// with stock.require_aof, a stock Redis without an AOF; 1 for any other
// failure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"seckill/internal/auth"
	"seckill/internal/failpoint"
	"seckill/internal/health"
	"seckill/internal/stockd"
)

// Exit codes.
const (
	exitOK     = 0
	exitFail   = 1
	exitConfig = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Environ(), os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process globals, returning the exit code.
func run(ctx context.Context, args, env []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("stockd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "path to the YAML config file (default: built-in defaults + STOCKD_* environment)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return exitConfig
	}
	if *showVersion {
		fmt.Fprintln(stderr, stockd.VersionLine())
		return exitOK
	}

	cfg, err := stockd.Load(*configPath, env)
	if err == nil {
		err = stockd.Validate(cfg)
	}
	var buyers *auth.Identity
	if err == nil {
		buyers, err = stockd.BuildBuyers(cfg)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitConfig
	}

	// Lab fault injection (package failpoint): armed from the environment
	// so a replica of the lab cluster can be made to crash or stall at a
	// named point. A bad spec is a configuration error like any other.
	// Validate has checked the names and that lab.unsafe permits them.
	armed, err := failpoint.EnableSpec(cfg.Lab.Failpoints)
	if err != nil {
		fmt.Fprintf(stderr, "config: %s: %v\n", failpoint.EnvVar, err)
		return exitConfig
	}

	log := stockd.NewLogger(cfg, stderr)
	slog.SetDefault(log) // libraries that log through slog.Default follow our format
	if len(armed) > 0 {
		log.Warn("FAILPOINTS ARMED: this replica will misbehave on purpose", "failpoints", failpoint.Active())
	}
	if buyers.Mode == auth.ModeNone {
		log.Info("buyers: none; every sale is anonymous (auth.buyers), X-User and bearer tokens are refused")
	}
	if err := stockd.Serve(ctx, cfg, buyers, log); err != nil {
		if errors.Is(err, health.ErrEvictingRedis) || errors.Is(err, health.ErrNoAOF) {
			log.Error("stockd refused to start", "err", err)
			return exitConfig
		}
		log.Error("stockd failed", "err", err)
		return exitFail
	}
	return exitOK
}
