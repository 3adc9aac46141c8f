package handler

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"seckill/internal/auth"
)

// now is the clock of the admin bound; tests replace it.
var now = time.Now

// The admin bound: failed admin tries, from every address together, spend
// a token bucket of adminBurst refilled at adminPerMinute; a wrong token
// that finds it empty is answered 429 with Retry-After. The token is
// compared first: the right one always passes, so the bound can lock no
// one out. What makes guessing hopeless is the token's strength (120+
// bits by estimate, checked at start): every guess is an answered guess,
// 401 or 429 alike. The bound is there to tell an operator (a metric and a warning)
// and to slow a flood. It keeps no per-source state: a client address
// comes from X-Forwarded-For behind a proxy, where it can be forged from
// inside the trusted ranges (escaping a per-source count), pinned on
// someone else (shutting them out), or shared by everyone behind one
// proxy; such state gave an attacker a lever and the admin nothing.
const (
	adminBurst     = 10
	adminPerMinute = 30
)

// headerAdminToken carries the admin token (Authorization: Bearer does too).
const headerAdminToken = "X-Admin-Token"

// offer is what a request offers as the admin token.
type offer struct {
	// token is X-Admin-Token's, else the bearer token; "" for none.
	token string
	// buyer: token is a buyer's credential (a JWT, where buyers send
	// JWTs), not a guess at the admin token; its refusal is the buyer's,
	// never a failed admin attempt.
	buyer bool
}

// adminOffer reads r's admin credential; the error is a malformed
// Authorization header (auth.Bearer, the buyers' parser too).
func (a *server) adminOffer(r *http.Request) (offer, error) {
	bearer, err := auth.Bearer(r.Header)
	if err != nil {
		return offer{}, err
	}
	if tok := r.Header.Get(headerAdminToken); tok != "" {
		return offer{token: tok}, nil
	}
	return offer{token: bearer, buyer: bearer != "" && a.cfg.Buyers.Mode == auth.ModeJWT && auth.IsJWT(bearer)}, nil
}

// rightToken compares the digests, in constant time, so neither the
// token's bytes nor its length can be read from response timings.
func (a *server) rightToken(tok string) bool {
	if tok == "" || a.cfg.AdminToken == "" {
		return false
	}
	got, want := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte(a.cfg.AdminToken))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// admit passes an admin-only call with the right token; it answers the
// refusals itself. Any other credential, or none, is a failed admin
// attempt, except a buyer's token. Refused bodies are not drained: a
// refused caller cannot hold the connection by trickling one.
func (a *server) admit(c *gin.Context) bool {
	o, err := a.adminOffer(c.Request)
	switch {
	case err == nil && a.rightToken(o.token):
		return true
	case err != nil:
		challenge(c, err)
		a.adminFailed(c, err.Error()+" (the admin token: "+headerAdminToken+" or Authorization: Bearer)")
	case o.buyer:
		a.refuseBody(c, http.StatusUnauthorized, "this call needs the admin token; a buyer's token is not one")
	default:
		a.wrongAdmin(c, "missing or bad admin token ("+headerAdminToken+" or Authorization: Bearer)")
	}
	return false
}

// wrongAdmin refuses a wrong admin token: 429 while the bound is spent,
// else a failed attempt (401 with msg).
func (a *server) wrongAdmin(c *gin.Context, msg string) {
	if wait, first := a.admin.over(); wait > 0 {
		a.countAdminFailure()
		if m := a.deps.Metrics; m != nil {
			m.AdminThrottled.Inc()
		}
		if ok, suppressed := a.logs.Allow("admin_throttled"); ok || first {
			a.deps.Logger.Warn("admin calls throttled: too many failed admin tries on this replica",
				"bound_per_minute", adminPerMinute, "burst", adminBurst, "path", c.Request.URL.Path,
				"remote", c.ClientIP(), "first", first, "suppressed", suppressed)
		}
		c.Header("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		a.refuseBody(c, http.StatusTooManyRequests, "too many failed admin attempts; retry later")
		return
	}
	a.adminFailed(c, msg)
}

// adminFailed counts a credential that is not the admin token, spends
// one try of the bound, logs it (once a second) and answers 401 with msg.
func (a *server) adminFailed(c *gin.Context, msg string) {
	a.countAdminFailure()
	a.admin.spend()
	if ok, suppressed := a.logs.Allow("admin_auth"); ok {
		a.deps.Logger.Warn("admin call refused: missing or bad token", "path", c.Request.URL.Path,
			"remote", c.ClientIP(), "suppressed", suppressed)
	}
	a.refuseBody(c, http.StatusUnauthorized, msg)
}

func (a *server) countAdminFailure() {
	if m := a.deps.Metrics; m != nil {
		m.AdminAuthFailures.Inc()
	}
}

// challenge sets the WWW-Authenticate of a 401 for err, a refused
// credential (RFC 6750 §3: error="invalid_request" for a header that
// could not be read).
func challenge(c *gin.Context, err error) {
	v := `Bearer realm="seckill"`
	if errors.Is(err, auth.ErrMalformedAuthorization) {
		v += `, error="invalid_request"`
	}
	c.Header("WWW-Authenticate", v)
}

// adminBound is the token bucket of failed admin tries, one per replica,
// kept as the time it is full again (GCRA): each try moves that time on
// by one try's refill, up to the whole burst's.
type adminBound struct {
	mu         sync.Mutex
	full       time.Time // when every try is back; the past: full now
	throttling bool      // refused a try since the bucket was last full
}

// perTry is the time the bucket takes to refill one try.
const perTry = time.Minute / adminPerMinute

// over reports how long until the bound takes another try, 0 if it takes
// one now; first is true for the first refusal since the bucket was full
// (the start of a flood, which the operator is told of).
func (b *adminBound) over() (wait time.Duration, first bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := now()
	if !b.full.After(t) {
		b.throttling = false // quiet long enough to refill the burst
		return 0, false
	}
	if wait = b.full.Add(perTry).Sub(t) - adminBurst*perTry; wait <= 0 {
		return 0, false
	}
	first = !b.throttling
	b.throttling = true
	return wait, first
}

// spend takes one try (a malformed header spends one too, though it is
// answered 401, never 429).
func (b *adminBound) spend() {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := now()
	if b.full.Before(t) {
		b.full = t
	}
	b.full = b.full.Add(perTry)
	if limit := t.Add(adminBurst * perTry); b.full.After(limit) {
		b.full = limit // never owe more than the burst
	}
}
