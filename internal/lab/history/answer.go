package history

import (
	"net/http"
	"time"

	"seckill/internal/api"
)

// Answer is what a client knows of one sale request, as the lab and the
// load tool both record it.
type Answer struct {
	// Status is the HTTP status, 0 when no answer came (a transport error,
	// a timeout).
	Status int
	// Result is stockd's "result"; empty when the body was not stockd's
	// (the proxy's 502/504).
	Result api.Result
	// Left is the stock a 200 sold answer says the sale left; -1 when it
	// names none.
	Left int64
	// Replayed: a 200 that repeats a key's earlier sale.
	Replayed bool
	// Settled: an unconfirmed answer whose receipt, read after the run,
	// says it sold.
	Settled bool
	// Cut: the client gave up on the request on purpose.
	Cut bool
	// ErrorsMayApply: a stockd 503 error may have taken effect (a
	// failover may apply a write whose answer was an error).
	ErrorsMayApply bool
}

// Classify is the outcome an answer proves, and the stock-after it names.
// Only stockd's own verdicts are definite; no answer, the client's cut,
// the proxy's errors and an unconfirmed sale whose receipt said no (its
// write could still be on its way, which fencing refuses, but the model
// does not rely on it) are Unknown. A 500 is a bug, which proves nothing
// either way.
func Classify(a Answer) (Outcome, int64) {
	stockd := a.Result != "" && a.Result.Matches(a.Status)
	switch {
	case a.Cut || a.Status == 0 || !stockd:
		return Unknown, 0
	case a.Result == api.Sold && a.Replayed:
		return Replay, a.Left // it answers an earlier sale: its stock-after is that one's
	case a.Result == api.Sold:
		return Sold, a.Left
	case a.Result == api.SoldOut:
		return SoldOut, 0
	case a.Result == api.Unconfirmed && a.Settled:
		return SoldSometime, -1
	case a.Result == api.Unconfirmed:
		return Unknown, 0
	case a.Result == api.Error && (a.ErrorsMayApply || a.Status != http.StatusServiceUnavailable):
		return Unknown, 0
	case a.Result == api.LimitReached:
		return LimitReached, 0
	default:
		// busy, fenced, lock_lost, store_lost, a 503 error before the
		// write: definite refusals.
		return NoChange, 0
	}
}

// Call is one request as its client recorded it.
type Call struct {
	Answer
	Sent, Answered time.Time // on one monotonic clock
	Client         int       // the row it is drawn in
	// Note, User, Key and Order go to the Op as they are.
	Note, User, Key, Order string
}

// Build is the history of calls: each an Op from its send to its answer;
// one with no answer returns Never, and an unconfirmed one returns when
// its receipt was read after the run, at readAt. With final, the read of
// the books at readAt (stock left) is its last operation.
func Build(calls []Call, readAt time.Time, stock int64, final bool) []Op {
	if len(calls) == 0 {
		return nil
	}
	t0, last := calls[0].Sent, 0
	for _, c := range calls {
		if c.Sent.Before(t0) {
			t0 = c.Sent
		}
		last = max(last, c.Client)
	}
	ops := make([]Op, 0, len(calls)+1)
	for _, c := range calls {
		o, after := Classify(c.Answer)
		op := Op{Client: c.Client, Call: c.Sent.Sub(t0), Return: c.Answered.Sub(t0), Outcome: o, After: after,
			Note: c.Note, User: c.User, Key: c.Key, Order: c.Order}
		switch {
		case o == Unknown:
			op.Return = Never
		case c.Result == api.Unconfirmed:
			op.Return = readAt.Sub(t0)
		}
		ops = append(ops, op)
	}
	if final {
		end := readAt.Sub(t0)
		ops = append(ops, Op{Client: last + 1, Call: end, Return: end + 1, Outcome: Read, After: stock})
	}
	return ops
}
