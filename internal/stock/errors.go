package stock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors. Store and Service wrap them with context; callers test with
// errors.Is. The HTTP layer maps each to a status in one place.
var (
	// ErrSoldOut: the stock is zero, nothing was written.
	ErrSoldOut = errors.New("stock: sold out")

	// ErrFenced: a holder with a newer fencing token has read the stock since
	// this lease did, or the fence was reset; the write was refused.
	ErrFenced = errors.New("stock: fenced")

	// ErrMixedBackends: the fence was recorded by a different lock backend.
	// Replicas that use different locks do not exclude each other, and their
	// tokens do not compare, so the store refuses to guess.
	ErrMixedBackends = errors.New("stock: mixed lock backends")

	// ErrLockLost: the lease was lost during the sale; nothing was written.
	ErrLockLost = errors.New("stock: lock lost before write")

	// ErrBusy: the lock was not obtained within the wait timeout.
	ErrBusy = errors.New("stock: lock busy")

	// ErrUnavailable: the stock Redis could not be reached or is not serving.
	ErrUnavailable = errors.New("stock: redis unavailable")
)

// unavailablePrefixes are Redis error replies that mean "not serving right
// now" rather than "your command is wrong", so they count as unavailability.
var unavailablePrefixes = []string{"LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "BUSY "}

// wrapRedis classifies a go-redis error. A caller's own cancellation stays a
// context error (the client left; there is nothing to report as "down"); a
// server reply error stays as it is (a bug, not an outage); everything else —
// dial failures, timeouts, broken connections, an exhausted pool — is the
// dependency being unreachable.
func wrapRedis(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("stock: %s: %w", op, err)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		for _, p := range unavailablePrefixes {
			if strings.HasPrefix(rerr.Error(), p) {
				return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
			}
		}
		return fmt.Errorf("stock: %s: %w", op, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}
