// Package handler is stockd's HTTP API (Gin, JSON everywhere): the sale, the
// inventory, admin reset, health, readiness, info, the election view and
// metrics, and the items (items.go).
package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"seckill/internal/api"
	"seckill/internal/auth"
	"seckill/internal/health"
	"seckill/internal/lock"
	"seckill/internal/metrics"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// Seller makes one sale to a buyer (stock.Buyer{} is an anonymous one with
// no idempotency key); *stock.Service implements it.
type Seller interface {
	ReduceFor(ctx context.Context, b stock.Buyer) (stock.Sale, error)
}

// Inventory reads and resets the stock; *redisstore.Store implements it.
type Inventory interface {
	Status(ctx context.Context) (stock.Status, error)
	Reset(ctx context.Context, n int64) error
	Ping(ctx context.Context) error
	Receipt(ctx context.Context, attempt string) (stockAfter int64, sold bool, err error)
}

// FenceChecker says why the fence refuses every sale, if it does, for
// /readyz; *stock.Service implements it.
type FenceChecker interface {
	FenceProblem() error
}

// Config describes this replica for responses, and guards admin calls.
type Config struct {
	Replica string
	Backend string // lock backend name, for /info
	Fencing bool   // whether fencing is in effect (not merely configured)
	Mode    string // stock mode, for /info
	Version string
	// Release, RunsBeside and Formats are the replica's release, the
	// oldest it shares a sale with, and its stored formats, for /info.
	Release, RunsBeside string
	Formats             []api.Format
	AdminToken          string // required by POST /stock/reset, GET /ledger and cross-buyer reads
	// PaymentSecret, if set, is what a payment provider signs its POST
	// /orders/:id/pay callbacks with (reservations.go); empty: only the
	// order's buyer, or the admin, pays.
	PaymentSecret string
	// Buyers says who a request's buyer is (package auth); nil names none:
	// every sale anonymous, a buyer header or token refused.
	Buyers *auth.Identity
	// ProbeTimeout bounds each dependency check of /readyz; default 1s.
	ProbeTimeout time.Duration
	// DurableTimeout bounds a payment's wait for Deps.Ends (MySQL):
	// a stalled MySQL answers 503 then, not when the client gives up;
	// default 2s.
	DurableTimeout time.Duration
	// TrustedProxies are the addresses or CIDRs whose X-Forwarded-For is
	// believed; empty trusts none (the peer's address is the client's).
	TrustedProxies []string
	// MaxBodyBytes bounds every request body; larger ones get 413 and the
	// connection is closed rather than drained. The default is 64 KiB.
	MaxBodyBytes int64
	// Ledger, Durable and PerUserLimit are stock.ledger, orders.durable and
	// stock.per_user_limit, for /info.
	Ledger       bool
	Durable      bool
	PerUserLimit int
	// MinReplicaAcks, ReplicaAckTimeout and Sentinel are, for /info,
	// stock.min_replica_acks in effect (its -1 default resolved),
	// stock.replica_ack_timeout (shown only with acks on) and whether the
	// stock Redis is reached through Sentinel (redis.sentinel.master), or
	// is a Redis Cluster (redis.cluster.addrs).
	MinReplicaAcks    int
	ReplicaAckTimeout time.Duration
	Sentinel          bool
	Cluster           bool
}

