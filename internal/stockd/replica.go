package stockd

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"seckill/internal/auth"
	"seckill/internal/election/audit"
	"seckill/internal/handler"
	"seckill/internal/health"
	"seckill/internal/lock"
	"seckill/internal/metrics"
	"seckill/internal/orders"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// replica.go: Serve's steps, in the order it takes them, and what they
// build and hand to each other.

// replica is what Serve builds, step by step: each step reads what the
// ones before it set.
type replica struct {
	w        *wiring
	cfg      *Config
	log      *slog.Logger
	stockRDB redis.UniversalClient

	// lock
	mode                     stock.Mode
	locker                   lock.Locker
	info                     lock.Info
	fencing, ledger, durable bool

	// checkRedis
	m      *metrics.Metrics
	health *health.Checker

	// buildStore
	sales redisstore.ItemsConfig // every sale's store, the default's ("")
	store *redisstore.Store
	units *durableUnits

	// buildSale
	svc   *stock.Service
	items *redisstore.Items

	// startOrders: nil interfaces when off (not nil pointers in them):
	// the handler and the audit test for nil.
	ledgerReader  stock.OrderReader
	durableOrders handler.DurableOrders
	itemsDurable  func(id string) handler.DurableOrders
	// ends, with reservations and durable orders, is where a payment is
	// stored before its answer.
	ends        handler.DurableEnds
	itemLedgers audit.ItemLedgers
}

// lock builds the lock (locked mode) and decides what sales are:
// fenced, with a ledger, with its durable copy.
func (r *replica) lock(ctx context.Context) (err error) {
	cfg, log := r.cfg, r.log
	r.mode = stock.Mode(cfg.Stock.Mode)
	r.info = lock.Info{Name: cfg.Lock.Backend}
	if r.mode == stock.ModeLocked {
		if r.locker, r.info, err = buildLocker(ctx, r.w); err != nil {
			return err
		}
	}
	// Fencing needs tokens that are comparable across replicas; none and
	// local do not vouch for theirs (Safe == false), and the atomic mode has
	// no lock to fence.
	r.fencing = cfg.Stock.Fencing && r.info.Safe && r.mode == stock.ModeLocked

	// The ledger is written by the fenced write and the atomic sale; an
	// unfenced sale (the lab's control) has no ledger form, so the ledger
	// is off there rather than an /info that promises orders never written.
	r.ledger = cfg.Stock.Ledger && (r.fencing || r.mode == stock.ModeAtomic)
	if cfg.Stock.Ledger && !r.ledger {
		log.Warn("stock.ledger is on but sales are unfenced: no order ledger (X-User and Idempotency-Key answer 400)")
	}
	r.durable = cfg.Orders.Durable && r.ledger
	return nil
}

// checkRedis starts the metrics and refuses a Redis that may evict keys:
// before the sale, the election or the listener start, since it loses
// sales it acknowledged.
func (r *replica) checkRedis(ctx context.Context) error {
	cfg, log := r.cfg, r.log
	r.m = metrics.New(prometheus.Labels{"replica": cfg.Replica, "backend": r.info.Name})
	redis.SetLogger(redisLogger{log: log, lim: metrics.NewLogLimiter(r.m, 0)})
	r.health = healthChecker(r.w, r.mode, log, r.m)
	return r.health.CheckPolicies(ctx)
}

// buildStore builds the sale's store with its replica acks, witness and
// durable units, and checks at start what it rests on: the witness, the
// durability a 200 promises, the cluster's replicas, the clocks.
func (r *replica) buildStore(ctx context.Context) (err error) {
	cfg, log := r.cfg, r.log
	regs, err := buildWitness(ctx, r.w)
	if err != nil {
		return err
	}
	// Learning a sale checks Redis against the durable orders too, once
	// startOrders binds them (before the listener: before any sale).
	r.units = &durableUnits{log: log}
	r.sales = salesConfig(cfg, r.stockRDB, regs, r.ledger, r.durable, r.units)
	r.store = r.sales.Store("")
	r.store.NoteWitness(surveyWitness(ctx, r.w, log))
	checkWitness(ctx, log, r.store)
	// After the eviction check, before the sale: logs what a 200 promises
	// (refusing a Redis without AOF when stock.require_aof asks), the
	// cluster's replicas and the clocks.
	if err := r.health.CheckServer(ctx); err != nil {
		return err
	}
	store := r.store
	r.m.RegisterStock(func(ctx context.Context) (int64, int64, error) {
		st, err := store.Status(ctx)
		return st.Stock, st.Lucky, err
	}, min(cfg.Redis.Timeout, 250*time.Millisecond)) // within a 1s scrape interval
	return nil
}

