package handler

import (
	"context"
	"errors"
	"net/http"

	"seckill/internal/lock"
	"seckill/internal/stock"
)

// Result labels of /stock/reduce, used in responses and in the metrics.
const (
	ResultSold          = "sold"
	ResultSoldOut       = "sold_out"
	ResultFenced        = "fenced"
	ResultBusy          = "busy"
	ResultLockLost      = "lock_lost"
	ResultMixedBackends = "mixed_backends"
	ResultUnconfirmed   = "unconfirmed"
	ResultError         = "error"
)

// classify is the one place that maps domain errors to HTTP statuses and
// result labels. Order matters where errors can wrap several sentinels (a
// lost lock may surface as ErrLockLost wrapping lock.ErrLost).
func classify(err error) (status int, result string) {
	switch {
	case err == nil:
		return http.StatusOK, ResultSold
	case errors.Is(err, stock.ErrUnconfirmed):
		// Before the unavailability it wraps: the write may have sold, and
		// the answer's attempt id lets the buyer find out (GET /stock/receipts/:attempt).
		return http.StatusServiceUnavailable, ResultUnconfirmed
	case errors.Is(err, stock.ErrSoldOut):
		return http.StatusConflict, ResultSoldOut
	case errors.Is(err, stock.ErrFenced):
		return http.StatusConflict, ResultFenced
	case errors.Is(err, stock.ErrMixedBackends):
		return http.StatusConflict, ResultMixedBackends
	case errors.Is(err, stock.ErrBusy):
		return http.StatusServiceUnavailable, ResultBusy
	case errors.Is(err, stock.ErrLockLost), errors.Is(err, lock.ErrLost):
		return http.StatusServiceUnavailable, ResultLockLost
	case errors.Is(err, stock.ErrUnavailable), errors.Is(err, lock.ErrUnavailable),
		errors.Is(err, lock.ErrClosed):
		return http.StatusServiceUnavailable, ResultError
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The request's own context ended (client gone, or shutdown cut it
		// off): the service could not finish, which is not a bug.
		return http.StatusServiceUnavailable, ResultError
	default:
		return http.StatusInternalServerError, ResultError
	}
}

// publicError is the stable, generic text an anonymous client gets for a
// failed call, or "" for ordinary outcomes (sold out, busy) that stay terse.
// The detail (addresses, script hashes, key names) goes to the log only.
func publicError(status int, result string) string {
	switch result {
	case ResultFenced:
		return "sale refused: stale fencing token"
	case ResultMixedBackends:
		return "sale refused: the stock is guarded by another lock service"
	case ResultLockLost:
		return "lock lost before the sale was written"
	case ResultUnconfirmed:
		return "sale outcome unconfirmed; ask GET /stock/receipts/<attempt>"
	case ResultError:
		if status == http.StatusServiceUnavailable {
			return "stock service unavailable"
		}
		return "internal error"
	}
	return ""
}