// Deps are the collaborators. LockPinger may be nil (a backend with no
// server to ping, or one that does not implement lock.Pinger).
type Deps struct {
	Seller     Seller
	Inventory  Inventory
	LockPinger lock.Pinger
	// Fence, if set, adds the fence's verdict to /readyz.
	Fence   FenceChecker
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Leader is the election GET /leader reports; nil means there is none
	// (election.backend none).
	Leader LeaderStatus
	// Orders reads the order ledger for GET /orders and GET /ledger; nil
	// means the ledger is off (they answer 404).
	Orders stock.OrderReader
	// Durable, if set, adds the durable copy's count and lag to GET /ledger
	// (orders.durable).
	Durable DurableOrders
	// ItemsDurable, if set, is item id's durable copy, as Durable is the
	// default sale's: for GET /items/:id/ledger and the item's orders
	// trimmed from Redis.
	ItemsDurable func(id string) DurableOrders
	// Health, if set, holds the Redis servers to what the sale assumes
	// of them: /readyz's "redis" (their maxmemory-policy and the stock
	// Redis's persistence), "eviction", "clock" and "memory", and GET
	// /info's "durability".
	Health *health.Checker
	// Witness, if set, adds to /readyz whether the register that keeps
	// the sale's epoch and ceilings answers (when there is one), and to
	// GET /info's durability when a rewound Redis is caught.
	Witness WitnessCheck
	// Items, if set, serves the items' routes (items.go); nil answers
	// them 404.
	Items Items
	// Reservations, if set, ends the default sale's reserved orders
	// (orders.payment_window; reservations.go); nil answers its routes
	// 404.
	Reservations Reservations
	// Pending, if set, reads the default sale's reservations still
	// pending and the earliest deadline: a sold-out answer then says
	// units may come back, and when to ask again.
	Pending func(ctx context.Context) (pending int64, next time.Time, err error)
	// Ends, if set, is MySQL's copy of the reservations' ends (with
	// orders.durable): a payment is answered paid only once it holds it.
	Ends DurableEnds
}

// WitnessCheck is the store's witness (stock.witness; redisstore.Store).
type WitnessCheck interface {
	Witness() string // the register's name, "" without one
	PingWitness(ctx context.Context) error
	Rewind() string
	// AdoptWitness is POST /stock/witness/adopt's (witness.go).
	AdoptWitness(ctx context.Context, by string) (redisstore.WitnessAdoption, error)
	// Reconcile is POST /stock/reconcile's (reconcile.go).
	Reconcile(ctx context.Context, by string, atLeast int64) (redisstore.Reconciliation, error)
}

// server is the API: its config, collaborators and admin bound.
type server struct {
	cfg    Config
	deps   Deps
	admin  adminBound
	logs   *metrics.LogLimiter                    // per-request warnings, at most one per kind per second
	survey health.Reading[redisstore.ItemsSurvey] // the items' halt marks, for /readyz
	rewind string                                 // Deps.Witness's Rewind, fixed at start
}

func init() {
	// Release mode silences gin's own debug route printing on stdout; we log
	// through slog.
	gin.SetMode(gin.ReleaseMode)
}

