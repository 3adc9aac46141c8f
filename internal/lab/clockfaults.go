package lab

import (
	"context"
	"errors"
	"fmt"
	"time"

	"seckill/internal/api"
	"seckill/internal/lab/loadgen"
	"seckill/internal/servers"
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
	var rep *loadgen.Report
	var stepped time.Time
	lasts := windowLasts
	for i, try := range windowTries {
		if i > 0 {
			x.notef("%s: the %v window sold nothing (every try inside it unanswered in time: a loaded machine): redone with a %v window",
				labItemClock, lasts, try)
			if err := errors.Join(clock.Set(0), x.dropItems(labItemClock)); err != nil {
				return err
			}
		}
		lasts = try
		var err error
		if rep, stepped, err = x.clockBackOnce(clock, lasts); err != nil {
			return err
		}
		if rep.Sold > 0 || !rep.OK() {
			break
		}
	}
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

// clockBackOnce runs the item-clock-back cell's load over a window of
// lasts, stepping the stock Redis's clock back clockBackAfter its end,
// and returns the report and when it stepped.
func (x *run) clockBackOnce(clock *servers.ShiftedClock, lasts time.Duration) (*loadgen.Report, time.Time, error) {
	now := time.Now()
	ends := now.Add(windowOpens + lasts)
	cfg := x.itemRun(labItemClock, loadgen.Config{Stock: windowStock, Rate: windowRate, Duration: clockBackFor + lasts - windowLasts,
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
			return nil, stepped, fmt.Errorf("step the stock Redis's clock: %w", err)
		}
		stepped = time.Now()
	}
	r := <-done
	if r.err != nil {
		return nil, stepped, r.err
	}
	if stepped.IsZero() {
		return nil, stepped, x.ctx.Err()
	}
	return r.rep, stepped, nil
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
		// fenced, busy or lock_lost: nothing was sold, try again. The
		// replica held across the lock's jump answers its first sales
		// with a stale fence, and a buyer sends again, as here, until the
		// replay (or anything else, judged below) comes.
		for tries := 1; tries < maxReplayTries && tryAgain(r) && x.ctx.Err() == nil; tries++ {
			r = x.load.resolve(x.ctx, url, b.i, b.p, true)
		}
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

// maxReplayTries bounds the sends of one keyed purchase after the clock
// jump: answers that sold nothing and ask for another try (tryAgain) come
// from the one replica whose lock went stale, a few at most.
const maxReplayTries = 20

// tryAgain: r sold nothing and says to send again.
func tryAgain(r response) bool {
	return r.Result == api.Fenced || r.Result == api.Busy || r.Result == api.LockLost
}

// isItemsCell reports whether scenario sells items of its own (scenario's
// items), as the item cells beside itemScenarios do.
func isItemsCell(scenario string) bool { return scenarios[scenario].items }

// checkClockJump: on redis, the write held across the lock Redis's jump
// landed after another holder's and must have been refused by the fence.
func checkClockJump(x *run) {
	if x.cell.Backend == "redis" && x.res.Fenced == 0 {
		x.problemf("no write was fenced: the one held across the lock Redis's jump, behind a newer holder's, must be")
	}
}

// The failover-clock cell: an item sold on a Sentinel set whose replica's
// clock is failoverSkew ahead. failoverClockKill after the opening the
// primary is killed (the replica, ahead, is promoted); the old primary
// comes back failoverSkew behind, and the new primary is killed in turn
// (the one behind is promoted), all inside the window, which then ends
// with buyers still trying.
const (
	failoverSkew      = time.Minute
	failoverClockKill = 2 * time.Second
	failoverClockOpen = 14 * time.Second // the window's length
	failoverClockRate = 40
	labItemFailover   = "lab-failover-clock"
)

// runFailoverClock: a failover to a primary whose clock is ahead must not
// end the item early (nor latch its end), and one to a primary behind must
// not sell after the end or send it back to not_started. Every answer is
// judged by the advertised window on the lab's clock; the primaries whose
// clocks are off answer clock_skew where the clocks disagree.
func runFailoverClock(x *run) error {
	set := x.sentinel
	if set == nil {
		return errors.New("no Sentinel set")
	}
	ahead, behind := set.Clock(set.Replica), set.Clock(set.Primary)
	if ahead == nil || behind == nil {
		return errors.New("the Sentinel set's nodes have no steppable clocks")
	}
	x.res.Failover = &Failover{Acks: x.cell.Acks}
	ctx, cancel := x.until()
	defer cancel()
	if err := ahead.Set(failoverSkew); err != nil {
		return err
	}
	if err := set.WaitReplicated(ctx, 1); err != nil {
		return fmt.Errorf("the replica, its clock ahead, is not replicating: %w", err)
	}
	now := time.Now()
	opens := now.Add(windowOpens)
	cfg := x.itemRun(labItemFailover, loadgen.Config{Stock: windowStock, Rate: failoverClockRate,
		Duration: windowOpens + failoverClockOpen + 3*time.Second, StartsAt: opens, EndsAt: opens.Add(failoverClockOpen)})
	type result struct {
		rep *loadgen.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := loadgen.Run(x.ctx, cfg)
		done <- result{rep, err}
	}()
	ferr := x.failoverTwice(ctx, opens.Add(failoverClockKill), behind)
	r := <-done
	if ferr != nil {
		return ferr
	}
	if r.err != nil {
		return r.err
	}
	rep := r.rep
	it := x.addItem(labItemFailover, "window", rep)
	// Acknowledged sales lost: sold answers the item's lucky count, read on
	// the last primary, does not hold.
	x.res.Failover.Lost = max(0, it.Sold-int(it.Lucky))
	checkFailover(x)
	w := rep.Window
	if !rep.OK() {
		x.problemf("%s: verdict %q: %s", labItemFailover, it.Verdict, w.Text())
	}
	skewed, results := 0, map[string]int{}
	for _, a := range rep.Answers {
		if a.Result == api.ClockSkew {
			skewed++
		}
		results[fmt.Sprintf("%s/%d", a.Result, a.Status)]++
	}
	if skewed == 0 {
		x.problemf("%s: no clock_skew answer: the primaries whose clocks are off were not put to the test", labItemFailover)
	}
	if it.Sold == 0 {
		x.problemf("%s: nothing sold in the window", labItemFailover)
	}
	x.notef("%s: primary killed %v after the opening, replica %v ahead promoted; old primary back %v behind, promoted in turn: %d sold, %d ended, %d clock_skew, %d not_started; misplaced: sold %d, ended early %d, not_started late %d; answers %v",
		labItemFailover, failoverClockKill, failoverSkew, failoverSkew, it.Sold, it.Ended, skewed, it.NotStarted, w.SoldOutside, w.EndedEarly, w.NotStartedLate, results)
	return nil
}

// failoverTwice kills the Sentinel set's primary at at, brings it back
// behind (its clock set there first) as a replica of the promoted one,
// and kills that in turn: both failovers must happen.
func (x *run) failoverTwice(ctx context.Context, at time.Time, behind *servers.ShiftedClock) error {
	set := x.sentinel
	if !x.at(at) {
		return x.ctx.Err()
	}
	for turn := range 2 {
		switched, err := set.WatchSwitch(ctx)
		if err != nil {
			return err
		}
		master, err := set.Master(ctx)
		if err != nil {
			return err
		}
		old := set.Node(master)
		if err := old.Kill(); err != nil {
			return fmt.Errorf("kill %s: %w", old.Name(), err)
		}
		killedAt := time.Now()
		newPrimary, ok := <-switched
		if !ok {
			return fmt.Errorf("failover %d: the Sentinels did not all switch: %w", turn+1, ctx.Err())
		}
		took := time.Since(killedAt)
		x.notef("failover %d: %s killed, all Sentinels on %s in %dms", turn+1, old.Name(), newPrimary, ms(took))
		if turn == 0 {
			// Dead, so no running server sees its clock step.
			if err := behind.Set(-failoverSkew); err != nil {
				return err
			}
		}
		if err := set.Rejoin(ctx, old); err != nil {
			return fmt.Errorf("bring back %s: %w", old.Name(), err)
		}
		if turn == 0 {
			x.res.Failover.SwitchMS, x.res.Failover.RejoinMS = ms(took), ms(time.Since(killedAt))
		}
	}
	return nil
}
