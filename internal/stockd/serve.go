package stockd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/redis/go-redis/v9"
	"golang.org/x/net/netutil"

	"seckill/internal/auth"
	"seckill/internal/stock/redisstore"
)

// Serve wires the replica and runs it until ctx is done, then shuts down:
// stop accepting, let in-flight sales finish (each releases its own lease),
// then close the locker and the clients. Its steps, in order, are the
// replica's methods (replica.go).
func Serve(ctx context.Context, cfg *Config, buyers *auth.Identity, log *slog.Logger) (err error) {
	w := &wiring{cfg: cfg, log: log}
	defer func() {
		cerr := w.close()
		if err == nil && cerr != nil {
			// A clean stop with a server unreachable: what could not be
			// released expires with its lease or session. Not a failure.
			log.Warn("shutdown: could not close every client cleanly", "err", cerr)
			return
		}
		err = errors.Join(err, cerr)
	}()
	r := &replica{w: w, cfg: cfg, log: log}
	// Built first so it closes last: the locker and the audit use it.
	r.stockRDB = w.stockRedis()
	if err := r.lock(ctx); err != nil {
		return err
	}
	if err := r.checkRedis(ctx); err != nil {
		return err
	}
	if err := r.buildStore(ctx); err != nil {
		return err
	}
	r.buildSale(ctx)
	if err := r.startOrders(ctx); err != nil {
		return err
	}
	r.startExpirer(ctx)
	src := auditSources{ledger: r.ledgerReader, durable: r.durableOrders, items: r.items, itemLedgers: r.itemLedgers}
	if r.reserving() {
		src.reservations = r.store
	}
	stopElection, leader, err := startElection(ctx, w, r.m.Registry(), src)
	if err != nil {
		return err
	}
	// Runs before w.close (deferred earlier): the election borrows w's sessions.
	defer stopElection()

	h := r.handler(buyers, leader)
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTP.Addr, err)
	}
	// Connections beyond the cap wait in the kernel's accept queue rather
	// than costing a descriptor and a goroutine each.
	ln = netutil.LimitListener(ln, cfg.HTTP.MaxConns)
	srv := newHTTPServer(cfg, h, log)
	r.logStart(ctx, ln.Addr().String())
	return serveUntilDone(ctx, cfg, log, srv, ln, stopElection)
}

// serveUntilDone serves on ln until ctx is done, then drains: the
// election resigns beside the HTTP drain, bounded by
// http.shutdown_timeout, and both end before Serve closes the clients.
func serveUntilDone(ctx context.Context, cfg *Config, log *slog.Logger, srv *http.Server, ln net.Listener, stopElection func()) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	// Resign at once so another replica takes over the job rather than after
	// this one's session expires — beside the HTTP drain, not before it: a
	// resign that cannot reach etcd must not eat into the drain's time. It
	// must end before the clients close (the deferred w.close), since the
	// election borrows their sessions.
	resigned := make(chan struct{})
	go func() { defer close(resigned); stopElection() }()
	defer func() { <-resigned }()
	log.Info("shutting down", "timeout", cfg.HTTP.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// In-flight requests outlived the timeout: cut them off. Their leases
		// are then released by the locker's Close (or expire by TTL).
		log.Warn("shutdown timed out; closing connections", "err", err)
		_ = srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("stopped")
	return nil
}

// headerSlop is what net/http adds to http.Server.MaxHeaderBytes when it
// reads a request's head (its initialReadLimitSize: "bufio slop").
const headerSlop = 4096

// newHTTPServer bounds what one client can hold: header and whole-request
// read deadlines (a slow body is cut at http.read_timeout), a write deadline
// above the longest sale (validated: lock.wait_timeout + work.delay), idle
// keep-alive connections closed after http.idle_timeout, headers capped at
// http.max_header_bytes (431 beyond).
func newHTTPServer(cfg *Config, h http.Handler, log *slog.Logger) *http.Server {
	// net/http reads a request's line and headers up to MaxHeaderBytes
	// plus headerSlop (room for its bufio read-ahead), so MaxHeaderBytes
	// set to the key would let 4 KiB more through than it says. The key is
	// at least 8 KiB (Validate): this never reaches 0, net/http's "1 MiB".
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		WriteTimeout:      cfg.HTTP.WriteTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
		MaxHeaderBytes:    cfg.HTTP.MaxHeaderBytes - headerSlop,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// salesConfig is the one recipe of every sale's store on the stock Redis,
// the default sale's and each item's (redisstore.ItemsConfig.Store): the
// replica acks, the witness (a register per sale), the window clock and,
// with durable orders, the durable copy its learning checks. Service, the
// template of the sales' services, is set once built (buildSale).
func salesConfig(cfg *Config, rdb redis.UniversalClient, regs witnessRegisters, ledger, durable bool, units *durableUnits) redisstore.ItemsConfig {
	ic := redisstore.ItemsConfig{
		Redis: rdb, Base: saleKeys(cfg, ledger),
		Acks: redisstore.ReplicaAcks{
			Replicas: minReplicaAcks(cfg), Timeout: redisstore.AckWithin(cfg.Stock.ReplicaAckTimeout),
		},
		Witness: regs.sales(cfg), WitnessTimeout: cfg.Stock.WitnessTimeout,
		Clock:        redisstore.WindowClock{MaxSkew: cfg.Stock.MaxClockSkew},
		Reservations: cfg.Orders.PaymentWindow > 0,
	}
	if durable {
		ic.Units = units.sale
		ic.DurableStates = ic.Reservations
	}
	return ic
}
