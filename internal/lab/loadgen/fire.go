// Package loadgen fires stock reductions at a seckill cluster, then reads
// the stock back and checks that nothing was oversold — the JMeter run of
// the original articles, as a library behind `seckill run` and `seckill
// demo`.
//
// A closed loop (Fire, FireBuyers) is N requests at C in flight: a bounded
// worker pool over net/http, a few dozen lines that stop by themselves,
// every request bounded by the client timeout and the run's context. An
// open loop (FireOpen) is buyers arriving at a fixed rate for a duration,
// however slowly the cluster answers, as a flash sale's buyers do; vegeta's
// attacker, built for a rate and a duration, paces and sends them. Both
// keep every response body (result, replica) for the verdict.
package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/api"
)

// Outcome classifies one reduce response.
type Outcome int

// Outcomes, from stockd's "result" field (outcomes maps them); OutcomeError
// is everything else (api.Error, api.MixedBackends, api.StoreLost, a
// transport error, a 502/504 from nginx, an unparseable body).
const (
	OutcomeError Outcome = iota
	OutcomeSold
	OutcomeSoldOut
	OutcomeBusy
	OutcomeFenced
	OutcomeLockLost
	// OutcomeUnconfirmed: the sale's write got no answer in time; it may
	// have sold. Run settles it by the receipt of its Attempt.
	OutcomeUnconfirmed
	// OutcomeReplayed: a 200 sold answer that repeats an earlier sale with
	// the same Idempotency-Key ("replayed": true); nothing more was sold.
	OutcomeReplayed
	// OutcomeLimitReached: the buyer already bought the per-user limit.
	OutcomeLimitReached
	// OutcomeNotStarted and OutcomeEnded: an item's sale before its
	// window opened or from its end on (Config.Item); nothing was sold.
	OutcomeNotStarted
	OutcomeEnded
)

// Response is what one reduce request produced.
type Response struct {
	Outcome Outcome
	Status  int           // HTTP status, 0 on a transport error
	Replica string        // replica that sold, from the body
	Attempt string        // the sale's attempt id (sold or unconfirmed), from the body
	Settled bool          // an unconfirmed sale that its receipt says sold (Settle)
	Latency time.Duration // request start to body read
	Err     error         // transport or decoding error, if any
	// Result is stockd's "result" as sent (empty when the body was not
	// stockd's), and Left the stock a sold answer says it left (-1 when it
	// names none): the history check's input (history.go).
	Result api.Result
	Left   int64
	// Sent is when the request was started and Received when its answer
	// was read (or it failed): on one monotonic clock, so the verifier can
	// order an answer before a later request (Summarize's false sold-out).
	Sent, Received time.Time

	// The buyer-aware fields (FireBuyers); zero for anonymous sales.

	// Purchase is the index of the logical purchase this send belongs to.
	Purchase int
	User     string // X-User sent
	Key      string // Idempotency-Key sent
	// Order is the order id a 200 answer carries (the original one on a
	// replay).
	Order string
	// Retry is how the purchase was re-sent (RetryNone: sent once), and
	// Resend marks the second send of a re-sent purchase.
	Retry  RetryKind
	Resend bool
	// Cut: the client gave up on this send on purpose (the first send of a
	// RetryTimeout purchase, past Config.RetryTimeout); its outcome is
	// unknown and the purchase's second send settles it.
	Cut bool
	// BusyResends counts the times this buyer was answered busy and sent
	// the purchase again after the answer's Retry-After (the open loop's
	// RetryBusy); the Response is the last answer, timed from the first
	// send.
	BusyResends int
}

// Fire sends n reduce requests (method POST) to url with c in flight and
// returns every response, in no particular order. It stops early when ctx
// is done; the requests not sent then are missing from the result. Each
// request is bounded by client's timeout.
func Fire(ctx context.Context, client *http.Client, url string, n, c int) []Response {
	if c <= 0 {
		c = 1
	}
	c = min(c, max(n, 1))
	out := make([]Response, 0, n)
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				r := reduce(ctx, client, url, Purchase{})
				if ctx.Err() != nil && r.Err != nil {
					return // cancelled mid-flight: not a result
				}
				mu.Lock()
				out = append(out, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// reduce sends one sale, as p's buyer when p names one.
func reduce(ctx context.Context, client *http.Client, url string, p Purchase) Response {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return Response{Err: err, Sent: start, Received: start}
	}
	SetBuyer(req, p)
	resp, err := client.Do(req)
	if err != nil {
		end := time.Now()
		return Response{Err: err, Latency: end.Sub(start), Sent: start, Received: end}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	end := time.Now()
	if err != nil {
		return Response{Status: resp.StatusCode, Latency: end.Sub(start), Sent: start, Received: end, Left: -1, Err: err}
	}
	return answer(resp.StatusCode, raw, start, end)
}

// maxAnswer bounds the bytes of an answer read.
const maxAnswer = 64 << 10

// answer classifies one answer to a sale: status and body (stockd's
// api.Sale), sent at start and read by end.
func answer(status int, raw []byte, start, end time.Time) Response {
	r := Response{Status: status, Latency: end.Sub(start), Sent: start, Received: end, Left: -1}
	var body api.Sale
	if err := json.Unmarshal(raw, &body); err != nil {
		r.Err = errors.Join(ErrBadResponse, err)
		return r
	}
	r.Replica, r.Attempt, r.Order, r.Result = body.Replica, body.Attempt, body.Order, body.Result
	if body.Stock != nil {
		r.Left = *body.Stock
	}
	r.Outcome = classify(status, body.Result)
	if r.Outcome == OutcomeSold && body.Replayed {
		r.Outcome = OutcomeReplayed
	}
	if r.Outcome == OutcomeError && body.Error != "" {
		r.Err = errors.New(body.Error)
	}
	return r
}

// outcomes maps the results the report counts apart; every other result
// counts as an error.
var outcomes = map[api.Result]Outcome{
	api.Sold:        OutcomeSold,
	api.SoldOut:     OutcomeSoldOut,
	api.Fenced:      OutcomeFenced,
	api.Busy:        OutcomeBusy,
	api.LockLost:    OutcomeLockLost,
	api.Unconfirmed: OutcomeUnconfirmed,
	// Not in api.Results until the handler answers them; a result the
	// server never sends costs nothing here.
	api.LimitReached: OutcomeLimitReached,
	// Only an item's sale has a window.
	api.NotStarted: OutcomeNotStarted,
	api.Ended:      OutcomeEnded,
}

// classify maps (status, result) to an Outcome; a result that does not match
// its status is an error, so a confused proxy cannot pass as a sale.
func classify(status int, result api.Result) Outcome {
	if o, ok := outcomes[result]; ok && result.Matches(status) {
		return o
	}
	return OutcomeError
}

// NewClient returns an HTTP client for c concurrent requests: one idle
// connection per worker (the default of 2 per host would make most of the
// run a TCP handshake) and timeout per request.
func NewClient(c int, timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = c + 8
	t.MaxIdleConnsPerHost = c + 8
	return &http.Client{Transport: t, Timeout: timeout}
}
