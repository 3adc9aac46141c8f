package handler

import (
	"context"
	"errors"
	"net/http"

	"seckill/internal/api"
	"seckill/internal/lock"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// classify is the one place that maps domain errors to HTTP statuses and
// result labels (package api declares both). Order matters where errors can
// wrap several sentinels (a lost lock may surface as ErrLockLost wrapping
// lock.ErrLost).
func classify(err error) (status int, result api.Result) {
	switch {
	case err == nil:
		result = api.Sold
	case errors.Is(err, stock.ErrUnconfirmed):
		// Before the unavailability it wraps: the write may have sold, and
		// the answer's attempt id lets the buyer find out (GET /stock/receipts/:attempt).
		result = api.Unconfirmed
	case errors.Is(err, stock.ErrNotStarted):
		result = api.NotStarted
	case errors.Is(err, stock.ErrEnded):
		result = api.Ended
	case errors.Is(err, stock.ErrClockSkew):
		result = api.ClockSkew
	case errors.Is(err, stock.ErrSoldOut):
		result = api.SoldOut
	case errors.Is(err, stock.ErrLimitReached):
		result = api.LimitReached
	case errors.Is(err, stock.ErrFenced):
		result = api.Fenced
	case errors.Is(err, stock.ErrMixedBackends):
		result = api.MixedBackends
	case errors.Is(err, stock.ErrBusy):
		result = api.Busy
	case errors.Is(err, stock.ErrLockLost), errors.Is(err, lock.ErrLost):
		result = api.LockLost
	case errors.Is(err, stock.ErrStoreLost):
		// Before unavailability: the Redis answered, and what it answered
		// is that the sale is gone.
		result = api.StoreLost
	case errors.Is(err, stock.ErrNotInteger):
		// 500, not 503: the stock's own data is broken, which no retry
		// and no other replica fixes (they share the key) until an
		// operator resets it; and not a 4xx, since the buyer did nothing
		// wrong. /readyz says the same ("stock").
		return http.StatusInternalServerError, api.Error
	case errors.Is(err, stock.ErrUnavailable), errors.Is(err, stock.ErrOutOfMemory),
		errors.Is(err, lock.ErrUnavailable), errors.Is(err, lock.ErrClosed):
		// An OOM refusal wrote nothing (a definite answer, not unconfirmed)
		// and lasts until memory is freed or maxmemory raised: the service
		// is unavailable, not broken.
		return http.StatusServiceUnavailable, api.Error
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The request's own context ended (client gone, or shutdown cut it
		// off): the service could not finish, which is not a bug.
		return http.StatusServiceUnavailable, api.Error
	default:
		result = api.Error // a bug: 500
	}
	return result.Status(), result
}

// itemProblem is the status of an item call's refusal that is no sale's
// result (its body a problem with the error's text, which names nothing
// but the item and the settings): a malformed id or settings, an item
// that does not exist, exists already or is archived, or a configuration that sells
// no items.
func itemProblem(err error) (status int, ok bool) {
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, stock.ErrBadItem), errors.Is(err, stock.ErrStockRange):
		return http.StatusBadRequest, true
	case errors.Is(err, stock.ErrNoItem):
		return http.StatusNotFound, true
	case errors.Is(err, stock.ErrItemExists), errors.Is(err, redisstore.ErrWindowEnded):
		return http.StatusConflict, true
	case errors.Is(err, stock.ErrItemArchived):
		// Gone for good, unlike sold out or ended: no reset brings it back.
		return http.StatusGone, true
	case errors.Is(err, stock.ErrItemsUnsupported):
		return http.StatusNotImplemented, true
	}
	return 0, false
}

// publicError is the stable, generic text an anonymous client gets for a
// failed call, or "" for ordinary outcomes (sold out, busy) that stay terse.
// The detail (addresses, script hashes, key names) goes to the log only.
func publicError(status int, result api.Result, err error) string {
	if errors.Is(err, stock.ErrNotInteger) {
		return stock.ErrNotInteger.Error() // what is wrong, without the key
	}
	if errors.Is(err, stock.ErrSaleFormat) || errors.Is(err, stock.ErrWitnessFormat) {
		// The operator's answer, not an outage: this replica is older than
		// what it read (docs/versions.md); another replica may sell.
		return "this replica is older than the sale's stored format: nothing sold here until it is upgraded"
	}
	if errors.Is(err, stock.ErrSaleKind) {
		// A configuration the replicas disagree on, not an outage.
		return "the sale's reservations (orders.payment_window) are not this replica's: nothing sold here until every replica has the same setting"
	}
	if errors.Is(err, stock.ErrOrderFormat) {
		return "this replica is older than the order's stored format: it cannot read it until it is upgraded"
	}
	switch result {
	case api.Fenced:
		return "sale refused: stale fencing token"
	case api.MixedBackends:
		return "sale refused: the stock is guarded by another lock service"
	case api.LockLost:
		return "lock lost before the sale was written"
	case api.StoreLost:
		if errors.Is(err, stock.ErrStoreRewound) {
			return "the stock Redis went back in time and lost sales it had acknowledged: the sale is halted until an operator reconciles it"
		}
		return "the sale is not in the stock Redis (lost, or never reset): nothing sold until an operator resets it"
	case api.ClockSkew:
		return "the stock Redis's clock is off this server's at an edge of the sale's window: nothing sold; try again once the clocks agree"
	case api.Unconfirmed:
		return "sale outcome unconfirmed; ask GET /stock/receipts/<attempt>"
	case api.Error:
		if status == http.StatusServiceUnavailable {
			return "stock service unavailable"
		}
		return "internal error"
	}
	return ""
}
