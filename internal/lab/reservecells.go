package lab

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/backoff"
	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stockd"
)

// reservecells.go: the reservation cells (docs/reservations.md), on redis
// and etcd. Each runs the demo's reservation sale (loadgen.RunReserve:
// reserveBuyers buyers for reserveStock units, every third winner never
// paying, so that its unit expires and sells again) under a fault aimed
// at a reservation's one-outcome rule. Once every reservation has ended,
// the census of every order's state (redisstore.Census) judges it: no
// unit returned twice or paid twice, each unit on sale or sold, and every
// buyer told "paid" is one paid order. The census reads what the scripts
// wrote, so an answer the fault cut cannot hide a break.

// reserveScenarios are the reservation cells' scenarios.
var reserveScenarios = []string{"reserve-race", "reserve-lostreply", "reserve-kill", "reserve-durable", "reserve-clock", "reserve-deadline"}

// reserveClockCells step the stock Redis's clock: the buyers' times
// cannot judge its deadlines there (loadgen.ReserveConfig.SameClock).
var reserveClockCells = []string{"reserve-clock", "reserve-deadline"}

// reserveBackends run them: the Redis lock and one of another family.
var reserveBackends = []string{"redis", "etcd"}

// The reservation cells' sale: more buyers than units, a third of the
// winners never paying, orders.payment_window 1 s (its least).
const (
	reserveStock       = 60
	reserveBuyers      = 120
	reserveNeverPay    = 3
	reserveWindow      = time.Second
	reserveConcurrency = 12
	// reserveLoss is reserve-lostreply's share of replies lost.
	reserveLoss = 0.03
	// reserveRaceWork is reserve-race's business time per sale: a read
	// and its write that far apart on the one lock, while the first
	// units' deadlines pass and their returns land.
	reserveRaceWork = 50 * time.Millisecond
	// reserveClockStep is how far reserve-clock steps the stock Redis's
	// clock, forward and back: past every deadline held (the window).
	reserveClockStep = 3 * time.Second
	// reserveClockSales are the sales waited for on the stepped clock
	// before it steps back.
	reserveClockSales = 3
	// reserveHold is how far reserve-deadline steps the stock Redis's
	// clock back, so that the reservations' clock (its high-water)
	// holds still while the cell pays: longer than the cell's steps.
	reserveHold = 10 * time.Second
	// reserveLagPayments are the payments reserve-failover waits for on
	// the primary while its replica is starved, before the kill.
	reserveLagPayments = 2
	// reserveDeadlineTries bounds reserve-deadline's tries at holding
	// two never-paid orders still reserved when the clock stops.
	reserveDeadlineTries = 5
)

// reserveEnv is what the reservation cells add to stockd's settings: the
// ledger, no per-user limit (a buyer whose payment came too late buys
// again), and the payment window.
func reserveEnv(c *stockd.Config) {
	c.Stock.Ledger, c.Stock.PerUserLimit, c.Orders.PaymentWindow = true, 0, reserveWindow
}

// saleKeys are the reservation cells' sale's keys: stockd's defaults, the
// ledger's among them (the lab's replicas name no keys of their own).
func saleKeys() (redisstore.Keys, error) {
	cfg, err := stockd.Load("", nil)
	if err != nil {
		return redisstore.Keys{}, fmt.Errorf("stockd's defaults: %w", err)
	}
	reserveEnv(cfg)
	return stockd.SaleKeys(cfg), nil
}

// IsReserve reports whether scenario is a reservation cell's.
func IsReserve(scenario string) bool { return scenarios[scenario].reserve }

// Reservations is a reservation cell's measure (Result.Reservations).
type Reservations struct {
	Report *loadgen.ReserveReport `json:"report,omitempty"`
	Census *redisstore.Census     `json:"census,omitempty"`
	// ReadsAgain counts the sections that read again after a return
	// landed between their read and their write (read_after_return).
	ReadsAgain int `json:"reads_again"`
	// LabPaid counts the orders the cell paid itself (reserve-deadline),
	// answered paid: the census's paid orders are the buyers' and these.
	LabPaid int `json:"lab_paid,omitempty"`
}

