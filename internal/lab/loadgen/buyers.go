package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/auth"
)

// buyers.go: purchases by named buyers, some of them sent twice with the
// same Idempotency-Key, the way a real client retries.

// RetryKind is how a purchase is re-sent with the same user and key.
type RetryKind int

// The ways a client re-sends a purchase. Each one reaches the server's
// idempotency record at another moment: before the first send's sale was
// decided (race), after it was decided and answered (after), or while
// its outcome is unknown to the client (timeout).
const (
	// RetryNone: sent once.
	RetryNone RetryKind = iota
	// RetryTimeout: the first send is cut by the client after
	// Config.RetryTimeout (it may or may not sell), then sent again; one
	// answered sooner is sent again all the same.
	RetryTimeout
	// RetryAfter: sent again right after the first answer.
	RetryAfter
	// RetryRace: both sends are in flight at once.
	RetryRace
)

var retryNames = [...]string{"none", "timeout", "after", "race"}

func (k RetryKind) String() string {
	if k < 0 || int(k) >= len(retryNames) {
		return fmt.Sprintf("RetryKind(%d)", int(k))
	}
	return retryNames[k]
}

// Purchase is one logical purchase: a buyer and the idempotency key that
// makes its sends one purchase.
type Purchase struct {
	User  string
	Key   string
	Retry RetryKind
	// Token, when set, names the buyer (Authorization: Bearer; see
	// Sign); without it the buyer is sent as X-User, for a service
	// behind a gateway that trusts this client to name buyers.
	Token string
}

// Sign gives every purchase a token for its buyer from m.
func Sign(ps []Purchase, m *auth.Minter) {
	for i := range ps {
		if ps[i].User != "" {
			ps[i].Token = m.Token(ps[i].User)
		}
	}
}

// SetBuyer names p's buyer and key on req, as Purchase says.
func SetBuyer(req *http.Request, p Purchase) {
	switch {
	case p.Token != "":
		req.Header.Set("Authorization", "Bearer "+p.Token)
	case p.User != "":
		req.Header.Set("X-User", p.User)
	}
	if p.Key != "" {
		req.Header.Set("Idempotency-Key", p.Key)
	}
}

// Plan makes n purchases by users buyers ("u1".."u<users>"): each buyer
// gets n/users of them (one more for the first n%users buyers, in a
// shuffled order), so with users >= n every buyer tries once and with
// fewer some try again — and meet the per-user limit. round(rate*n) of
// them, chosen at random, are re-sent, the three RetryKinds in turn so
// each is covered. Keys are unique per purchase and carry run, so two
// runs never share one.
func Plan(n, users int, rate float64, run string, rng *mrand.Rand) []Purchase {
	if n <= 0 || users <= 0 {
		return nil
	}
	ids := rng.Perm(users)
	out := make([]Purchase, n)
	for i := range out {
		out[i] = Purchase{
			User: fmt.Sprintf("u%d", ids[i%users]+1),
			Key:  fmt.Sprintf("%s-%d", run, i),
		}
	}
	rng.Shuffle(n, func(i, j int) { out[i].User, out[j].User = out[j].User, out[i].User })
	retried := min(n, max(0, int(rate*float64(n)+0.5)))
	for j, i := range rng.Perm(n)[:retried] {
		out[i].Retry = RetryKind(1 + j%3)
	}
	return out
}

// RunID is a random prefix for a run's idempotency keys.
func RunID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// FireBuyers sends every purchase to url with c purchases in flight (a
// racing purchase has both its sends in flight) and returns every
// response, in no particular order. cut bounds the first send of a
// RetryTimeout purchase. It stops early when ctx is done.
func FireBuyers(ctx context.Context, client *http.Client, url string, purchases []Purchase, c int, cut time.Duration) []Response {
	c = min(max(c, 1), max(len(purchases), 1))
	out := make([]Response, 0, len(purchases)+len(purchases)/4)
	var mu sync.Mutex
	keep := func(rs ...Response) {
		mu.Lock()
		out = append(out, rs...)
		mu.Unlock()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(purchases) {
					return
				}
				rs := purchase(ctx, client, url, purchases[i], cut)
				if ctx.Err() != nil {
					return // cancelled mid-flight: not a result
				}
				for k := range rs {
					rs[k].Purchase = i
				}
				keep(rs...)
			}
		})
	}
	wg.Wait()
	return out
}

// purchase sends p once, or twice as its RetryKind says.
func purchase(ctx context.Context, client *http.Client, url string, p Purchase, cut time.Duration) []Response {
	stamp := func(r Response, resend bool) Response {
		r.User, r.Key, r.Retry, r.Resend = p.User, p.Key, p.Retry, resend
		return r
	}
	switch p.Retry {
	case RetryTimeout:
		short, cancel := context.WithTimeout(ctx, cut)
		first := stamp(reduce(short, client, url, p), false)
		// Only our own deadline makes the send "cut": any other failure is
		// an error the report must show.
		first.Cut = first.Err != nil && errors.Is(short.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		return []Response{first, stamp(reduce(ctx, client, url, p), true)}
	case RetryAfter:
		first := stamp(reduce(ctx, client, url, p), false)
		return []Response{first, stamp(reduce(ctx, client, url, p), true)}
	case RetryRace:
		var a, b Response
		var wg sync.WaitGroup
		wg.Go(func() { a = stamp(reduce(ctx, client, url, p), false) })
		wg.Go(func() { b = stamp(reduce(ctx, client, url, p), true) })
		wg.Wait()
		return []Response{a, b}
	default:
		return []Response{stamp(reduce(ctx, client, url, p), false)}
	}
}
