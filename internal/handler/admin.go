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

// now is the clock of the admin back-off; tests replace it.
var now = time.Now

// Admin back-off: a source's first freeFailures wrong tokens cost nothing;
// each one after that shuts the source out for a doubling delay, from
// firstBackoff up to maxBackoff, during which its wrong tokens are answered
// 429. The token is compared first: the right one always passes, so no one
// can lock the admin out by failing from its address (or behind its NAT or
// proxy). That makes every guess an answered guess, so the back-off tells
// an operator and slows a polite client; what makes guessing hopeless is
// admin.token's length (16+ characters: 2^64 guesses for 16 hex digits).
// A right token clears the source.
const (
	freeFailures = 3
	firstBackoff = time.Second
	maxBackoff   = 30 * time.Second
	// forgetAfter drops a quiet source; maxSources bounds the table.
	forgetAfter = 10 * time.Minute
	maxSources  = 10000
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
		a.admin.succeeded(c.ClientIP())
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

// wrongAdmin refuses a wrong admin token: 429 while the source is shut
// out, else a failed attempt (401 with msg).
func (a *server) wrongAdmin(c *gin.Context, msg string) {
	if wait := a.admin.blocked(c.ClientIP()); wait > 0 {
		a.countAdminFailure()
		c.Header("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		a.refuseBody(c, http.StatusTooManyRequests, "too many failed admin attempts; retry later")
		return
	}
	a.adminFailed(c, msg)
}

// adminFailed counts a credential the source could not back in the
// back-off, logs it (once a second) and answers 401 with msg.
func (a *server) adminFailed(c *gin.Context, msg string) {
	ip := c.ClientIP()
	a.countAdminFailure()
	fails := a.admin.failed(ip)
	if ok, suppressed := a.logs.Allow("admin_auth"); ok {
		a.deps.Logger.Warn("admin call refused: missing or bad token", "path", c.Request.URL.Path,
			"remote", ip, "failures", fails, "suppressed", suppressed)
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

type source struct {
	fails int
	until time.Time // refused until then
	last  time.Time
}

// adminGuard keeps the failed admin attempts per source address.
type adminGuard struct {
	mu      sync.Mutex
	sources map[string]*source
}

// blocked reports how long addr must still wait, 0 if not at all.
func (g *adminGuard) blocked(addr string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.sources[addr]; ok {
		if d := s.until.Sub(now()); d > 0 {
			return d
		}
	}
	return 0
}

// failed records a wrong token from addr and returns its failure count.
func (g *adminGuard) failed(addr string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := now()
	if g.sources == nil {
		g.sources = map[string]*source{}
	}
	s, ok := g.sources[addr]
	if !ok {
		if len(g.sources) >= maxSources {
			g.prune(t)
		}
		s = &source{}
		g.sources[addr] = s
	}
	s.fails++
	s.last = t
	if over := s.fails - freeFailures; over > 0 {
		d := firstBackoff << min(over-1, 16)
		s.until = t.Add(min(d, maxBackoff))
	}
	return s.fails
}

// succeeded forgets addr's failures.
func (g *adminGuard) succeeded(addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.sources, addr)
}

// prune drops quiet sources; if every one is recent (a flood of addresses),
// it starts over rather than grow without bound.
func (g *adminGuard) prune(t time.Time) {
	for a, s := range g.sources {
		if t.Sub(s.last) > forgetAfter && !t.Before(s.until) {
			delete(g.sources, a)
		}
	}
	if len(g.sources) >= maxSources {
		clear(g.sources)
	}
}