// New returns the HTTP handler.
func New(cfg Config, deps Deps) http.Handler {
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = time.Second
	}
	if cfg.DurableTimeout <= 0 {
		cfg.DurableTimeout = 2 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 10
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if cfg.Buyers == nil {
		cfg.Buyers = &auth.Identity{Mode: auth.ModeNone}
	}
	a := &server{cfg: cfg, deps: deps, logs: metrics.NewLogLimiter(deps.Metrics, time.Second)}
	a.survey.Every = readingEvery
	if deps.Witness != nil {
		a.rewind = deps.Witness.Rewind()
	}

	r := gin.New()
	// The client address (the logs) comes from X-Forwarded-For
	// only when the peer is a trusted proxy; by default none is, and a
	// client-sent X-Forwarded-For or X-Real-IP is ignored.
	r.RemoteIPHeaders = []string{"X-Forwarded-For"}
	if err := r.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		deps.Logger.Error("bad trusted proxies; trusting none", "proxies", cfg.TrustedProxies, "err", err)
		_ = r.SetTrustedProxies(nil)
	}
	r.HandleMethodNotAllowed = true
	// No redirect on a trailing slash: gin's is an HTML body (GET /stock/
	// answered 301 text/html) or, for a POST, a 307 with no body that has
	// the client send the sale again elsewhere. Every answer here is JSON,
	// so /stock/ is a 404 like any other unknown route.
	r.RedirectTrailingSlash = false
	r.Use(a.replicaHeader, a.requestLog, a.recovery, a.bodyLimit) // log outside recovery: a panic is logged as its 500
	r.NoRoute(func(c *gin.Context) {
		a.problem(c, http.StatusNotFound, "no such route: "+c.Request.URL.Path)
	})
	r.NoMethod(func(c *gin.Context) {
		msg := "method " + c.Request.Method + " not allowed on " + c.Request.URL.Path
		if strings.HasSuffix(c.Request.URL.Path, "/reduce") {
			msg += "; a sale is POST " + c.Request.URL.Path + " (no body needed)"
		}
		a.problem(c, http.StatusMethodNotAllowed, msg)
	})

	// POST only: a GET that buys would let any page's <img src>, a link
	// prefetcher or a crawler spend a visitor's request on a sale. The
	// body is ignored, so an empty POST with any or no Content-Type (what
	// hey, ab, wrk and JMeter send) sells; GET gets 405 from NoMethod. A
	// body over maxSaleBody is refused before the sale (bodyLimit).
	r.POST("/stock/reduce", a.reduce)
	r.GET("/stock", a.status)
	r.GET("/stock/receipts/:attempt", a.receipt)
	r.POST("/stock/reset", a.reset)
	r.POST("/stock/witness/adopt", a.adoptWitness)
	r.POST("/stock/reconcile", a.reconcile)
	r.GET("/stock/reservations", a.census)
	r.GET("/healthz", a.healthz)
	r.GET("/readyz", a.readyz)
	r.GET("/info", a.info)
	r.GET("/leader", a.leader)
	r.GET("/orders", a.orders)
	r.GET("/orders/:id", a.order)
	r.POST("/orders/:id/pay", a.pay)
	r.POST("/orders/:id/cancel", a.cancel)
	r.GET("/ledger", a.ledger)
	r.GET("/items", a.items)
	r.POST("/items", a.createItem)
	r.GET("/items/:id", a.item)
	r.POST("/items/:id/reset", a.resetItem)
	r.DELETE("/items/:id", a.archiveItem)
	r.POST("/items/:id/unlatch", a.unlatchItem)
	r.POST("/items/:id/reduce", a.reduceItem) // POST only, as /stock/reduce
	r.GET("/items/:id/receipts/:attempt", a.itemReceipt)
	r.GET("/items/:id/orders", a.itemOrdersByUser)
	r.GET("/items/:id/orders/:order", a.itemOrder)
	r.GET("/items/:id/ledger", a.itemLedger)
	if deps.Metrics != nil {
		r.GET("/metrics", gin.WrapH(deps.Metrics.Handler()))
	}
	return r
}

// answer is a body of package api; every one names the replica.
type answer interface{ SetReplica(name string) }

// json writes b with the replica name added; every response carries it.
func (a *server) json(c *gin.Context, status int, b answer) {
	b.SetReplica(a.cfg.Replica)
	c.JSON(status, b)
}

// problem answers a failed non-sale request with msg.
func (a *server) problem(c *gin.Context, status int, msg string) {
	a.json(c, status, &api.Problem{Error: msg})
}

// saleOn is what a sale's routes act on: the default sale's (/stock/*)
// or item :id's (/items/:id/*). Both are answered by the same code (sell,
// readReceipt); only where the sale is found differs.
type saleOn struct {
	reduce  func(ctx context.Context, b stock.Buyer) (stock.Sale, error)
	receipt func(ctx context.Context, attempt string) (stockAfter int64, sold bool, err error)
	// receipts is where the sale's receipts are read, named in an
	// unconfirmed answer ("": publicError's text, the default sale's).
	receipts string
	fail     func(c *gin.Context, err error)
	// pending is Deps.Pending for the default sale; nil for an item.
	pending func(ctx context.Context) (int64, time.Time, error)
}

// defaultSale is the routes of the default sale. Its calls are closures,
// not method values: a method value of a nil Seller or Inventory (a
// handler built without one) would panic where the route is resolved.
func (a *server) defaultSale() saleOn {
	return saleOn{
		reduce: func(ctx context.Context, b stock.Buyer) (stock.Sale, error) { return a.deps.Seller.ReduceFor(ctx, b) },
		receipt: func(ctx context.Context, attempt string) (int64, bool, error) {
			return a.deps.Inventory.Receipt(ctx, attempt)
		},
		fail:    a.fail,
		pending: a.deps.Pending,
	}
}

func (a *server) reduce(c *gin.Context) { a.sell(c, a.defaultSale()) }

// retryAtDeadline is a sold-out answer's Retry-After while reservations
// are pending: the seconds until the earliest deadline, at least 1 (a
// deadline passed or unknown: the expirer returns within a second).
func retryAtDeadline(next time.Time) int {
	return max(1, int(math.Ceil(next.Sub(now()).Seconds())))
}

