package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// census.go: the reservation invariants (docs/reservations.md,
// "Invariants"), read from what the scripts wrote rather than from what
// any buyer was told, so that a lost reply or a killed replica cannot
// hide a unit returned twice or a payment that paid two orders.

// Census is a reservation sale's orders counted by state, and its
// counters, read at one instant (one MULTI).
type Census struct {
	Reserved, Paid, Cancelled, Expired int64
	// Other counts states no script writes: a corrupt record.
	Other                           int64
	Stock, Lucky, Returned, Initial int64
	// Misfiled lists paid orders whose payment id does not name them in
	// the payments hash (a payment id used for two orders).
	Misfiled []string
}

// Problems lists the invariants c breaks, each worded for an operator;
// none when the reservations are sound:
//   - stock + reserved + paid = initial (each unit is on sale, held, or sold);
//   - reserved + paid + cancelled + expired = lucky (each unit taken has
//     an order with a state);
//   - cancelled + expired = returned (each return matches one order that
//     ended without payment);
//   - every paid order is its payment id's only order.
func (c Census) Problems() []string {
	var out []string
	if c.Stock+c.Reserved+c.Paid != c.Initial {
		out = append(out, fmt.Sprintf("stock %d + reserved %d + paid %d = %d, not the initial %d",
			c.Stock, c.Reserved, c.Paid, c.Stock+c.Reserved+c.Paid, c.Initial))
	}
	if n := c.Reserved + c.Paid + c.Cancelled + c.Expired + c.Other; n != c.Lucky {
		out = append(out, fmt.Sprintf("%d orders with a state, %d units taken (lucky)", n, c.Lucky))
	}
	if c.Cancelled+c.Expired != c.Returned {
		out = append(out, fmt.Sprintf("cancelled %d + expired %d = %d orders ended unpaid, %d units returned",
			c.Cancelled, c.Expired, c.Cancelled+c.Expired, c.Returned))
	}
	if c.Other > 0 {
		out = append(out, fmt.Sprintf("%d orders in no known state", c.Other))
	}
	if len(c.Misfiled) > 0 {
		out = append(out, fmt.Sprintf("%d paid orders whose payment id names another order: %s",
			len(c.Misfiled), strings.Join(c.Misfiled[:min(len(c.Misfiled), 5)], ", ")))
	}
	return out
}

// Census reads the sale's orders by state and its books in one MULTI,
// then checks each paid order's payment id (a payment id, once it names
// an order, names it for good). It reads every order's state: an audit,
// for a lab cell or an operator, not the sale path.
func (s *Store) Census(ctx context.Context) (Census, error) {
	if !s.Ledger() || len(s.segs) > 1 {
		return Census{}, fmt.Errorf("%w: segments %d, ledger %t", ErrNoReservations, len(s.segs), s.Ledger())
	}
	k := s.keys
	var states *redis.MapStringStringCmd
	var nums [4]*redis.StringCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		states = p.HGetAll(ctx, k.States)
		for i, key := range []string{k.Stock, k.Lucky, k.Returned, k.Initial} {
			if key != "" {
				nums[i] = p.Get(ctx, key)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Census{}, WrapRedis(ctx, "census", err)
	}
	var c Census
	for i, dst := range []*int64{&c.Stock, &c.Lucky, &c.Returned, &c.Initial} {
		if nums[i] == nil {
			// No initial key configured: the books' own sum stands in,
			// and the first invariant then checks reserved + paid =
			// lucky - returned.
			c.Initial = c.Stock + c.Lucky - c.Returned
			continue
		}
		v, err := nums[i].Result()
		if errors.Is(err, redis.Nil) {
			continue // missing: 0 (no return yet; no initial key configured)
		}
		if *dst, err = strconv.ParseInt(v, 10, 64); err != nil {
			return Census{}, fmt.Errorf("stock: census: %q: %w", v, err)
		}
	}
	paid := map[string]string{} // payment id -> order id
	for id, st := range states.Val() {
		name, rest, _ := strings.Cut(st, " ")
		switch name {
		case StateReserved:
			c.Reserved++
		case StatePaid:
			c.Paid++
			paid[rest] = id
		case StateCancelled:
			c.Cancelled++
		case StateExpired:
			c.Expired++
		default:
			c.Other++
		}
	}
	if len(paid) < int(c.Paid) {
		c.Misfiled = append(c.Misfiled, fmt.Sprintf("%d paid orders share a payment id", int(c.Paid)-len(paid)))
	}
	if len(paid) == 0 {
		return c, nil
	}
	pids := make([]string, 0, len(paid))
	for pid := range paid {
		pids = append(pids, pid)
	}
	got, err := s.rdb.HMGet(ctx, k.Payments, pids...).Result()
	if err != nil {
		return c, WrapRedis(ctx, "census payments", err)
	}
	for i, v := range got {
		if id, _ := v.(string); id != paid[pids[i]] {
			c.Misfiled = append(c.Misfiled, paid[pids[i]])
		}
	}
	return c, nil
}
