// Package handler is stockd's HTTP API (Gin, JSON everywhere): the sale, the
// inventory, admin reset, health, readiness, info and metrics.
package handler

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"seckill/internal/lock"
	"seckill/internal/metrics"
	"seckill/internal/stock"
)

// Seller makes one sale; *stock.Service implements it.
type Seller interface {
	Reduce(ctx context.Context) (stock.Sale, error)
}

// Inventory reads and resets the stock; *stock.Store implements it.
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
	Replica    string
	Backend    string // lock backend name, for /info
	Fencing    bool   // whether fencing is in effect (not merely configured)
	Mode       string // stock mode, for /info
	Version    string
	AdminToken string // required by POST /stock/reset
	// ProbeTimeout bounds each dependency check of /readyz; default 1s.
	ProbeTimeout time.Duration
	// TrustedProxies are the addresses or CIDRs whose X-Forwarded-For is
	// believed; empty trusts none (the peer's address is the client's).
	TrustedProxies []string
	// MaxBodyBytes bounds every request body; larger ones get 413 and the
	// connection is closed rather than drained. The default is 64 KiB.
	MaxBodyBytes int64
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
	// Leader, if set, serves GET /leader (the election's view).
	Leader gin.HandlerFunc
}

type api struct {
	cfg   Config
	deps  Deps
	admin adminGuard
	logs  *metrics.LogLimiter // per-request warnings, at most one per kind per second
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
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 10
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	a := &api{cfg: cfg, deps: deps, logs: metrics.NewLogLimiter(deps.Metrics, time.Second)}

	r := gin.New()
	// The client address (logs, admin back-off) comes from X-Forwarded-For
	// only when the peer is a trusted proxy; by default none is, and a
	// client-sent X-Forwarded-For or X-Real-IP is ignored.
	r.RemoteIPHeaders = []string{"X-Forwarded-For"}
	if err := r.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		deps.Logger.Error("bad trusted proxies; trusting none", "proxies", cfg.TrustedProxies, "err", err)
		_ = r.SetTrustedProxies(nil)
	}
	r.HandleMethodNotAllowed = true
	r.Use(a.replicaHeader, a.requestLog, a.recovery, a.bodyLimit) // log outside recovery: a panic is logged as its 500
	r.NoRoute(func(c *gin.Context) {
		a.json(c, http.StatusNotFound, gin.H{"error": "no such route: " + c.Request.URL.Path})
	})
	r.NoMethod(func(c *gin.Context) {
		msg := "method " + c.Request.Method + " not allowed on " + c.Request.URL.Path
		if c.Request.URL.Path == "/stock/reduce" {
			msg += "; a sale is POST /stock/reduce (no body needed)"
		}
		a.json(c, http.StatusMethodNotAllowed, gin.H{"error": msg})
	})

	// POST only: a GET that buys would let any page's <img src>, a link
	// prefetcher or a crawler spend a visitor's request on a sale. The
	// body is ignored, so an empty POST with any or no Content-Type (what
	// hey, ab, wrk and JMeter send) sells; GET gets 405 from NoMethod.
	r.POST("/stock/reduce", a.reduce)
	r.GET("/stock", a.status)
	r.GET("/stock/receipts/:attempt", a.receipt)
	r.POST("/stock/reset", a.reset)
	r.GET("/healthz", a.healthz)
	r.GET("/readyz", a.readyz)
	r.GET("/info", a.info)
	if deps.Leader != nil {
		r.GET("/leader", deps.Leader)
	}
	if deps.Metrics != nil {
		r.GET("/metrics", gin.WrapH(deps.Metrics.Handler()))
	}
	return r
}

// json writes body with the replica name added; every response carries it.
func (a *api) json(c *gin.Context, status int, body gin.H) {
	body["replica"] = a.cfg.Replica
	c.JSON(status, body)
}

func (a *api) reduce(c *gin.Context) {
	start := time.Now()
	sale, err := a.deps.Seller.Reduce(c.Request.Context())
	status, result := classify(err)
	if m := a.deps.Metrics; m != nil {
		m.Results.WithLabelValues(result).Inc()
		m.SaleDuration.Observe(time.Since(start).Seconds())
	}
	body := gin.H{"result": result}
	var ue *stock.UnconfirmedError
	if err == nil {
		body["stock"] = sale.StockAfter
		body["token"] = sale.Token
		body["attempt"] = sale.Attempt
	} else if msg := publicError(status, result); msg != "" {
		body["error"] = msg
	}
	if errors.As(err, &ue) {
		body["attempt"] = ue.Attempt
	}
	// One WARN per result kind per second: under load every busy or
	// failed sale would otherwise log (the counts are in the metrics).
	if status >= http.StatusInternalServerError || result == ResultFenced || result == ResultMixedBackends {
		if ok, suppressed := a.logs.Allow("reduce_" + result); ok {
			a.deps.Logger.Warn("reduce failed", "result", result, "status", status, "err", err, "suppressed", suppressed)
		}
	}
	a.json(c, status, body)
}

func (a *api) status(c *gin.Context) {
	st, err := a.deps.Inventory.Status(c.Request.Context())
	if err != nil {
		a.fail(c, err)
		return
	}
	a.json(c, http.StatusOK, gin.H{"stock": st.Stock, "lucky": st.Lucky})
}