// reserveStage is what a cell's stage gets: the stock Redis, the sale's
// keys there, done, closed when every buyer has ended, and neverPaid,
// each order won by a buyer that will not pay it, as it is answered.
type reserveStage struct {
	rdb       *redis.Client
	keys      redisstore.Keys
	done      <-chan struct{}
	neverPaid <-chan loadgen.NeverPaid
}

// reserveSale runs the cell's sale with stage beside it: stage stages the
// fault and returns once it is over. Then the census, once the expirers
// have ended every reservation.
func (x *run) reserveSale(stage func(st reserveStage) error) error {
	x.res.Initial = reserveStock
	m := &Reservations{}
	x.res.Reservations = m
	rdb := x.stockRedis()
	defer rdb.Close()
	keys, err := saleKeys()
	if err != nil {
		return err
	}
	store := redisstore.NewStore(rdb, keys)
	// Reset here, before the stage looks: what it waits for (units
	// taken, returned) must be this sale's, not the last cell's. The
	// sale resets again, before its first buyer.
	client := loadgen.NewClient(2, 10*time.Second)
	defer client.CloseIdleConnections()
	if err := loadgen.Reset(x.ctx, client, x.c.URL(), x.c.AdminToken(), reserveStock); err != nil {
		return fmt.Errorf("reset: %w", err)
	}

	done := make(chan struct{})
	neverPaid := make(chan loadgen.NeverPaid, reserveBuyers)
	var rep *loadgen.ReserveReport
	var saleErr error
	go func() {
		defer close(done)
		rep, saleErr = loadgen.RunReserve(x.ctx, loadgen.ReserveConfig{
			URL: x.c.URL(), AdminToken: x.c.AdminToken(), Minter: x.c.Minter(),
			Stock: reserveStock, Buyers: reserveBuyers, NeverPay: reserveNeverPay,
			Concurrency: reserveConcurrency, Timeout: 2 * time.Minute,
			Window: reserveWindow, SameClock: !slices.Contains(reserveClockCells, x.cell.Scenario),
			OnNeverPay: func(np loadgen.NeverPaid) {
				select {
				case neverPaid <- np:
				default: // more than buyers: cannot be
				}
			},
			OnPaid: x.onPaid,
		})
	}()
	stageErr := stage(reserveStage{rdb: rdb, keys: keys, done: done, neverPaid: neverPaid})
	<-done
	if stageErr != nil {
		return stageErr
	}
	m.Report = rep
	if saleErr != nil {
		// The sale ran but its buyers did not end: a cell that fails,
		// not one that could not run.
		x.problemf("the sale did not end: %v", saleErr)
	}
	c, err := x.reservationsEnded(store)
	if err != nil {
		return err
	}
	m.Census = &c
	m.ReadsAgain = x.saleEvents("read_after_return")
	x.judgeReservations(rep, c)
	return nil
}

// reservationsEnded polls the census (no event reaches the lab from
// the expirers) until no order is reserved: a must-happen wait, each
// deadline at most reserveWindow after the last sale.
func (x *run) reservationsEnded(store *redisstore.Store) (redisstore.Census, error) {
	ctx, cancel := x.until()
	defer cancel()
	poll := backoff.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	for {
		c, err := store.Census(ctx)
		if err == nil && c.Reserved == 0 {
			return c, nil
		}
		if werr := poll.Wait(ctx); werr != nil {
			return c, fmt.Errorf("reservations still pending (%d) or census unread (%v): %w", c.Reserved, err, werr)
		}
	}
}

