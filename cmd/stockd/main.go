// Command stockd is one replica of the flash-sale service: it sells units of
// a stock kept in Redis, guarded by a configurable lock backend, behind an
// HTTP API (see internal/handler).
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
	"runtime/debug"
	"strings"
	"syscall"

	"seckill/internal/auth"
	"seckill/internal/failpoint"
)

// version is set at build time (-ldflags "-X main.version=v1.2.3"); without
// it the module version from the build info is used.
var version = ""

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
		fmt.Fprintln(stderr, buildVersion())
		return exitOK
	}

	cfg, err := Load(*configPath, env)
	if err == nil {
		err = Validate(cfg)
	}
	var buyers *auth.Identity
	if err == nil {
		buyers, err = buildBuyers(cfg)
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

	log := newLogger(cfg, stderr)
	slog.SetDefault(log) // libraries that log through slog.Default follow our format
	if len(armed) > 0 {
		log.Warn("FAILPOINTS ARMED: this replica will misbehave on purpose", "failpoints", failpoint.Active())
	}
	if buyers.Mode == auth.ModeNone {
		log.Info("buyers: none; every sale is anonymous (auth.buyers), X-User and bearer tokens are refused")
	}
	if err := serve(ctx, cfg, buyers, log); err != nil {
		if errors.Is(err, errEvictingRedis) || errors.Is(err, errNoAOF) {
			log.Error("stockd refused to start", "err", err)
			return exitConfig
		}
		log.Error("stockd failed", "err", err)
		return exitFail
	}
	return exitOK
}

// lookupEnv reads one variable from a KEY=VALUE list (the last one wins, as
// in os.Getenv).
func lookupEnv(env []string, key string) string {
	val := ""
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			val = v
		}
	}
	return val
}

func newLogger(cfg *Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level)) // validated already
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.Log.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h).With("replica", cfg.Replica)
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return strings.TrimSpace(bi.Main.Version + " " + s.Value)
			}
		}
		return bi.Main.Version
	}
	return "unknown"
}
