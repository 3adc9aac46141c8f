// Package api is stockd's HTTP contract: the result labels of a sale and the
// JSON body of every answer, declared once and imported by the server
// (internal/handler, internal/stockd) and by its clients (internal/lab/loadgen,
// internal/lab, seckill leader, the e2e tests).
//
// The field names and values are stable: scripts and other tools parse
// them. Fields are declared in the order of their JSON names, so an answer
// is byte-for-byte what the earlier map-built bodies were.
package api

import "net/http"

// Result is the "result" of POST /stock/reduce (and of an item's POST
// /items/:id/reduce), and the result label of the seckill_reduce_total
// metric.
type Result string

// The results of a sale.
const (
	// Sold: the sale was written; the answer carries the stock left, the
	// fencing token and the attempt id.
	Sold Result = "sold"
	// SoldOut: nothing left to sell.
	SoldOut Result = "sold_out"
	// Fenced: the fence refused a stale or equal token; nothing was written.
	Fenced Result = "fenced"
	// Busy: the lock could not be taken within lock.wait_timeout.
	Busy Result = "busy"
	// LockLost: the lock was lost before the sale was written.
	LockLost Result = "lock_lost"
	// MixedBackends: the stock is guarded by another lock service's tokens.
	MixedBackends Result = "mixed_backends"
	// Unconfirmed: the write got no answer in time and may have sold; the
	// answer's attempt id settles it (GET /stock/receipts/:attempt).
	Unconfirmed Result = "unconfirmed"
	// Error: a dependency failed (503) or a bug (500).
	Error Result = "error"
	// LimitReached: the buyer (X-User) already bought stock.per_user_limit
	// units of this sale; nothing was sold.
	LimitReached Result = "limit_reached"
	// StoreLost: the sale is not in the stock Redis (its stock key is
	// missing: Redis lost it, or no sale was ever reset there); nothing was
	// sold, and nothing is until an operator resets the sale.
	StoreLost Result = "store_lost"
	// NotStarted: an item's sale before its window opens (the answer
	// carries starts_at, unix ms); nothing was sold.
	NotStarted Result = "not_started"
	// Ended: an item's sale after its window closed; nothing was sold.
	Ended Result = "ended"
	// ClockSkew: an item's sale at an edge of its window while the stock
	// Redis's clock is off stockd's by more than stock.max_clock_skew,
	// where the two clocks disagree on the answer; nothing was sold, and
	// the answer stands until they agree again (a 503: the fault is the
	// service's, not the buyer's).
	ClockSkew Result = "clock_skew"
)

// StoreRewound starts /readyz's "stock" state when the sale is halted
// because the stock Redis went back in time; sales then answer StoreLost.
const StoreRewound = "store_rewound"

// Results lists every result stockd can answer, for tests and tables.
// LimitReached comes after the results of any sale: it needs a named
// buyer, and tables of anonymous sales may stop before it; NotStarted,
// Ended and ClockSkew come last, answered only by an item's sale (POST
// /items/:id/reduce).
var Results = []Result{Sold, SoldOut, Fenced, Busy, LockLost, MixedBackends, Unconfirmed, Error, LimitReached, StoreLost,
	NotStarted, Ended, ClockSkew}

// Status is the HTTP status stockd answers r with, 0 for an unknown result.
// Error is 500 here; stockd answers it 503 instead when a dependency is
// unreachable or the request's own context ended.
func (r Result) Status() int {
	switch r {
	case Sold:
		return http.StatusOK
	case SoldOut, Fenced, MixedBackends, LimitReached, NotStarted, Ended:
		return http.StatusConflict
	case Busy, LockLost, Unconfirmed, StoreLost, ClockSkew:
		return http.StatusServiceUnavailable
	case Error:
		return http.StatusInternalServerError
	}
	return 0
}

// Matches reports whether stockd answers r with status: a body whose result
// does not match its status (a confused proxy) is not stockd's answer.
func (r Result) Matches(status int) bool {
	return (status != 0 && status == r.Status()) || (r == Error && status == http.StatusServiceUnavailable)
}