// sell answers a sale made on route s: POST /stock/reduce's, or an item's.
func (a *server) sell(c *gin.Context, s saleOn) {
	start := time.Now()
	b, status, msg := a.buyer(c)
	if msg != "" {
		a.problem(c, status, msg)
		return
	}
	sale, err := s.reduce(c.Request.Context(), b)
	if status, ok := itemProblem(err); ok {
		// No item to sell (unknown, a bad id, or items unsupported here):
		// nothing was sold, and it is no sale result.
		a.problem(c, status, err.Error())
		return
	}
	if errors.Is(err, stock.ErrNoLedger) {
		// A buyer or key the service cannot honour is refused, not
		// ignored: a retry with an ignored key would sell twice. Nothing
		// was sold, and it is no sale result.
		a.problem(c, http.StatusBadRequest, "X-User and Idempotency-Key need the order ledger, which is off here (stock.ledger: false); send neither")
		return
	}
	if errors.Is(err, stock.ErrBadBuyer) {
		// buyer() applies the same rule, so this is a drift between the
		// two: still the request's fault, and nothing was sold.
		a.problem(c, http.StatusBadRequest, "bad X-User or Idempotency-Key: want printable ASCII without spaces, at most 64 and 255 characters")
		return
	}
	status, result := classify(err)
	if m := a.deps.Metrics; m != nil {
		m.Results.WithLabelValues(string(result)).Inc()
		m.SaleDuration.Observe(time.Since(start).Seconds())
	}
	body := &api.Sale{Result: result}
	var ue *stock.UnconfirmedError
	if err == nil {
		body.Stock, body.Token, body.Attempt = &sale.StockAfter, &sale.Token, sale.Attempt
		body.Order, body.Replayed = sale.OrderID, sale.Replayed
		if sale.PayBy > 0 {
			body.PayBy = &sale.PayBy
		}
		if sale.Replayed {
			c.Header(HeaderReplayed, "true")
		}
	} else {
		body.Error = publicError(status, result, err)
	}
	if errors.As(err, &ue) {
		body.Attempt = ue.Attempt
		if s.receipts != "" {
			body.Error = "sale outcome unconfirmed; ask GET " + s.receipts + "<attempt>"
		}
	}
	var we *stock.WindowError
	if result == api.NotStarted && errors.As(err, &we) {
		body.StartsAt = &we.StartsAt
	}
	if result == api.Busy {
		c.Header("Retry-After", strconv.Itoa(stock.RetryAfterSeconds(err)))
	}
	if result == api.SoldOut && s.pending != nil {
		// Reserved units may come back: how many, and when the first
		// deadline passes (docs/reservations.md), read now, since a
		// sold out that hides them would send a buyer away for good. Not
		// read (Redis down): the plain sold out.
		if n, next, err := s.pending(c.Request.Context()); err == nil && n > 0 {
			body.Pending = &n
			c.Header("Retry-After", strconv.Itoa(retryAtDeadline(next)))
		}
	}
	// One WARN per result kind per second: under load every busy or
	// failed sale would otherwise log (the counts are in the metrics).
	if status >= http.StatusInternalServerError || result == api.Fenced || result == api.MixedBackends {
		if ok, suppressed := a.logs.Allow("reduce_" + string(result)); ok {
			level := slog.LevelWarn
			if result == api.StoreLost {
				level = slog.LevelError // data loss, not a blip: an operator must act
			}
			a.deps.Logger.Log(c.Request.Context(), level, "reduce failed", "result", result, "status", status, "err", err, "suppressed", suppressed)
		}
	}
	a.json(c, status, body)
}

func (a *server) status(c *gin.Context) {
	// A segmented stock (stock.segments > 1) also lists its segments, read
	// at the same instant as the sum, so a verifier can see one go negative.
	if seg, ok := a.deps.Inventory.(segmentedInventory); ok {
		st, segs, err := seg.StatusBySegment(c.Request.Context())
		if err != nil {
			a.statusFailed(c, err)
			return
		}
		body := &api.Stock{Stock: st.Stock, Lucky: st.Lucky, Returned: st.Returned}
		if len(segs) > 1 {
			body.Segments = segs
		}
		a.json(c, http.StatusOK, body)
		return
	}
	st, err := a.deps.Inventory.Status(c.Request.Context())
	if err != nil {
		a.statusFailed(c, err)
		return
	}
	a.json(c, http.StatusOK, &api.Stock{Stock: st.Stock, Lucky: st.Lucky, Returned: st.Returned})
}