// judgeReservations holds the buyers' answers and the census to the
// invariants, into the cell's books.
func (x *run) judgeReservations(rep *loadgen.ReserveReport, c redisstore.Census) {
	r := x.res
	r.Stock, r.Lucky, r.Returned = c.Stock, c.Lucky, c.Returned
	// Oversold by the census (a unit held or sold beyond the stock) or
	// by the books, whichever says more.
	r.Oversold = max(c.Stock+c.Reserved+c.Paid-int64(reserveStock), r.books().Oversold(), 0)
	problems := c.Problems()
	if rep != nil {
		r.Sold = rep.Paid
		if paid := rep.Paid + x.res.Reservations.LabPaid; int64(paid) != c.Paid {
			problems = append(problems, fmt.Sprintf("%d payments answered paid, %d orders paid", paid, c.Paid))
		}
		if rep.PaidTwice > 0 {
			problems = append(problems, fmt.Sprintf("%d units paid twice", rep.PaidTwice))
		}
		if rep.Backward > 0 {
			problems = append(problems, fmt.Sprintf("%d sales got a pay_by before one answered before they were sent: a deadline set backward", rep.Backward))
		}
		if l := rep.Lifecycles; l.Broken > 0 {
			problems = append(problems, fmt.Sprintf("%d of %d orders' lifecycles broken (first: %s)", l.Broken, l.Orders, l.First))
		}
		if rep.Errors > 0 {
			problems = append(problems, fmt.Sprintf("%d buyers ended on an answer no buyer expects (first: %s)", rep.Errors, rep.Err))
		}
		x.notef("%d paid, %d never paid, %d refunds, %d lost, %d sends repeated after an unknown outcome, %d orders' lifecycles checked",
			rep.Paid, rep.NeverPay, rep.Refunds, rep.Lost, rep.Resent, rep.Lifecycles.Orders)
	}
	if c.Paid != reserveStock {
		// Every paying buyer tries until it pays or nothing can come
		// back, and there are more of them than units.
		problems = append(problems, fmt.Sprintf("%d of %d units paid at the end", c.Paid, reserveStock))
	}
	x.notef("census: %d paid, %d expired, %d cancelled, %d returned, stock %d", c.Paid, c.Expired, c.Cancelled, c.Returned, c.Stock)
	r.Consistent = len(problems) == 0
	x.problems = append(x.problems, problems...)
}

// stockCounter polls the stock Redis's key until at accepts its value: a
// must-happen wait on the sale reaching a point.
func (x *run) stockCounter(rdb *redis.Client, key string, at func(int64) bool) error {
	ctx, cancel := x.until()
	defer cancel()
	poll := backoff.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	for {
		n, err := rdb.Get(ctx, key).Int64()
		if err == nil && at(n) {
			return nil
		}
		if err != nil && !errors.Is(err, redis.Nil) && ctx.Err() == nil {
			return fmt.Errorf("GET %s: %w", key, err)
		}
		if werr := poll.Wait(ctx); werr != nil {
			return fmt.Errorf("waiting on %s: %w", key, werr)
		}
	}
}

// stockHashLen polls the stock Redis's hash key until it holds at least
// n fields: a must-happen wait on the sale reaching a point.
func (x *run) stockHashLen(rdb *redis.Client, key string, n int64) error {
	ctx, cancel := x.until()
	defer cancel()
	poll := backoff.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	for {
		got, err := rdb.HLen(ctx, key).Result()
		if err == nil && got >= n {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("HLEN %s: %w", key, err)
		}
		if werr := poll.Wait(ctx); werr != nil {
			return fmt.Errorf("waiting on %s (%d fields of %d): %w", key, got, n, werr)
		}
	}
}

// runReserveRace: the sale alone, each sale's business time stretched
// (reserveRaceWork) so that the first units' returns land between a
// locked read and its write. The race must have run: a write refused
// for a return, its section reading again.
func runReserveRace(x *run) error {
	if err := x.reserveSale(func(reserveStage) error { return nil }); err != nil {
		return err
	}
	if n := x.res.Reservations.ReadsAgain; n <= 0 {
		x.problemf("no return landed between a section's read and its write (read_after_return %d): the race was not run", n)
	}
	return nil
}

