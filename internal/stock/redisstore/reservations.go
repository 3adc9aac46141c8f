package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

// reservations.go: a sale whose units are reserved until paid
// (docs/reservations.md). With a payment window (stock.LedgerArgs), the
// script that sells a unit also reserves its order until pay_by
// (ledger.lua); lifecycle.lua ends it: paid, cancelled or expired, the
// last two returning the unit to the stock. Every end is one script run,
// so each race has one outcome, and a unit goes back only on the move out
// of 'reserved', so at most once.
//
// A return raises the stock, which a locked sale writes as the value it
// read less what it sold: the return replaces the fence's reader, so a
// write that read before it is refused (ErrFenced, nothing sold) rather
// than overwriting it. The books become stock + lucky - returned =
// initial: lucky counts units taken and returned units given back, both
// only rising.
//
// A rewind is still caught (rewind.go): the ceilings are of the fresh
// stock, the stock less the units returned, which only falls.
//
// With durable states (WithDurableStates, ends.go) every end is also kept
// for MySQL. What is not done yet (docs/reservations.md, "Not yet"): the
// witness, and segments.

// Order states (lifecycle.lua).
const (
	StateReserved  = "reserved"
	StatePaid      = "paid"
	StateCancelled = "cancelled"
	StateExpired   = "expired"
)

// Errors of the lifecycle calls.
var (
	// ErrNoReservation: the order has no state, so it was sold without a
	// payment window, or is not an order of this sale.
	ErrNoReservation = errors.New("stock: the order has no reservation")
	// ErrPaymentReused: the payment id already paid another order.
	ErrPaymentReused = errors.New("stock: the payment id paid another order")
	// ErrNoReservations: the store cannot take units back (segmented
	// stock, or no ledger).
	ErrNoReservations = errors.New("stock: this sale cannot hold reservations")
)

// Ending is what a lifecycle call left an order in.
type Ending struct {
	State string // StatePaid, StateCancelled or StateExpired
	// Refund: the payment met an order that was no longer reserved, or
	// one another payment had paid; it is listed in the refunds owed
	// (Keys.Refunds) and the payment is not the order's.
	Refund bool
}

// WithReservations makes s a store whose units can come back: its
// rewind ceilings are then taken with the units returned that each sale's
// read found, since the stock no longer only falls (rewind.go). It
// returns s.
func (s *Store) WithReservations() *Store {
	s.mark.mu.Lock()
	s.mark.rising = true
	s.mark.mu.Unlock()
	return s
}

// WithDurableStates makes every end of a reservation also go into
// Keys.Ended, in the script that decides it, for orders.StateSyncer to
// copy to MySQL (orders.durable). Call it before s is used; it returns s.
func (s *Store) WithDurableStates() *Store {
	s.durableStates = true
	return s
}

// lifecycleKeys are lifecycle.lua's KEYS: the ended orders' set last,
// with durable states only.
func (s *Store) lifecycleKeys() []string {
	k := s.keys
	keys := []string{k.States, k.Due, k.Payments, k.Refunds, k.LifeNow, k.Stock, k.Returned, k.Fence, k.Halt}
	if s.durableStates {
		keys = append(keys, k.Ended)
	}
	return keys
}

func (s *Store) lifecycle(ctx context.Context, op string, args ...any) ([]any, error) {
	if !s.Ledger() || len(s.segs) > 1 {
		return nil, fmt.Errorf("%w: segments %d, ledger %t", ErrNoReservations, len(s.segs), s.Ledger())
	}
	cmd, wait := s.eval(ctx, lifecycleScript, s.lifecycleKeys(), append([]any{op}, args...)...)
	res, err := cmd.Slice()
	if err != nil {
		return nil, WrapRedis(ctx, "order "+op, err)
	}
	if len(res) < 2 {
		return nil, fmt.Errorf("stock: order %s: unexpected reply %v", op, res)
	}
	switch res[0] {
	case "halted":
		return nil, fmt.Errorf("stock: order %s: %w", op, stock.ErrStoreRewound)
	case "lost":
		return nil, fmt.Errorf("stock: order %s: %w", op, lost(s.keys.Stock))
	case "unknown":
		return nil, fmt.Errorf("stock: order %s: %w", op, ErrNoReservation)
	}
	// A return is a write a failover must not lose: with replica acks it
	// waits for them as a sale does.
	if err := s.acked(ctx, "order "+op, wait); err != nil {
		return res, err
	}
	return res, nil
}

