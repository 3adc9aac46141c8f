package stock

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Store and Service wrap them with context; callers test with
// errors.Is. The HTTP layer maps each to a status in one place.
var (
	// ErrSoldOut: the stock is zero, nothing was written.
	ErrSoldOut = errors.New("stock: sold out")

	// ErrFenced: a holder with a newer fencing token has read the stock since
	// this lease did, or the fence was reset; the write was refused.
	ErrFenced = errors.New("stock: fenced")

	// ErrTokenCollision: two leases read under one token, so the lock service
	// handed it out twice — it lost state (a restart without its last
	// writes, a failover to a lagging replica). Both were refused. Errors
	// that wrap it wrap ErrFenced too.
	ErrTokenCollision = errors.New("stock: token collision: the lock service lost state")

	// ErrUnconfirmed: the sale's write was sent but no answer came back
	// before the confirm deadline, so whether it sold is not known here. Its
	// receipt (Store.Receipt, by attempt id) settles it afterwards; the
	// service never reports a sale it could not confirm.
	ErrUnconfirmed = errors.New("stock: sale unconfirmed")

	// ErrMixedBackends: the fence was recorded by a different lock backend.
	// Replicas that use different locks do not exclude each other, and their
	// tokens do not compare, so the store refuses to guess.
	ErrMixedBackends = errors.New("stock: mixed lock backends")

	// ErrLockLost: the lease was lost during the sale; nothing was written.
	ErrLockLost = errors.New("stock: lock lost before write")

	// ErrBusy: the lock was not obtained within the wait timeout.
	ErrBusy = errors.New("stock: lock busy")

	// ErrNotInteger: a stock or lucky key holds something a sale cannot
	// count with — not a canonical integer (a typo'd SET, "5.0"), beyond
	// ±(2^53-1), or a key of another type. Nothing was written. Its text is
	// what a client is told; the wrapping error names the key.
	ErrNotInteger = errors.New("stock key holds a non-integer")

	// ErrStockRange: a reset to a stock outside 0..MaxStock; nothing was
	// written.
	ErrStockRange = errors.New("stock: stock out of range 0..2^53-1")

	// ErrUnavailable: the stock Redis could not be reached or is not serving.
	ErrUnavailable = errors.New("stock: redis unavailable")

	// ErrStoreLost: the sale's stock key is missing from Redis. A reset
	// writes it and a sale never deletes it, so Redis lost the sale (it
	// restarted without its data, was flushed, or loaded a snapshot from
	// before the reset) or no sale was ever reset there. Nothing was
	// written, and nothing is sold until an operator resets the sale: read
	// as 0, a lost stock would answer buyers who hold a unit "sold out",
	// and let their replayed keys buy again.
	ErrStoreLost = errors.New("stock: the sale is not in redis (lost, or never reset)")

	// ErrStoreRewound: the stock Redis went back in time: a selling script
	// found more stock than a sale of this epoch was answered with (an
	// older snapshot loaded, a failover to a replica that lagged), and
	// halted the sale (Keys.Halt) for every replica. Nothing was written;
	// nothing is sold until an operator reconciles the acknowledged orders
	// and removes the halt (README, the runbook). It wraps ErrStoreLost: the
	// sale's acknowledged state is gone from Redis either way.
	ErrStoreRewound = fmt.Errorf("%w: the stock redis went back in time (halted)", ErrStoreLost)

	// ErrWitnessLost: the witness (witness.go) does not hold what the sale
	// needs: no record while Redis holds a sale, a record without the
	// sale's epoch, or one whose generation went back (a restored backup,
	// a wiped store). Redis alone cannot say which acknowledged sales it
	// holds, so the sale halts with this reason until an operator adopts
	// the sale from Redis (AdoptWitness) or reconciles and resets (the
	// runbook). Its text starts with the halt's reason, witness_lost.
	ErrWitnessLost = errors.New("witness_lost")

	// ErrWitnessFormat: the witness's record is of a newer format than
	// this stockd reads (a newer replica wrote it). Nothing is written
	// back over it; the sale is unavailable on this replica until it is
	// upgraded. It wraps ErrUnavailable.
	ErrWitnessFormat = fmt.Errorf("%w: the witness's record is of a newer format", ErrUnavailable)

	// ErrSaleFormat: the sale's keys are of a newer format than this
	// stockd reads (a newer replica reset the sale; formats.go). Nothing
	// is read or written in it; the sale is unavailable on this replica
	// until it is upgraded. It wraps ErrUnavailable.
	ErrSaleFormat = fmt.Errorf("%w: the sale is of a newer format", ErrUnavailable)

	// ErrSaleKind: the sale is not of the kind this replica sells: one
	// with reservations (sale format 2, reset by a replica with
	// orders.payment_window) met by a replica without them, or the
	// reverse. Its units would be sold with no deadline, or with one its
	// other replicas never expire, and the orders' census would break.
	// Nothing is read or written in it; it is a definite answer until the
	// replicas agree, or a reset makes the sale theirs. It wraps
	// ErrUnavailable.
	ErrSaleKind = fmt.Errorf("%w: the sale's reservations are not this replica's", ErrUnavailable)

	// ErrOrderFormat: an order's stored form (its ledger entry, or its
	// row in the durable orders' table) is of a newer format than this
	// stockd reads (a newer replica wrote it). It is not read as anything
	// else; reading it is unavailable on this replica until it is
	// upgraded. It wraps ErrUnavailable.
	ErrOrderFormat = fmt.Errorf("%w: an order is of a newer format", ErrUnavailable)

	// ErrOutOfMemory: the stock Redis, at its maxmemory under noeviction,
	// refused the command with OOM. Redis refuses a script at its first
	// write and never midway, so the script wrote nothing: unlike a lost
	// reply, this call is known not to have sold.
	ErrOutOfMemory = errors.New("stock: redis out of memory")
)

