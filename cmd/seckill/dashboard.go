package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lab/dashboard"
)

// dashboardCmd is `seckill dashboard`: serve the live dashboard of a running
// cluster until interrupted. It polls each replica (--replicas, not nginx:
// the per-replica numbers need each one's own /metrics) and, with --redis,
// reads the books straight from Redis. It listens on loopback with a free
// port unless told otherwise, and prints the URL. Why a command and not a
// stockd route: see internal/lab/dashboard's package doc.
func dashboardCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dashboard", flag.ContinueOnError)
	replicas := fs.String("replicas", "http://127.0.0.1:8081,http://127.0.0.1:8082,http://127.0.0.1:8083", "stockd replica base URLs, comma-separated")
	redisAddr := fs.String("redis", "", "Redis address (host:port) to read stock, lucky and the initial stock from; empty reads GET /stock and learns the initial stock")
	redisPassword := fs.String("redis-password", "", "Redis password")
	stockKey := fs.String("stock-key", "stock", "stock.key (the initial stock is <stock-key>:initial)")
	luckyKey := fs.String("lucky-key", "lucky", "stock.lucky_key")
	segments := fs.Int("segments", 1, "stock.segments")
	listen := fs.String("listen", "127.0.0.1:0", "listen address (port 0: a free one)")
	interval := fs.Duration("interval", dashboard.DefaultInterval, "how often the replicas are polled")
	if err := parseFlags(fs, args, stderr); err != nil {
		return flagExit(err)
	}
	if *interval <= 0 || *segments < 1 {
		fmt.Fprintln(stderr, "seckill dashboard: --interval must be positive and --segments at least 1")
		return exitFailure
	}
	cfg := dashboard.Config{
		Replicas: strings.Split(*replicas, ","),
		StockKey: *stockKey, LuckyKey: *luckyKey, Segments: *segments,
		Interval: *interval,
		Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if *redisAddr != "" {
		rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, Password: *redisPassword,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
		defer rdb.Close()
		cfg.Redis = rdb
	}
	agg, err := dashboard.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "seckill dashboard: %v\n", err)
		return exitFailure
	}
	d, err := startDashboard(ctx, agg, *listen)
	if err != nil {
		fmt.Fprintf(stderr, "seckill dashboard: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "dashboard: %s (polling %d replicas; Ctrl-C stops)\n", d.URL, len(agg.Replicas()))

	code := exitOK
	select {
	case <-ctx.Done():
	case err := <-d.served:
		fmt.Fprintf(stderr, "seckill dashboard: %v\n", err)
		code = exitFailure
	}
	if err := d.Stop(); err != nil {
		fmt.Fprintf(stderr, "seckill dashboard: shutdown: %v\n", err)
	}
	return code
}

// runningDashboard is a dashboard being served: its poller and HTTP server.
type runningDashboard struct {
	URL    string
	served chan error // Serve's result, if it ends on its own
	srv    *http.Server
	cancel context.CancelFunc
	polled chan struct{}
	after  func() // run by Stop once the poller has stopped, if set
}

// startDashboard polls with agg and serves its page on listen until Stop;
// `seckill dashboard` and `seckill demo --dashboard` share it.
func startDashboard(ctx context.Context, agg *dashboard.Aggregator, listen string) (*runningDashboard, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	d := &runningDashboard{
		URL:    fmt.Sprintf("http://%s/", ln.Addr()),
		served: make(chan error, 1),
		srv:    &http.Server{Handler: dashboard.Handler(agg, nil), ReadHeaderTimeout: 5 * time.Second},
		cancel: cancel,
		polled: make(chan struct{}),
	}
	go func() {
		defer close(d.polled)
		agg.Run(ctx)
	}()
	go func() { d.served <- d.srv.Serve(ln) }()
	return d, nil
}

// Stop ends the poller and the server (open page requests get 2 s).
func (d *runningDashboard) Stop() error {
	d.cancel()
	shutCtx, done := context.WithTimeout(context.Background(), 2*time.Second)
	defer done()
	err := d.srv.Shutdown(shutCtx)
	<-d.polled
	if d.after != nil {
		d.after()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