// receipt settles a sale answered "unconfirmed": its attempt's receipt says
// whether the write took effect. Receipts live stock.ReceiptTTL.
func (a *api) receipt(c *gin.Context) {
	id := c.Param("attempt")
	if len(id) > 64 {
		a.json(c, http.StatusBadRequest, gin.H{"error": "attempt id too long"})
		return
	}
	after, sold, err := a.deps.Inventory.Receipt(c.Request.Context(), id)
	if err != nil {
		a.fail(c, err)
		return
	}
	body := gin.H{"attempt": id, "sold": sold}
	if sold {
		body["stock"] = after
	}
	a.json(c, http.StatusOK, body)
}

func (a *api) reset(c *gin.Context) {
	if !a.admit(c) {
		return
	}
	// One byte over the limit is enough for parseReset to refuse it.
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, maxResetBody+1))
	if err != nil {
		a.json(c, http.StatusBadRequest, gin.H{"error": "reading body: " + err.Error()})
		return
	}
	n, err := parseReset(body)
	if err != nil {
		a.json(c, http.StatusBadRequest, gin.H{"error": err.Error()})
		return
	}
	if err := a.deps.Inventory.Reset(c.Request.Context(), n); err != nil {
		a.fail(c, err)
		return
	}
	a.deps.Logger.Info("stock reset", "stock", n, "remote", c.ClientIP())
	a.json(c, http.StatusOK, gin.H{"stock": n, "lucky": 0})
}

// admit checks the admin token, with a back-off per source address after
// repeated failures; it answers the refusals itself. Refused bodies are not
// drained: a refused caller cannot hold the connection by trickling one.
func (a *api) admit(c *gin.Context) bool {
	ip := c.ClientIP()
	if wait := a.admin.blocked(ip); wait > 0 {
		a.countAdminFailure()
		c.Header("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		a.refuseBody(c, http.StatusTooManyRequests, gin.H{"error": "too many failed admin attempts; retry later"})
		return false
	}
	if !a.authorized(c.Request) {
		a.countAdminFailure()
		fails := a.admin.failed(ip)
		if ok, suppressed := a.logs.Allow("admin_auth"); ok {
			a.deps.Logger.Warn("admin call refused: missing or bad token", "path", c.Request.URL.Path,
				"remote", ip, "failures", fails, "suppressed", suppressed)
		}
		a.refuseBody(c, http.StatusUnauthorized, gin.H{"error": "missing or bad admin token (X-Admin-Token or Authorization: Bearer)"})
		return false
	}
	a.admin.succeeded(ip)
	return true
}

func (a *api) countAdminFailure() {
	if m := a.deps.Metrics; m != nil {
		m.AdminAuthFailures.Inc()
	}
}

// authorized compares in constant time so the token cannot be guessed byte
// by byte from response timings.
func (a *api) authorized(r *http.Request) bool {
	got := r.Header.Get("X-Admin-Token")
	if got == "" {
		if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			got = strings.TrimSpace(v)
		}
	}
	if got == "" || a.cfg.AdminToken == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(a.cfg.AdminToken)) == 1
}

// fail answers a non-sale request that hit a dependency error: a generic
// text for the client, the detail in the (rate-limited) log.
func (a *api) fail(c *gin.Context, err error) {
	status, result := classify(err)
	msg := publicError(status, result)
	if status < http.StatusInternalServerError || msg == "" {
		msg = "request failed"
	}
	if ok, suppressed := a.logs.Allow("request_failed"); ok {
		a.deps.Logger.Warn("request failed", "path", c.Request.URL.Path, "status", status, "err", err, "suppressed", suppressed)
	}
	a.json(c, status, gin.H{"error": msg})
}

func (a *api) healthz(c *gin.Context) {
	a.json(c, http.StatusOK, gin.H{"status": "ok"})
}

// readyz checks both dependencies, each with its own bound, so one slow
// server does not hide the state of the other.
func (a *api) readyz(c *gin.Context) {
	ctx := c.Request.Context()
	check := func(p func(context.Context) error) string {
		pctx, cancel := context.WithTimeout(ctx, a.cfg.ProbeTimeout)
		defer cancel()
		if err := p(pctx); err != nil {
			return err.Error()
		}
		return "ok"
	}
	redisState := check(a.deps.Inventory.Ping)
	lockState := "ok"
	if a.deps.LockPinger != nil {
		lockState = check(a.deps.LockPinger.Ping)
	}
	fenceState := "ok"
	if a.deps.Fence != nil {
		if err := a.deps.Fence.FenceProblem(); err != nil {
			fenceState = err.Error()
		}
	}
	status := http.StatusOK
	if redisState != "ok" || lockState != "ok" || fenceState != "ok" {
		status = http.StatusServiceUnavailable
	}
	a.json(c, status, gin.H{"redis": redisState, "lock": lockState, "fence": fenceState})
}

func (a *api) info(c *gin.Context) {
	a.json(c, http.StatusOK, gin.H{
		"backend": a.cfg.Backend,
		"fencing": a.cfg.Fencing,
		"mode":    a.cfg.Mode,
		"version": a.cfg.Version,
	})
}