// Errors of items (items.go).
var (
	// ErrNoItem: no item of that id exists (in the registry).
	ErrNoItem = errors.New("stock: no such item")
	// ErrItemExists: an item of that id exists already; reset it instead.
	ErrItemExists = errors.New("stock: the item exists")
	// ErrItemArchived: the item is archived (Items.Archive): it sells no
	// more and cannot be reset; its books and orders stay readable.
	ErrItemArchived = errors.New("stock: the item is archived and sells no more")
	// ErrBadItem: an item id or settings that cannot be used; the error
	// says what is wrong, and nothing was written.
	ErrBadItem = errors.New("stock: bad item")
	// ErrItemsUnsupported: this configuration cannot sell items (the error
	// says why); nothing was written or sold.
	ErrItemsUnsupported = errors.New("stock: items are not supported with this configuration")
	// ErrItemChanged: the item was reset since its service was built; the
	// script wrote nothing, and Items sells again with a new service.
	ErrItemChanged = errors.New("stock: the item was reset during the sale")
)

// Refusals of a sale outside its window (Keys.Window, window.lua), by
// Redis's clock; nothing was written. Errors that wrap them are a
// *WindowError, which carries the window's bounds.
var (
	// ErrNotStarted: the sale's window opens later (WindowError.StartsAt).
	ErrNotStarted = errors.New("stock: the sale has not started")
	// ErrEnded: the sale's window has closed (WindowError.EndsAt).
	ErrEnded = errors.New("stock: the sale has ended")
)

// WindowError is a sale refused outside its window. It wraps ErrNotStarted
// or ErrEnded; the bound the sale was refused by is set (unix ms), the
// other is 0 when not known.
type WindowError struct {
	StartsAt, EndsAt int64
	Err              error // ErrNotStarted or ErrEnded
}

func (e *WindowError) Error() string {
	if errors.Is(e.Err, ErrNotStarted) {
		return fmt.Sprintf("%v: it starts at %s", e.Err, unixMS(e.StartsAt))
	}
	return fmt.Sprintf("%v: it ended at %s", e.Err, unixMS(e.EndsAt))
}