// runReserveLostReply: from the sale's first unit to its end, every
// replica loses reserveLoss of the replies on its links to the stock
// Redis and the lock: a sale's script, a payment's, an expiry's ran and
// its answer was cut. The buyers send again what they did not hear the
// end of (the purchase with its key, the payment with its id).
func runReserveLostReply(x *run) error {
	before := localcluster.RepliesLost()
	var removes []func() error
	removeAll := func() error {
		var errs []error
		for _, rm := range removes {
			errs = append(errs, rm())
		}
		removes = nil
		return errors.Join(errs...)
	}
	defer removeAll()
	err := x.reserveSale(func(st reserveStage) error {
		// After the resets (an admin's reset is not what this cell
		// tests): from the first unit taken.
		if err := x.stockCounter(st.rdb, st.keys.Lucky, func(n int64) bool { return n >= 1 }); err != nil {
			return err
		}
		for i := range x.c.Replicas() {
			for _, link := range []localcluster.Link{localcluster.LinkStock, localcluster.LinkLock} {
				rm, err := x.c.LoseReplies(i, link, reserveLoss)
				if err != nil {
					return err
				}
				removes = append(removes, rm)
			}
		}
		<-st.done
		return removeAll()
	})
	lost := localcluster.RepliesLost() - before
	x.notef("%d replies lost", lost)
	if err == nil && lost == 0 {
		x.problemf("no reply was lost: the fault was not staged")
	}
	return err
}

// runReserveKill: once the first unit has come back (the expirers are
// at work), two of the three replicas are killed at once (kill -9),
// their expirers mid-run and their buyers' sales and payments cut, then
// started again. An expirer's batch is one script, so Redis ran it all
// or none; the census says whether any unit came back twice or not at
// all.
func runReserveKill(x *run) error {
	return x.reserveSale(func(st reserveStage) error {
		if err := x.stockCounter(st.rdb, st.keys.Returned, func(n int64) bool { return n >= 1 }); err != nil {
			return err
		}
		at := time.Now()
		for i := range 2 {
			if err := x.c.Replica(i).Kill(); err != nil {
				return err
			}
		}
		x.notef("killed %s and %s %dms after the first return",
			localcluster.ReplicaName(0), localcluster.ReplicaName(1), ms(time.Since(at)))
		ctx, cancel := x.until()
		defer cancel()
		for i := range 2 {
			if err := x.c.Replica(i).Start(ctx); err != nil {
				return fmt.Errorf("restart %s: %w", localcluster.ReplicaName(i), err)
			}
		}
		return nil
	})
}

// runReserveClock: the stock Redis's clock, which sets and judges every
// deadline, steps reserveClockStep forward once a third of the units are
// taken: every deadline held passes at once, and the expirers must
// return those units, once each. Then it steps back as far: a deadline
// set after that must come no earlier than one answered before (the
// reservations' clock only moves forward, lifeclock.lua), and nothing
// that expired comes back to life. A sale after the step back is
// waited for, so the check has deadlines to judge.
func runReserveClock(x *run) error {
	clock := x.c.StockClock()
	if clock == nil {
		return errors.New("the stock Redis has no steppable clock (the fault layer is off)")
	}
	x.undo = append(x.undo, func() error { return clock.Set(0) })
	return x.reserveSale(func(st reserveStage) error {
		rdb, keys := st.rdb, st.keys
		if err := x.stockCounter(rdb, keys.Lucky, func(n int64) bool { return n >= reserveStock/3 }); err != nil {
			return err
		}
		ctx, cancel := x.until()
		defer cancel()
		returned, err := rdb.Get(ctx, keys.Returned).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		taken, err := rdb.Get(ctx, keys.Lucky).Int64()
		if err != nil {
			return err
		}
		if err := clock.Step(reserveClockStep); err != nil {
			return err
		}
		// Units back, and sales on the stepped clock: their deadlines
		// are what a sale after the step back is held to.
		if err := x.stockCounter(rdb, keys.Returned, func(n int64) bool { return n > returned }); err != nil {
			return fmt.Errorf("no unit came back after the clock stepped past the deadlines: %w", err)
		}
		if err := x.stockCounter(rdb, keys.Lucky, func(n int64) bool { return n >= taken+reserveClockSales }); err != nil {
			return fmt.Errorf("no sale on the stepped clock: %w", err)
		}
		if taken, err = rdb.Get(ctx, keys.Lucky).Int64(); err != nil {
			return err
		}
		if err := clock.Set(0); err != nil {
			return err
		}
		if err := x.stockCounter(rdb, keys.Lucky, func(n int64) bool { return n > taken }); err != nil {
			return fmt.Errorf("no sale after the clock stepped back: %w", err)
		}
		x.notef("clock stepped %s forward (%d units returned before it), back with %d units taken", reserveClockStep, returned, taken)
		return nil
	})
}