// statusFailed answers a GET /stock that could not read the stock. A sale
// lost (or never reset) answers as a sale does, 503 store_lost: read as
// {"stock":0}, it would tell a reader "sold out" while every sale refuses.
func (a *server) statusFailed(c *gin.Context, err error) {
	if status, result := classify(err); result == api.StoreLost {
		a.json(c, status, &api.Sale{Result: result, Error: publicError(status, result, err)})
		return
	}
	a.fail(c, err)
}

// counterChecker is an Inventory that can tell whether its counters hold
// integers, for /readyz; *redisstore.Store is one.
type counterChecker interface {
	CheckCounters(ctx context.Context) error
}

// haltChecker is an Inventory that can tell whether its sale is halted
// (the stock Redis went back in time), for /readyz; *redisstore.Store is one.
type haltChecker interface {
	Halted(ctx context.Context) (string, error)
}

// segmentedInventory is an Inventory that can also report each segment;
// *redisstore.Store is one.
type segmentedInventory interface {
	StatusBySegment(ctx context.Context) (stock.Status, []int64, error)
}

// receipt settles a sale answered "unconfirmed": its attempt's receipt says
// whether the write took effect. Receipts live redisstore.ReceiptTTL.
func (a *server) receipt(c *gin.Context) { a.readReceipt(c, a.defaultSale()) }

// readReceipt answers GET .../receipts/:attempt on route s.
func (a *server) readReceipt(c *gin.Context, s saleOn) {
	id := c.Param("attempt")
	if len(id) > 64 {
		a.problem(c, http.StatusBadRequest, "attempt id too long")
		return
	}
	after, sold, err := s.receipt(c.Request.Context(), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	body := &api.Receipt{Attempt: id, Sold: sold}
	if sold {
		body.Stock = &after
	}
	a.json(c, http.StatusOK, body)
}

// adminBody reads the JSON body of an admin write (a reset, an item),
// what names it in the 413: refused with 415 for a content type or
// encoding other than JSON's, 413 past maxResetBody, 408 or 400 when it
// cannot be read (unreadBody); ok is false when it has answered.
func (a *server) adminBody(c *gin.Context, what string) (body []byte, ok bool) {
	if msg := resetContentProblem(c.Request.Header); msg != "" {
		a.refuseBody(c, http.StatusUnsupportedMediaType, msg)
		return nil, false
	}
	// One byte over the limit is enough to know it is too large.
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, maxResetBody+1))
	if err != nil {
		a.unreadBody(c, err)
		return nil, false
	}
	if len(body) > maxResetBody {
		a.refuseBody(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("%s body larger than %d bytes", what, maxResetBody))
		return nil, false
	}
	return body, true
}

func (a *server) reset(c *gin.Context) {
	if !a.admit(c) {
		return
	}
	body, ok := a.adminBody(c, "reset")
	if !ok {
		return
	}
	n, err := parseReset(body)
	if err != nil {
		a.problem(c, http.StatusBadRequest, err.Error())
		return
	}
	if err := a.deps.Inventory.Reset(c.Request.Context(), n); err != nil {
		if errors.Is(err, redisstore.ErrNotReplicated) {
			// Not "unavailable": the primary holds the new sale, but a
			// failover now could bring the old one back; the admin should
			// know to reset again (it writes the same values).
			a.deps.Logger.Warn("stock reset not acknowledged by the replicas", "stock", n, "err", err)
			a.problem(c, http.StatusServiceUnavailable,
				"reset not acknowledged by enough replicas in time (stock.min_replica_acks); a failover could bring back the old sale: reset again")
			return
		}
		a.fail(c, err)
		return
	}
	a.deps.Logger.Info("stock reset", "stock", n, "remote", c.ClientIP())
	a.json(c, http.StatusOK, &api.Stock{Stock: n})
}