// buildSale builds the default sale's service and the items, and preloads
// their scripts.
func (r *replica) buildSale(ctx context.Context) {
	cfg, log, m := r.cfg, r.log, r.m
	if cfg.Stock.Combine && combineMax(cfg) < cfg.Stock.CombineMax {
		log.Info("combined batches capped by http.write_timeout: each buyer's work.delay must fit it",
			"stock.combine_max", cfg.Stock.CombineMax, "batch_max", combineMax(cfg), "work.delay", cfg.Work.Delay.String())
	}
	r.sales.Service = stock.ServiceConfig{
		Locker:         r.locker,
		Mode:           r.mode,
		Backend:        r.info.Name,
		Fencing:        r.fencing,
		LockKey:        cfg.Lock.Key,
		LockTTL:        lockTTL(cfg),
		ConfirmTimeout: cfg.Stock.ConfirmTimeout,
		Combine:        cfg.Stock.Combine,
		CombineMax:     combineMax(cfg),
		WaitTimeout:    cfg.Lock.WaitTimeout,
		Shed:           cfg.Lock.Shed,
		MaxQueue:       cfg.Lock.MaxQueue,
		Delay:          cfg.Work.Delay,
		OnLockWait:     m.ObserveLockWait,
		OnBatch:        m.ObserveBatch,
		OnEvent:        func(e stock.Event) { m.CountEvent(string(e)) },
		PerUserLimit:   cfg.Stock.PerUserLimit,
		IdempotencyTTL: cfg.Stock.IdempotencyTTL,
		PaymentWindow:  cfg.Orders.PaymentWindow,
		Replica:        cfg.Replica,
		Logger:         log,
	}
	r.svc = stock.NewService(r.sales.ServiceFor("", r.store))
	r.items = redisstore.NewItems(r.sales)
	if err := r.items.Unsupported(); err != nil {
		log.Info("items are not sold by this configuration: POST /items answers 501", "why", err)
	} else {
		registerItemGauges(m, r.items, min(cfg.Redis.Timeout, 250*time.Millisecond))
	}
	// Best effort: a sale then runs its script at once; a Redis that is down
	// now shows in /readyz and as 503s, and the scripts load on first use.
	lctx, cancel := context.WithTimeout(ctx, cfg.Redis.Timeout)
	defer cancel()
	if err := r.store.LoadScripts(lctx); err != nil {
		log.Warn("could not preload the stock scripts", "err", err)
	} else if r.items.Unsupported() == nil {
		if err := r.items.LoadScripts(lctx); err != nil {
			log.Warn("could not preload the items' scripts", "err", err)
		}
	}
}