// runReserveFailover: the stock Redis is a Sentinel set
// (stock.min_replica_acks 1). At the first return its replica is starved
// of the replication stream (as failover-lag) until reserveLagPayments
// more payments have run on the primary, which only it then holds; then
// the primary is killed (kill -9) with the expirers at work, the
// Sentinels promote the replica and the old primary comes back as its
// replica. A sale, a payment and a return each wait for the replica's
// ack before they are answered, so the promoted replica holds every one
// a buyer was told of: the census on it says whether a payment answered
// paid was lost (its unit then sold again) or a unit came back twice.
// Without the acks, the payments of the starved window are answered
// paid and lost.
func runReserveFailover(x *run) error {
	set := x.sentinel
	if set == nil {
		return errors.New("no Sentinel set")
	}
	x.res.Failover = &Failover{Acks: x.cell.Acks}
	err := x.reserveSale(func(st reserveStage) error {
		ctx, cancel := x.until()
		defer cancel()
		switched, err := set.WatchSwitch(ctx)
		if err != nil {
			return err
		}
		if err := x.stockCounter(st.rdb, st.keys.Returned, func(n int64) bool { return n >= 1 }); err != nil {
			return err
		}
		// A replica that never synced would be promoted empty: not the
		// window this cell puts to the test.
		if err := set.WaitReplicated(ctx, 1); err != nil {
			return fmt.Errorf("the replica is not replicating before the fault: %w", err)
		}
		paid, err := st.rdb.HLen(ctx, st.keys.Payments).Result()
		if err != nil {
			return err
		}
		restore, err := x.c.LagReplication()
		if err != nil {
			return err
		}
		// Broken for good by the kill; taking the toxic away only tidies.
		defer func() { _ = restore() }()
		if err := x.stockHashLen(st.rdb, st.keys.Payments, paid+reserveLagPayments); err != nil {
			return fmt.Errorf("no payment while the replica starved: %w", err)
		}
		old := set.Primary
		faultAt := time.Now()
		if err := old.Kill(); err != nil {
			return fmt.Errorf("kill %s: %w", old.Name(), err)
		}
		newPrimary, ok := <-switched
		if !ok {
			return fmt.Errorf("the Sentinels did not all switch to one new primary: %w", ctx.Err())
		}
		x.res.Failover.SwitchMS = ms(time.Since(faultAt))
		if err := set.Rejoin(ctx, old); err != nil {
			return fmt.Errorf("bring back %s: %w", old.Name(), err)
		}
		x.res.Failover.RejoinMS = ms(time.Since(faultAt))
		x.notef("replica starved from the first return for %d payments, then the primary killed; all Sentinels switched to %s in %dms; old primary replicating %dms after the fault",
			reserveLagPayments, newPrimary, x.res.Failover.SwitchMS, x.res.Failover.RejoinMS)
		return nil
	})
	if m := x.res.Reservations; err == nil && m.Report != nil && m.Census != nil {
		x.res.Failover.Lost = max(0, m.Report.Paid+m.LabPaid-int(m.Census.Paid))
	}
	return err
}
