package lab

import (
	"errors"
	"fmt"
	"time"

	"seckill/internal/api"
	"seckill/internal/lab/loadgen"
)

// clockfaults.go: the cells whose fault is a clock that steps. The stock
// Redis and the lock Redis run on clocks the cell moves (localcluster's
// StockClock, LockClock); the stockd processes and the lab keep the
// machine's, which is the true time the advertised window is judged by.

// clockScenarios run on redis and etcd: the fault is the stock Redis's
// clock (the lock Redis's too on redis, whose lock lives by it).
var clockScenarios = []string{"item-clock-back", "clock-jump"}

// The item-clock-back cell: the item-window cell's window and buyers, the
// load running on past the end, and the stock Redis's clock stepped back
// clockBack (beyond stock.max_clock_skew, 1s) clockBackAfter the end: by
// Redis's clock the item is open again.
const (
	clockBack      = 2500 * time.Millisecond
	clockBackAfter = 500 * time.Millisecond
	clockBackFor   = 6 * time.Second
	labItemClock   = "lab-clock"
)

// The clock-jump cell: the stock Redis's clock jumps past
// stock.idempotency_ttl (24h) and every receipt's life, the lock Redis's
// past the lock's TTL with a write held on the wire.
const (
	clockJump     = 25 * time.Hour
	clockJumpKeys = 10 // purchases sent before the jump and again after it
)

// runItemClockBack: an item that ended must stay ended when the stock
// Redis's clock steps back. Every answer is judged by the advertised
// window on the lab's clock (loadgen's Window, offsets read before the
// run): no sale after the end, however Redis's clock reads; and buyers
// must have tried after the step.
func runItemClockBack(x *run) error {
	clock := x.c.StockClock()
	if clock == nil {
		return errors.New("the stock Redis has no steppable clock (the fault layer is off)")
	}
	if err := x.dropItems(labItemClock); err != nil {
		return err
	}
	x.undo = append(x.undo, func() error { return x.dropItems(labItemClock) }, func() error { return clock.Set(0) })
	now := time.Now()
	ends := now.Add(windowOpens + windowLasts)
	cfg := x.itemRun(labItemClock, loadgen.Config{Stock: windowStock, Rate: windowRate, Duration: clockBackFor,
		StartsAt: now.Add(windowOpens), EndsAt: ends})
	type result struct {
		rep *loadgen.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := loadgen.Run(x.ctx, cfg)
		done <- result{rep, err}
	}()
	var stepped time.Time
	if x.at(ends.Add(clockBackAfter)) {
		if err := clock.Step(-clockBack); err != nil {
			<-done
			return fmt.Errorf("step the stock Redis's clock: %w", err)
		}
		stepped = time.Now()
	}
	r := <-done
	if r.err != nil {
		return r.err
	}
	if stepped.IsZero() {
		return x.ctx.Err()
	}
	rep := r.rep
	it := x.addItem(labItemClock, "window", rep)
	w := rep.Window
	if !rep.OK() {
		x.problemf("%s: verdict %q: %s", labItemClock, it.Verdict, w.Text())
	}
	var after, ended, sold int
	for _, a := range rep.Answers {
		if !a.Sent.After(stepped) {
			continue
		}
		after++
		switch a.Result {
		case api.Ended:
			ended++
		case api.Sold:
			sold++
		}
	}
	if after == 0 {
		x.problemf("%s: no buyer tried after the clock stepped back: the fault was not put to the test", labItemClock)
	}
	if it.Sold == 0 || it.Ended == 0 {
		x.problemf("%s: %d sold, %d ended: want both (the window sold, and its end was seen)", labItemClock, it.Sold, it.Ended)
	}
	x.notef("%s: stock Redis's clock stepped back %v, %v after the end: %d tries after the step, %d ended, %d sold; in all %d sold, %d ended, %d misplaced sold (clock bound %.1fms)",
		labItemClock, clockBack, clockBackAfter, after, ended, sold, it.Sold, it.Ended, w.SoldOutside, w.OffsetMaxMS-w.OffsetMinMS)
	return nil
}

// runClockJump: keyed purchases made before the stock Redis's clock jumps
// a day forward are replayed after it, not sold again (their records and
// receipts live by the sales' clock); on redis, the lock Redis's clock
// jumps past the lock's TTL while a write is held on the wire, another
// replica takes the lock and sells, and the held write must be fenced (the
// cell's books and history say whether it was).
func runClockJump(x *run) error {
	stockClock, lockClock := x.c.StockClock(), x.c.LockClock()
	if stockClock == nil || lockClock == nil {
		return errors.New("the Redis servers have no steppable clocks (the fault layer is off)")
	}
	x.undo = append(x.undo, func() error { return errors.Join(stockClock.Set(0), lockClock.Set(0)) })
	url := x.c.URL() + "/stock/reduce"
	type sent struct {
		i int
		p loadgen.Purchase
		r response
	}
	var before []sent
	for range clockJumpKeys {
		i, p := x.load.plan.extra("j")
		r := x.load.resolve(x.ctx, url, i, p, false)
		if x.ctx.Err() != nil {
			return x.ctx.Err()
		}
		if r.sold() {
			before = append(before, sent{i, p, r})
		}
	}
	if len(before) == 0 {
		x.problemf("none of %d keyed purchases sold before the jump: nothing to replay", clockJumpKeys)
	}
	if err := stockClock.Step(clockJump); err != nil {
		return fmt.Errorf("step the stock Redis's clock: %w", err)
	}
	x.faultEnd = time.Now()
	if lr := x.c.LockRedis(); lr != nil && x.c.LockServer() == lr {
		// The lock lives by the lock Redis's clock: three leases on, the
		// held holder's key is gone and another replica gets in.
		var worst time.Duration
		jump := func() error { return lockClock.Step(3*x.lease + time.Second) }
		if err := x.forgetOnce(jump, 1, &worst); err != nil {
			return err
		}
		x.recovered = x.faultEnd.Add(worst)
		x.notef("lock Redis's clock jumped %v with a write held: another replica sold %dms later", 3*x.lease+time.Second, ms(worst))
	}
	replayed := 0
	for _, b := range before {
		r := x.load.resolve(x.ctx, url, b.i, b.p, true)
		if x.ctx.Err() != nil {
			return x.ctx.Err()
		}
		switch {
		case r.sold() && r.Replayed && r.Order == b.r.Order:
			replayed++
		case r.sold():
			x.problemf("key %s after the jump: order %s (replayed %v), want a replay of %s", b.p.Key, r.Order, r.Replayed, b.r.Order)
		default:
			x.problemf("key %s after the jump: %s (%d), want a replay of %s", b.p.Key, r.Result, r.Status, b.r.Order)
		}
	}
	x.notef("stock Redis's clock jumped %v: %d of %d keyed purchases replayed their order, 0 sold again wanted", clockJump, replayed, len(before))
	return nil
}

// isItemsCell reports whether scenario sells items of its own (scenario's
// items), as the item cells beside itemScenarios do.
func isItemsCell(scenario string) bool { return scenarios[scenario].items }
