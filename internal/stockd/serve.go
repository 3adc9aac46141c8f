package stockd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"golang.org/x/net/netutil"

	"seckill/internal/auth"
	"seckill/internal/election/audit"
	"seckill/internal/handler"
	"seckill/internal/lock"
	"seckill/internal/metrics"
	"seckill/internal/stock"
)

// Serve wires the replica and runs it until ctx is done, then shuts down:
// stop accepting, let in-flight sales finish (each releases its own lease),
// then close the locker and the clients.
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
	// Built first so it closes last: the locker and the audit use it.
	stockRDB := w.stockRedis()

	mode := stock.Mode(cfg.Stock.Mode)
	var locker lock.Locker
	info := lock.Info{Name: cfg.Lock.Backend}
	if mode == stock.ModeLocked {
		if locker, info, err = buildLocker(ctx, w); err != nil {
			return err
		}
	}
	// Fencing needs tokens that are comparable across replicas; none and
	// local do not vouch for theirs (Safe == false), and the atomic mode has
	// no lock to fence.
	fencing := cfg.Stock.Fencing && info.Safe && mode == stock.ModeLocked

	// The ledger is written by the fenced write and the atomic sale; an
	// unfenced sale (the lab's control) has no ledger form, so the ledger
	// is off there rather than an /info that promises orders never written.
	ledger := cfg.Stock.Ledger && (fencing || mode == stock.ModeAtomic)
	if cfg.Stock.Ledger && !ledger {
		log.Warn("stock.ledger is on but sales are unfenced: no order ledger (X-User and Idempotency-Key answer 400)")
	}
	durable := cfg.Orders.Durable && ledger

	m := metrics.New(prometheus.Labels{"replica": cfg.Replica, "backend": info.Name})
	redis.SetLogger(redisLogger{log: log, lim: metrics.NewLogLimiter(m, 0)})
	// Before the sale, the election or the listener start: a Redis that
	// may evict keys loses sales it acknowledged, so it is refused here.
	policies := policyChecks(w, mode == stock.ModeLocked)
	if err := checkEviction(ctx, cfg, log, policies); err != nil {
		return err
	}
	regs, err := buildWitness(ctx, w)
	if err != nil {
		return err
	}
	store := stock.NewStore(stockRDB, saleKeys(cfg, ledger)).WithReplicaAcks(stock.ReplicaAcks{
		Replicas: minReplicaAcks(cfg), Timeout: stock.AckWithin(cfg.Stock.ReplicaAckTimeout),
	}).WithWitness(regs.register(cfg), cfg.Stock.WitnessTimeout)
	// Learning the sale checks Redis against the durable orders too, once
	// startOrders binds them (before the listener: before any sale).
	units := &durableUnits{log: log}
	if durable {
		store = store.WithDurableUnits(units)
	}
	store.NoteWitness(surveyWitness(ctx, w, log))
	checkWitness(ctx, log, store)
	// After the eviction check, before the sale: logs what a 200 promises,
	// and refuses a Redis without AOF when stock.require_aof asks.
	durability, err := checkDurability(ctx, cfg, log, stockRDB, store.ReplicaAcks().Replicas)
	if err != nil {
		return err
	}
	checkClusterReplicas(ctx, cfg, log, stockRDB, store.ReplicaAcks().Replicas)
	clocks := checkClocks(ctx, cfg, log, clockCheck(w))
	m.RegisterStock(func(ctx context.Context) (int64, int64, error) {
		st, err := store.Status(ctx)
		return st.Stock, st.Lucky, err
	}, min(cfg.Redis.Timeout, 250*time.Millisecond)) // within a 1s scrape interval
	saleCfg := stock.ServiceConfig{
		Store:          store,
		Locker:         locker,
		Mode:           mode,
		Backend:        info.Name,
		Fencing:        fencing,
		LockKey:        cfg.Lock.Key,
		LockTTL:        lockTTL(cfg),
		ConfirmTimeout: cfg.Stock.ConfirmTimeout,
		Combine:        cfg.Stock.Combine,
		CombineMax:     cfg.Stock.CombineMax,
		WaitTimeout:    cfg.Lock.WaitTimeout,
		Shed:           cfg.Lock.Shed,
		MaxQueue:       cfg.Lock.MaxQueue,
		Delay:          cfg.Work.Delay,
		OnLockWait:     m.ObserveLockWait,
		OnEvent:        func(e stock.Event) { m.CountEvent(string(e)) },
		PerUserLimit:   cfg.Stock.PerUserLimit,
		IdempotencyTTL: cfg.Stock.IdempotencyTTL,
		Replica:        cfg.Replica,
		Logger:         log,
	}
	svc := stock.NewService(saleCfg)
	items := buildItems(cfg, stockRDB, store, regs, saleCfg, ledger, durable, units)
	if err := items.Unsupported(); err != nil {
		log.Info("items are not sold by this configuration: POST /items answers 501", "why", err)
	}
	// Best effort: a sale then runs its script at once; a Redis that is down
	// now shows in /readyz and as 503s, and the scripts load on first use.
	lctx, cancel := context.WithTimeout(ctx, cfg.Redis.Timeout)
	if err := store.LoadScripts(lctx); err != nil {
		log.Warn("could not preload the stock scripts", "err", err)
	} else if items.Unsupported() == nil {
		if err := items.LoadScripts(lctx); err != nil {
			log.Warn("could not preload the items' scripts", "err", err)
		}
	}
	cancel()
	// Nil interfaces when off (not nil pointers in them): the handler and
	// the audit test for nil.
	var ledgerReader stock.OrderReader
	if ledger {
		ledgerReader = store
	}
	var (
		durableOrders handler.DurableOrders
		itemsDurable  func(id string) handler.DurableOrders
		itemLedgers   audit.ItemLedgers
	)
	if durable {
		c, ic, err := startOrders(ctx, w, m, items)
		if err != nil {
			return err
		}
		units.bind(c, ic)
		durableOrders = c
		if ic != nil {
			itemsDurable = func(id string) handler.DurableOrders {
				if c, err := ic.For(id); err == nil {
					return c
				}
				return nil // an id For refuses has no item to read
			}
			itemLedgers = func(ctx context.Context, id string) (audit.Ledger, audit.DurableOrders, error) {
				r, err := items.Orders(ctx, id)
				if err != nil {
					return nil, nil, err
				}
				c, err := ic.For(id)
				if err != nil {
					return nil, nil, err
				}
				return r, c, nil
			}
		}
	}
	stopElection, leader, err := startElection(ctx, w, m.Registry(), ledgerReader, durableOrders, items, itemLedgers)
	if err != nil {
		return err
	}
	// Runs before w.close (deferred earlier): the election borrows w's sessions.
	defer stopElection()

	var pinger lock.Pinger
	if p, ok := locker.(lock.Pinger); ok {
		pinger = p
	}
	h := handler.New(handler.Config{
		Replica:        cfg.Replica,
		Backend:        info.Name,
		Fencing:        fencing,
		Mode:           string(mode),
		Version:        BuildVersion(),
		Release:        Release,
		RunsBeside:     RunsBeside,
		Formats:        apiFormats(),
		AdminToken:     cfg.Admin.Token,
		MaxBodyBytes:   int64(cfg.HTTP.MaxBodyBytes),
		TrustedProxies: cfg.HTTP.TrustedProxies,
		Buyers:         buyers,
		Ledger:         ledger,
		Durable:        durable,
		PerUserLimit:   cfg.Stock.PerUserLimit,
		// The store's, so /info shows what sales do, not what was asked.
		MinReplicaAcks:    store.ReplicaAcks().Replicas,
		ReplicaAckTimeout: store.ReplicaAcks().Timeout.Duration(),
		Sentinel:          cfg.Redis.Sentinel.Master != "",
		Cluster:           onCluster(cfg),
		AllowEviction:     cfg.Stock.AllowEviction,
		RequireAOF:        cfg.Stock.RequireAOF,
	}, handler.Deps{
		Seller: svc, Inventory: store, LockPinger: pinger, Fence: svc, Metrics: m, Logger: log, Leader: leader,
		Orders: ledgerReader, Durable: durableOrders, ItemsDurable: itemsDurable, Policies: policies,
		Durability: &handler.DurabilityCheck{Redis: stockRDB, ReplicaAcks: store.ReplicaAcks().Replicas, Known: durability},
		Witness:    store,
		Items:      items,
		Clocks:     clocks,
		Memory:     stockRDB,
	})

	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTP.Addr, err)
	}
	// Connections beyond the cap wait in the kernel's accept queue rather
	// than costing a descriptor and a goroutine each.
	ln = netutil.LimitListener(ln, cfg.HTTP.MaxConns)
	srv := newHTTPServer(cfg, h, log)

	log.Info("stockd starting", "addr", ln.Addr().String(), "backend", info.Name, "fencing", fencing,
		"election", cfg.Election.Backend, "ledger", ledger, "durable_orders", durable, "per_user_limit", cfg.Stock.PerUserLimit,
		"mode", mode, "work_delay", cfg.Work.Delay.String(), "sentinel", cfg.Redis.Sentinel.Master,
		"min_replica_acks", store.ReplicaAcks().Replicas, "version", BuildVersion(), "release", Release, "runs_beside", RunsBeside)
	if cfg.Auth.AllowWeakSecrets {
		log.Warn("auth.allow_weak_secrets is on: a weak admin.token or auth.jwt_secret is accepted; lab only, never where others can reach this replica",
			"weak", weakSecrets(cfg))
	}
	if cfg.Lab.Unsafe {
		log.Warn("lab.unsafe is on: lab-only backends, unfenced writes and failpoints are permitted; never in production")
	}
	if mode == stock.ModeLocked && !info.Safe {
		log.Warn("LOCK BACKEND IS NOT SAFE ACROSS REPLICAS: with more than one replica this WILL oversell",
			"backend", info.Name)
	}
	if cfg.Stock.Fencing && !fencing && mode == stock.ModeLocked {
		log.Warn("stock.fencing is on but has no effect: the backend's tokens are not trusted", "backend", info.Name)
	}
	if err := store.Ping(ctx); err != nil {
		// Not fatal: Redis may come up after us; /readyz reports it meanwhile.
		log.Warn("stock redis not reachable yet", "addr", cfg.Redis.Addr, "err", err)
	}

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

// buildItems is the items of the stock Redis (docs/items.md), sold as the
// default sale is (saleCfg, its store's replica acks, its ledger and its
// durable copy, its witness's server, a register per item); what they do
// not support (segments, unfenced sales) is refused when one is created
// or sold.
func buildItems(cfg *Config, rdb redis.UniversalClient, store *stock.Store, regs witnessRegisters, saleCfg stock.ServiceConfig, ledger, durable bool, units *durableUnits) *stock.Items {
	ic := stock.ItemsConfig{
		Redis: rdb, Base: saleKeys(cfg, ledger), Acks: store.ReplicaAcks(), Service: saleCfg,
		Witness: regs.items(cfg), WitnessTimeout: cfg.Stock.WitnessTimeout,
		Clock: stock.WindowClock{MaxSkew: cfg.Stock.MaxClockSkew},
	}
	if durable {
		ic.Units = units.item
	}
	return stock.NewItems(ic)
}
