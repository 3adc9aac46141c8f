package loadgen

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/api"
)

// lifecycle.go: each order of a reservation sale (RunReserve) checked
// on its own, as the history model asks: its lifecycle (reserved,
// then paid or expired) against what its buyer was told, and, on one
// clock, the times it was told them. An order's ops are few (a sale, at
// most one payment with its re-sends), so each order's check is a few
// comparisons; the counter's side (units taken and returned) is the
// census's (Census), not this.
//
// On one clock (ReserveConfig.SameClock) the reservations' clock, Redis's
// TIME trusted only forward, reads between a script's send and its
// answer. So:
//   - a sale's deadline is its script's time plus the window: no earlier
//     than the window after its first send, no later than after its
//     answer;
//   - a payment answered paid ran at its deadline's millisecond or
//     before: its first send was no later;
//   - a payment answered expired ran after it: its answer came after.

// orderLife is one order a buyer won, and what the buyer was told of it.
type orderLife struct {
	order string
	payBy int64 // as answered (unix ms); 0 on a replay, which carries none
	// sent is the first send of the sale's key, answered the answer that
	// named this order.
	sent, answered time.Time
	neverPays      bool
	// paySent is the payment's first send, payAnswered its last answer,
	// end what that answer said.
	paySent, payAnswered time.Time
	end                  api.OrderEnd
}

// newLife is the order of sale answer a, sent first at sent.
func newLife(a reserveAnswer, sent, answered time.Time, neverPays bool) orderLife {
	l := orderLife{order: a.body.Order, sent: sent, answered: answered, neverPays: neverPays}
	if a.body.PayBy != nil {
		l.payBy = *a.body.PayBy
	}
	return l
}

// Lifecycles is the per-order check of a reservation sale.
type Lifecycles struct {
	Orders int    `json:"orders"` // orders checked
	Broken int    `json:"broken"` // orders whose lifecycle broke a rule
	First  string `json:"first,omitempty"`
}

// checkLives reads each order at the end and checks its life; it
// returns the orders read, by id.
func (r *reserveRun) checkLives(ctx context.Context, lives []orderLife, into *Lifecycles) (map[string]api.Order, error) {
	orders := make(map[string]api.Order, len(lives))
	for _, l := range lives {
		o, ok := orders[l.order]
		if !ok {
			if err := r.get(ctx, "/orders/"+l.order, &o); err != nil {
				return orders, fmt.Errorf("order %s: %w", l.order, err)
			}
			orders[l.order] = o
		}
		into.Orders++
		if why := l.broken(o, r.cfg); why != "" {
			into.Broken++
			if into.First == "" {
				into.First = "order " + l.order + ": " + why
			}
		}
	}
	return orders, nil
}

// broken says which rule order o, as it ended, broke against l, or "".
func (l orderLife) broken(o api.Order, cfg ReserveConfig) string {
	switch {
	case l.neverPays:
		// A caller told of it (OnNeverPay) may have paid it.
		if cfg.OnNeverPay == nil && o.State != "expired" {
			return fmt.Sprintf("never paid, but %q at the end", o.State)
		}
	case l.end.State == "paid" && !l.end.Refund:
		if o.State != "paid" {
			return fmt.Sprintf("its payment was answered paid, but it is %q at the end", o.State)
		}
		if cfg.SameClock && l.payBy > 0 && l.paySent.UnixMilli() > l.payBy {
			return fmt.Sprintf("paid, but its payment was first sent at %d, after its deadline %d", l.paySent.UnixMilli(), l.payBy)
		}
	case l.end.State == "expired" && l.end.Refund:
		if o.State != "expired" {
			return fmt.Sprintf("its payment was answered expired, but it is %q at the end", o.State)
		}
		if cfg.SameClock && l.payBy > 0 && l.payAnswered.UnixMilli() <= l.payBy {
			return fmt.Sprintf("its payment was answered expired at %d, by its deadline %d", l.payAnswered.UnixMilli(), l.payBy)
		}
	default:
		return fmt.Sprintf("its only buyer's payment was answered %q (refund %t)", l.end.State, l.end.Refund)
	}
	if w := cfg.Window.Milliseconds(); cfg.SameClock && w > 0 && l.payBy > 0 {
		if at := l.payBy - w; at < l.sent.UnixMilli() || at > l.answered.UnixMilli() {
			return fmt.Sprintf("its deadline %d less the window %s is not between its sale's first send (%d) and its answer (%d)",
				l.payBy, cfg.Window, l.sent.UnixMilli(), l.answered.UnixMilli())
		}
	}
	return ""
}