// Unwrap lets errors.Is see ErrNotStarted or ErrEnded.
func (e *WindowError) Unwrap() error { return e.Err }

// WindowRefusal is the error of a script that found the window closed:
// not started yet (early) or ended, at bound.
func WindowRefusal(early bool, bound int64) *WindowError {
	if early {
		return &WindowError{StartsAt: bound, Err: ErrNotStarted}
	}
	return &WindowError{EndsAt: bound, Err: ErrEnded}
}

// ErrClockSkew: the stock Redis's clock and this process's are further
// apart than stock.max_clock_skew, and the sale is at an edge of its
// window, where the two clocks decide differently: refused, not guessed
// (window.lua). Nothing was written. Not ErrUnavailable, which the sale
// retries at once: the answer stands until the clocks agree again or both
// have passed the edge. A *ClockSkewError carries the skew.
var ErrClockSkew = errors.New("stock: the stock redis's clock is off this process's at an edge of the sale's window")

// ClockSkewError is a sale refused by ErrClockSkew.
type ClockSkewError struct {
	Skew time.Duration // Redis's clock less this process's, as the script saw them
}

func (e *ClockSkewError) Error() string {
	return fmt.Sprintf("%v (by %s)", ErrClockSkew, e.Skew)
}

// Unwrap lets errors.Is see ErrClockSkew.
func (e *ClockSkewError) Unwrap() error { return ErrClockSkew }

// IsWindowRefusal reports a sale refused at its window's check: outside
// the window, or at an edge the clocks disagree on.
func IsWindowRefusal(err error) bool {
	return errors.Is(err, ErrNotStarted) || errors.Is(err, ErrEnded) || errors.Is(err, ErrClockSkew)
}

func unixMS(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// FencedError is the store refusing a read or write under a lease that is no
// longer (or never was) the fence's current one. It wraps ErrFenced, and
// ErrTokenCollision when Collision is set.
type FencedError struct {
	Lock      string // the lease's lock identity
	Token     uint64 // the lease's token
	Highest   uint64 // the fence's highest token, when the read reported it (else 0)
	Collision bool   // another lease read under the same token
	// Returned: a reservation's unit came back to the stock after this
	// lease's read (nothing was written); the holder may read again.
	Returned bool
}

func (e *FencedError) Error() string {
	switch {
	case e.Collision:
		return fmt.Sprintf("%v: token %d of %q was also used by another lease: %v", ErrFenced, e.Token, e.Lock, ErrTokenCollision)
	case e.Highest > e.Token:
		return fmt.Sprintf("%v: token %d of %q is below the highest seen, %d", ErrFenced, e.Token, e.Lock, e.Highest)
	case e.Returned:
		return fmt.Sprintf("%v: a unit came back to the stock after the read under token %d of %q", ErrFenced, e.Token, e.Lock)
	default:
		return fmt.Sprintf("%v: token %d of %q is no longer the current reader", ErrFenced, e.Token, e.Lock)
	}
}

// Unwrap lets errors.Is see ErrFenced, and ErrTokenCollision on a collision.
func (e *FencedError) Unwrap() []error {
	if e.Collision {
		return []error{ErrFenced, ErrTokenCollision}
	}
	return []error{ErrFenced}
}

// Stale reports whether the lock handed out a token below the fence's
// high-water mark (a paused holder, or a lock service that forgot).
func (e *FencedError) Stale() bool { return e.Highest > e.Token }

// IsNewerFormat reports whether err is a refusal of a newer format: to the
// buyer it is unavailability (another replica may sell), but it is a
// definite answer, which no retry changes until this replica is
// upgraded. Retrying it (confirm) held the lock for the whole confirm
// deadline on every sale: the lab's newer-reset cell found it.
//
// A sale of another kind (ErrSaleKind) is the same: no retry sells in it.
func IsNewerFormat(err error) bool {
	return errors.Is(err, ErrSaleFormat) || errors.Is(err, ErrWitnessFormat) || errors.Is(err, ErrOrderFormat) ||
		errors.Is(err, ErrSaleKind)
}
