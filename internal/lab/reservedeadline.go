package lab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/backoff"
	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/servers"
	"seckill/internal/stock/redisstore"
)

// reservedeadline.go: reserve-deadline, payments in their deadline's
// millisecond and in the one after it (docs/reservations.md, "A deadline
// is inclusive").
//
// A payment cannot be sent to land in a given millisecond of Redis's
// clock, so the cell stops the reservations' clock there instead: the
// stock Redis's own clock steps reserveHold back, below the clock's
// high-water mark, which every script then reads as "now"
// (lifeclock.lua), and the cell sets that mark to a deadline. Every
// script of the sale — sales, payments, the expirers' runs — then runs
// in that one millisecond, for as long as the cell needs. This is the
// clock stepped forward to the deadline exactly, then back; the
// reservations' clock only moves forward.
//
// Two orders won by buyers that never pay them, a and c, a's deadline
// the earlier:
//   - at a's deadline, every replica's expirer runs twice (their runs
//     counted, seckill_expirer_runs_total) and must leave a reserved; a
//     payment then must pay it;
//   - one millisecond past c's deadline, a payment, racing the
//     expirers, must find c expired (by an expirer or by itself) and be
//     answered so, its money owed back: never paid.
//
// Then the census as in every reservation cell: every unit back once,
// paid once.

// deadlineOrder is a never-paid order still reserved, and its deadline
// by the store.
type deadlineOrder struct {
	loadgen.NeverPaid
	payBy int64
}

func runReserveDeadline(x *run) error {
	clock := x.c.StockClock()
	if clock == nil {
		return errors.New("the stock Redis has no steppable clock (the fault layer is off)")
	}
	x.undo = append(x.undo, func() error { return clock.Set(0) })
	return x.reserveSale(func(st reserveStage) error {
		err := x.payAtDeadlines(st, clock)
		return errors.Join(err, clock.Set(0))
	})
}

// payAtDeadlines stops the reservations' clock with two never-paid
// orders reserved, and pays each at its deadline's edge.
func (x *run) payAtDeadlines(st reserveStage, clock *servers.ShiftedClock) error {
	ctx, cancel := x.until()
	defer cancel()
	a, c, err := x.holdTwo(ctx, st, clock)
	if err != nil {
		return err
	}

	// At a's deadline.
	if err := st.rdb.Set(ctx, st.keys.LifeNow, a.payBy, 0).Err(); err != nil {
		return err
	}
	if err := x.expirersRan(ctx, 2); err != nil {
		return err
	}
	if state, err := st.rdb.HGet(ctx, st.keys.States, a.Order).Result(); err != nil || state != fmt.Sprintf("reserved %d", a.payBy) {
		x.problemf("at order %s's deadline (%d), after the expirers ran, its state is %q (%v), not reserved: a deadline is inclusive", a.Order, a.payBy, state, err)
	}
	atEnd, err := loadgen.Pay(ctx, x.c.URL(), a.Buyer, a.Order, "lab-"+a.Order)
	if err != nil {
		return fmt.Errorf("pay %s at its deadline: %w", a.Order, err)
	}
	if end := atEnd; end.State == redisstore.StatePaid && !end.Refund {
		x.res.Reservations.LabPaid++
	} else {
		x.problemf("a payment in order %s's deadline millisecond was answered %s (refund %t), not paid", a.Order, end.State, end.Refund)
	}

	// One millisecond past c's.
	if err := st.rdb.Set(ctx, st.keys.LifeNow, c.payBy+1, 0).Err(); err != nil {
		return err
	}
	end, err := loadgen.Pay(ctx, x.c.URL(), c.Buyer, c.Order, "lab-"+c.Order)
	if err != nil {
		return fmt.Errorf("pay %s past its deadline: %w", c.Order, err)
	}
	if end.State != redisstore.StateExpired || !end.Refund {
		x.problemf("a payment 1 ms past order %s's deadline was answered %s (refund %t), not expired with a refund", c.Order, end.State, end.Refund)
	}
	x.notef("a payment at order %s's deadline %d: %s (refund %t); at %d, 1 ms past order %s's: %s (refund %t)",
		a.Order, a.payBy, atEnd.State, atEnd.Refund, c.payBy+1, c.Order, end.State, end.Refund)
	return nil
}

// holdTwo steps the stock Redis's clock back (reserveHold) so that the
// reservations' clock holds still, with two never-paid orders still
// reserved past it: a, the earlier deadline, and c. Each try waits for
// two more such orders, and lets the clock go again when they expired
// first.
func (x *run) holdTwo(ctx context.Context, st reserveStage, clock *servers.ShiftedClock) (a, c deadlineOrder, err error) {
	var won []loadgen.NeverPaid
	for try := range reserveDeadlineTries {
		for n := len(won) + 2; len(won) < n; {
			select {
			case np := <-st.neverPaid:
				won = append(won, np)
			case <-st.done:
				return a, c, fmt.Errorf("the sale ended with %d never-paid orders, before two were reserved when the clock stopped (%d tries)", len(won), try)
			case <-ctx.Done():
				return a, c, ctx.Err()
			}
		}
		if err := clock.Set(-reserveHold); err != nil {
			return a, c, err
		}
		held, err := reservedPast(ctx, st, won)
		if err != nil {
			return a, c, err
		}
		if len(held) >= 2 {
			return held[0], held[len(held)-1], nil
		}
		if err := clock.Set(0); err != nil {
			return a, c, err
		}
	}
	return a, c, fmt.Errorf("in %d tries, never two never-paid orders reserved past the reservations' clock when it stopped", reserveDeadlineTries)
}

// reservedPast reads the reservations' clock and the states of won,
// and returns those still reserved with a deadline past that clock, by
// deadline.
func reservedPast(ctx context.Context, st reserveStage, won []loadgen.NeverPaid) ([]deadlineOrder, error) {
	now, err := st.rdb.Get(ctx, st.keys.LifeNow).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	ids := make([]string, len(won))
	for i, np := range won {
		ids[i] = np.Order
	}
	states, err := st.rdb.HMGet(ctx, st.keys.States, ids...).Result()
	if err != nil {
		return nil, err
	}
	var held []deadlineOrder
	for i, v := range states {
		s, _ := v.(string)
		rest, ok := strings.CutPrefix(s, redisstore.StateReserved+" ")
		if !ok {
			continue
		}
		payBy, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("order %s: state %q: %w", ids[i], s, err)
		}
		if payBy > now {
			held = append(held, deadlineOrder{NeverPaid: won[i], payBy: payBy})
		}
	}
	slices.SortFunc(held, func(p, q deadlineOrder) int { return int(p.payBy - q.payBy) })
	return held, nil
}

// expirersRan waits until every replica's expirer has finished n more
// runs (seckill_expirer_runs_total): with n 2, a whole run began after
// the call, whatever ran meanwhile.
func (x *run) expirersRan(ctx context.Context, n int) error {
	runs := func(i int) int {
		return counterSum(ctx, []string{x.c.ReplicaURL(i)}, "seckill_expirer_runs_total", map[string]string{"result": "ok"})
	}
	for i := range x.c.Replicas() {
		from := runs(i)
		if from < 0 {
			return fmt.Errorf("%s's metrics unread", localcluster.ReplicaName(i))
		}
		poll := backoff.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}
		for runs(i) < from+n {
			if err := poll.Wait(ctx); err != nil {
				return fmt.Errorf("%s's expirer did not run %d times: %w", localcluster.ReplicaName(i), n, err)
			}
		}
	}
	return nil
}