// fail answers a non-sale request that hit a dependency error: a generic
// text for the client, the detail in the (rate-limited) log.
func (a *server) fail(c *gin.Context, err error) {
	status, result := classify(err)
	msg := publicError(status, result, err)
	if status < http.StatusInternalServerError || msg == "" {
		msg = "request failed"
	}
	if ok, suppressed := a.logs.Allow("request_failed"); ok {
		a.deps.Logger.Warn("request failed", "path", c.Request.URL.Path, "status", status, "err", err, "suppressed", suppressed)
	}
	a.problem(c, status, msg)
}

func (a *server) healthz(c *gin.Context) {
	a.json(c, http.StatusOK, &api.Health{Status: api.OK})
}

// readyz checks both dependencies, each with its own bound, so one slow
// server does not hide the state of the other.
func (a *server) readyz(c *gin.Context) {
	ctx := c.Request.Context()
	check := func(p func(context.Context) error) string {
		pctx, cancel := context.WithTimeout(ctx, a.cfg.ProbeTimeout)
		defer cancel()
		if err := p(pctx); err != nil {
			return err.Error()
		}
		return api.OK
	}
	redisState := check(a.deps.Inventory.Ping)
	eviction := ""
	if redisState == api.OK && a.deps.Health != nil {
		redisState, eviction = a.deps.Health.Redis(ctx)
	}
	lockState := api.OK
	if a.deps.LockPinger != nil {
		lockState = check(a.deps.LockPinger.Ping)
	}
	fenceState := api.OK
	if a.deps.Fence != nil {
		if err := a.deps.Fence.FenceProblem(); err != nil {
			fenceState = err.Error()
		}
	}
	// A stock key holding a non-integer fails every sale with a 500 until
	// an operator resets it, and a sale of a newer format every sale with
	// a 503 until this replica is upgraded: say so here, where probes and
	// people look.
	stockState := ""
	if cc, ok := a.deps.Inventory.(counterChecker); ok {
		stockState = check(cc.CheckCounters)
	}
	// A halted sale (the stock Redis went back in time) refuses every
	// sale on every replica until an operator reconciles: unready.
	if hc, ok := a.deps.Inventory.(haltChecker); ok && (stockState == "" || stockState == api.OK) {
		stockState = check(func(ctx context.Context) error {
			why, err := hc.Halted(ctx)
			if err == nil && why != "" {
				err = fmt.Errorf("%s: %s", api.StoreRewound, why)
			}
			return err
		})
	}
	witnessState := ""
	if w := a.deps.Witness; w != nil && w.Witness() != "" {
		witnessState = check(w.PingWitness)
	}
	// After the checks that can make it unready: a warning, never a 503.
	items, clock, memory := "", "", ""
	if redisState == api.OK {
		// The items first: memory counts their stock.
		items, clock, memory = a.haltedItems(ctx), a.clock(ctx), a.memory(ctx)
	}
	status := http.StatusOK
	if redisState != api.OK || lockState != api.OK || fenceState != api.OK ||
		(stockState != "" && stockState != api.OK) || (witnessState != "" && witnessState != api.OK) {
		status = http.StatusServiceUnavailable
	}
	a.json(c, status, &api.Ready{Redis: redisState, Lock: lockState, Fence: fenceState, Stock: stockState,
		Eviction: eviction, Witness: witnessState, Items: items, Clock: clock, Memory: memory})
}

func (a *server) info(c *gin.Context) {
	var ackTimeout time.Duration // meaningless with the wait off
	if a.cfg.MinReplicaAcks > 0 {
		ackTimeout = a.cfg.ReplicaAckTimeout
	}
	a.json(c, http.StatusOK, &api.Info{
		Backend: a.cfg.Backend, Fencing: a.cfg.Fencing, Mode: a.cfg.Mode, Version: a.cfg.Version,
		Ledger: a.cfg.Ledger, Durable: a.cfg.Durable, PerUserLimit: a.cfg.PerUserLimit,
		MinReplicaAcks: a.cfg.MinReplicaAcks, ReplicaAckTimeoutMS: ackTimeout.Milliseconds(),
		Sentinel: a.cfg.Sentinel, Cluster: a.cfg.Cluster, Durability: a.durability(),
		Release: a.cfg.Release, RunsBeside: a.cfg.RunsBeside, Formats: a.cfg.Formats,
	})
}