// Pay pays order id with payment pid: paid while its deadline holds
// (inclusive), else the order expires first and the payment is owed back
// (Ending.Refund). Idempotent by pid: the same payment again answers the
// same; a pid that paid another order is ErrPaymentReused.
func (s *Store) Pay(ctx context.Context, id, pid string) (Ending, error) {
	if pid == "" {
		return Ending{}, fmt.Errorf("%w: empty payment id", stock.ErrBadBuyer)
	}
	res, err := s.lifecycle(ctx, "pay", id, pid)
	if err != nil {
		return Ending{}, err
	}
	state, detail := fmt.Sprint(res[0]), fmt.Sprint(res[1])
	if state == "reused" {
		return Ending{}, fmt.Errorf("%w: %s paid order %s", ErrPaymentReused, pid, detail)
	}
	return Ending{State: state, Refund: detail == "refund"}, nil
}

// Cancel cancels order id while it is reserved, returning its unit; else
// it answers the state that won (paid, expired, or cancelled before).
func (s *Store) Cancel(ctx context.Context, id string) (Ending, error) {
	res, err := s.lifecycle(ctx, "cancel", id)
	if err != nil {
		return Ending{}, err
	}
	return Ending{State: fmt.Sprint(res[0])}, nil
}

// Expiry is what one ExpireDue did and left.
type Expiry struct {
	Expired int64 // orders expired now, their units returned
	Next    int64 // the earliest deadline left, unix ms (0: none)
	Pending int64 // orders still reserved: units that may come back
}

// ExpireDue expires at most max orders whose deadline has passed by the
// reservations' clock, returning their units. Any number of replicas may
// call it at once: each order expires in one run.
func (s *Store) ExpireDue(ctx context.Context, max int) (Expiry, error) {
	if max < 1 {
		return Expiry{}, fmt.Errorf("stock: expire: batch %d, want at least 1", max)
	}
	res, err := s.lifecycle(ctx, "expire", max)
	if err != nil {
		return Expiry{}, err
	}
	var x Expiry
	if len(res) != 4 {
		return x, fmt.Errorf("stock: expire: unexpected reply %v", res)
	}
	x.Expired, _ = res[1].(int64)
	x.Pending, _ = res[3].(int64)
	if v := fmt.Sprint(res[2]); v != "" {
		if x.Next, err = strconv.ParseInt(v, 10, 64); err != nil {
			return x, fmt.Errorf("stock: expire: next deadline %q: %w", v, err)
		}
	}
	return x, nil
}

// Pending reads the orders still reserved and the earliest deadline
// (unix ms, 0: none), at one instant: what a sold-out answer says may
// come back, and when.
func (s *Store) Pending(ctx context.Context) (n int64, next int64, err error) {
	var card *redis.IntCmd
	var first *redis.ZSliceCmd
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		card = p.ZCard(ctx, s.keys.Due)
		first = p.ZRangeWithScores(ctx, s.keys.Due, 0, 0)
		return nil
	})
	if err != nil {
		return 0, 0, WrapRedis(ctx, "pending reservations", err)
	}
	if zs := first.Val(); len(zs) == 1 {
		next = int64(zs[0].Score)
	}
	return card.Val(), next, nil
}

// OrderState reads order id's state: StateReserved and its pay_by (unix
// ms), or an end with 0; ErrNoReservation when it has none.
func (s *Store) OrderState(ctx context.Context, id string) (string, int64, error) {
	v, err := s.rdb.HGet(ctx, s.keys.States, id).Result()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return "", 0, ErrNoReservation
		}
		return "", 0, WrapRedis(ctx, "order state", err)
	}
	state, rest, _ := strings.Cut(v, " ")
	if state == StateReserved {
		payBy, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			return "", 0, fmt.Errorf("stock: order %s: bad state %q", id, v)
		}
		return state, payBy, nil
	}
	return state, 0, nil
}

// Returned reads how many units reservations gave back in this sale.
func (s *Store) Returned(ctx context.Context) (int64, error) {
	v, err := s.rdb.Get(ctx, s.keys.Returned).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, WrapRedis(ctx, "returned", err)
	}
	return checkInt(v)
}
