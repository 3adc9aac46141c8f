package handler

import "time"

// SetNow replaces the admin back-off's clock until the returned restore.
func SetNow(f func() time.Time) (restore func()) {
	prev := now
	now = f
	return func() { now = prev }
}

// ParseBuyer is the reading of X-User and Idempotency-Key.
var ParseBuyer = buyerHeaders