// startOrders makes the ledger readable and, with orders.durable, starts
// its consumers and binds them to the store and the items.
func (r *replica) startOrders(ctx context.Context) error {
	if r.ledger {
		r.ledgerReader = r.store
	}
	if !r.durable {
		return nil
	}
	var ended orders.EndSource
	if r.reserving() {
		ended = r.store
	}
	c, ic, ends, err := startOrders(ctx, r.w, r.m, r.items, ended)
	if err != nil {
		return err
	}
	r.units.bind(c, ic)
	r.durableOrders = c
	if ends != nil {
		r.ends = ends
	}
	if ic == nil {
		return nil
	}
	items := r.items
	r.itemsDurable = func(id string) handler.DurableOrders {
		if c, err := ic.For(id); err == nil {
			return c
		}
		return nil // an id For refuses has no item to read
	}
	r.itemLedgers = func(ctx context.Context, id string) (audit.Ledger, audit.DurableOrders, error) {
		o, err := items.Orders(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		c, err := ic.For(id)
		if err != nil {
			return nil, nil, err
		}
		return o, c, nil
	}
	return nil
}

// handler is the HTTP API over what the steps built.
func (r *replica) handler(buyers *auth.Identity, leader handler.LeaderStatus) http.Handler {
	cfg := r.cfg
	var pinger lock.Pinger
	if p, ok := r.locker.(lock.Pinger); ok {
		pinger = p
	}
	var reservations handler.Reservations
	var pending func(context.Context) (int64, time.Time, error)
	if r.reserving() {
		store := r.store
		reservations = store
		pending = func(ctx context.Context) (int64, time.Time, error) {
			n, next, err := store.Pending(ctx)
			return n, time.UnixMilli(next), err
		}
	}
	return handler.New(handler.Config{
		Replica:        cfg.Replica,
		Backend:        r.info.Name,
		Fencing:        r.fencing,
		Mode:           string(r.mode),
		Version:        BuildVersion(),
		Release:        Release,
		RunsBeside:     RunsBeside,
		Formats:        apiFormats(),
		AdminToken:     cfg.Admin.Token,
		PaymentSecret:  cfg.Orders.PaymentSecret,
		DurableTimeout: cfg.Orders.DurableTimeout,
		MaxBodyBytes:   int64(cfg.HTTP.MaxBodyBytes),
		TrustedProxies: cfg.HTTP.TrustedProxies,
		Buyers:         buyers,
		Ledger:         r.ledger,
		Durable:        r.durable,
		PerUserLimit:   cfg.Stock.PerUserLimit,
		// The store's, so /info shows what sales do, not what was asked.
		MinReplicaAcks:    r.store.ReplicaAcks().Replicas,
		ReplicaAckTimeout: r.store.ReplicaAcks().Timeout.Duration(),
		Sentinel:          cfg.Redis.Sentinel.Master != "",
		Cluster:           onCluster(cfg),
	}, handler.Deps{
		Seller: r.svc, Inventory: r.store, LockPinger: pinger, Fence: r.svc, Metrics: r.m, Logger: r.log, Leader: leader,
		Orders: r.ledgerReader, Durable: r.durableOrders, ItemsDurable: r.itemsDurable,
		Health:       r.health,
		Witness:      r.store,
		Items:        r.items,
		Reservations: reservations,
		Pending:      pending,
		Ends:         r.ends,
	})
}

// logStart says what this replica is and warns of what it should not be
// (a lab setting, an unsafe lock, fencing without effect), and whether
// its Redis answers yet.
func (r *replica) logStart(ctx context.Context, addr string) {
	cfg, log, mode := r.cfg, r.log, r.mode
	log.Info("stockd starting", "addr", addr, "backend", r.info.Name, "fencing", r.fencing,
		"election", cfg.Election.Backend, "ledger", r.ledger, "durable_orders", r.durable, "per_user_limit", cfg.Stock.PerUserLimit,
		"mode", mode, "work_delay", cfg.Work.Delay.String(), "sentinel", cfg.Redis.Sentinel.Master,
		"min_replica_acks", r.store.ReplicaAcks().Replicas, "version", BuildVersion(), "release", Release, "runs_beside", RunsBeside)
	if cfg.Auth.AllowWeakSecrets {
		log.Warn("auth.allow_weak_secrets is on: a weak admin.token or auth.jwt_secret is accepted; lab only, never where others can reach this replica",
			"weak", weakSecrets(cfg))
	}
	if cfg.Lab.Unsafe {
		log.Warn("lab.unsafe is on: lab-only backends, unfenced writes and failpoints are permitted; never in production")
	}
	if mode == stock.ModeLocked && !r.info.Safe {
		log.Warn("LOCK BACKEND IS NOT SAFE ACROSS REPLICAS: with more than one replica this WILL oversell",
			"backend", r.info.Name)
	}
	if cfg.Stock.Fencing && !r.fencing && mode == stock.ModeLocked {
		log.Warn("stock.fencing is on but has no effect: the backend's tokens are not trusted", "backend", r.info.Name)
	}
	if err := r.store.Ping(ctx); err != nil {
		// Not fatal: Redis may come up after us; /readyz reports it meanwhile.
		log.Warn("stock redis not reachable yet", "addr", cfg.Redis.Addr, "err", err)
	}
}
