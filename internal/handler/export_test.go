package handler

import "time"

// The admin bound: failed admin tries a minute, and at once.
const (
	AdminBurst     = adminBurst
	AdminPerMinute = adminPerMinute
)

// SetNow replaces the admin bound's clock until the returned restore.
func SetNow(f func() time.Time) (restore func()) {
	prev := now
	now = f
	return func() { now = prev }
}

// ParseBuyer is the reading of X-User and Idempotency-Key.
var ParseBuyer = buyerHeaders
