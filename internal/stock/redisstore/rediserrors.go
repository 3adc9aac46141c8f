package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

// unavailablePrefixes are Redis error replies that mean "not serving right
// now" rather than "your command is wrong", so they count as unavailability.
// MOVED and ASK reach the store only from a Redis Cluster node it sent a
// run to itself (ackClient): refused before running, as the rest.
var unavailablePrefixes = []string{"LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "BUSY ", "MOVED ", "ASK "}

// WrapRedis classifies a go-redis error. A caller's own cancellation stays a
// context error (the client left; there is nothing to report as "down"); a
// server reply error stays as it is (a bug, not an outage); everything else —
// dial failures, timeouts, broken connections, an exhausted pool — is the
// dependency being unreachable.
func WrapRedis(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("stock: %s: %w", op, err)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		if strings.HasPrefix(rerr.Error(), "OOM ") {
			return fmt.Errorf("%w: %s: %w", stock.ErrOutOfMemory, op, err)
		}
		for _, p := range unavailablePrefixes {
			if strings.HasPrefix(rerr.Error(), p) {
				return fmt.Errorf("%w: %s: %w", stock.ErrUnavailable, op, err)
			}
		}
		return fmt.Errorf("stock: %s: %w", op, err)
	}
	return fmt.Errorf("%w: %s: %w", stock.ErrUnavailable, op, err)
}

// windowCode is the error of a window check's result (results.go), nil
// for a result that is not one: early, ended or skewed, and bound the
// edge (unix ms) or the skew (ms).
func windowCode(code, bound int64) error {
	switch code {
	case resultEarly, resultEnded:
		return stock.WindowRefusal(code == resultEarly, bound)
	case resultSkewed:
		return &stock.ClockSkewError{Skew: time.Duration(bound) * time.Millisecond}
	}
	return nil
}
