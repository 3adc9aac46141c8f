package lab

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/backoff"
	"seckill/internal/lab/localcluster"
)

// orderfaults.go: the faults of the durable orders path: a
// consumer killed with orders pending, MySQL gone mid-sale, and one
// purchase racing itself on two replicas. The books (buyerBooks) judge
// them; these only stage the fault and check that it happened.

// The ledger's stream and consumer group under stockd's defaults
// (stock.key "stock", orders.group).
const (
	ordersStream = "stock:orders"
	ordersGroup  = "orders"
)

// claimBound is how soon the others are expected to claim a dead consumer's
// orders: orders.claim_idle (1s in buyerEnv), a claim round every half of
// it, and a batch retried after MySQL's backoff.
const claimBound = 10 * time.Second

// stockRedis is a client of the stock Redis, where the ledger lives
// (directly, not through a replica's proxy).
func (x *run) stockRedis() *redis.Client {
	if set := x.sentinel; set != nil {
		// The cell's stock Redis is its Sentinel set: whichever node
		// the Sentinels name, before a failover and after it.
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: set.MasterName, SentinelAddrs: set.SentinelAddrs()})
	}
	return redis.NewClient(&redis.Options{Addr: x.c.Redis().Addr()})
}

// pendingOf polls (there is no event to wait on from outside stockd) the
// group's pending entries owned by consumer until ok accepts their count:
// a must-happen wait (waits.go).
func (x *run) pendingOf(rdb *redis.Client, consumer string, ok func(int64) bool) (int64, error) {
	ctx, cancel := x.until()
	defer cancel()
	poll := backoff.Backoff{Initial: 10 * time.Millisecond, Max: 200 * time.Millisecond}
	var n int64
	for {
		p, err := rdb.XPending(ctx, ordersStream, ordersGroup).Result()
		switch {
		case err == nil:
			n = p.Consumers[consumer]
		case errors.Is(err, redis.Nil) || strings.HasPrefix(err.Error(), "NOGROUP"):
			n = 0 // no group yet: nothing pending anywhere
		case ctx.Err() == nil:
			return n, fmt.Errorf("XPENDING %s %s: %w", ordersStream, ordersGroup, err)
		}
		if ok(n) {
			return n, nil
		}
		if err := poll.Wait(ctx); err != nil {
			return n, err
		}
	}
}

// consuming polls until consumer has joined the orders group (its first
// XREADGROUP): a must-happen wait (waits.go).
func (x *run) consuming(rdb *redis.Client, consumer string) error {
	ctx, cancel := x.until()
	defer cancel()
	poll := backoff.Backoff{Initial: 10 * time.Millisecond, Max: 200 * time.Millisecond}
	var last error
	for {
		cs, err := rdb.XInfoConsumers(ctx, ordersStream, ordersGroup).Result()
		last = err
		for _, c := range cs {
			if c.Name == consumer {
				return nil
			}
		}
		if poll.Wait(ctx) != nil {
			return fmt.Errorf("%s's orders consumer did not join group %s (last: %v)", consumer, ordersGroup, last)
		}
	}
}

// runConsumerKill cuts one replica's MariaDB link, waits until its orders
// consumer holds ledger entries it cannot store (pending under its name),
// and kills it (SIGKILL) at once, before claim_idle lets anyone else take
// them. The others' XAUTOCLAIM must take them; the books then find every
// order in MySQL exactly once.
func runConsumerKill(x *run) error {
	i := 0
	name, p := localcluster.ReplicaName(i), x.c.Replica(i)
	rdb := x.stockRedis()
	defer rdb.Close()
	// A replica starts consuming only once it has created the table, and
	// MariaDB may have started with this cell: cut before that, and the
	// consumer would never read anything to hold.
	if err := x.consuming(rdb, name); err != nil {
		return err
	}
	restore, err := x.c.CutMySQL(i)
	if err != nil {
		return err
	}
	n, err := x.pendingOf(rdb, name, func(n int64) bool { return n > 0 })
	if err != nil {
		return errors.Join(fmt.Errorf("no order pending in %s's consumer with its MySQL cut: %w", name, err), restore())
	}
	x.faultEnd = time.Now()
	if err := p.Kill(); err != nil {
		return errors.Join(err, restore())
	}
	x.notef("killed %s with %d order(s) pending in its consumer", name, n)
	if _, err := x.pendingOf(rdb, name, func(n int64) bool { return n == 0 }); err != nil {
		x.problemf("%s's pending orders were not claimed: %v", name, err)
	} else {
		claimedAt := time.Now()
		x.expect(name+"'s pending orders claimed", x.faultEnd, claimedAt, claimBound)
		x.notef("the others claimed them %dms after the kill", ms(claimedAt.Sub(x.faultEnd)))
	}
	if err := restore(); err != nil {
		return err
	}
	ctx, cancel := x.until()
	defer cancel()
	if err := p.Start(ctx); err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	return nil
}

// mysqlDownWindow is how long MariaDB is cut off from every replica.
const mysqlDownWindow = 2 * time.Second

// runMySQLDown cuts every replica from MariaDB for mysqlDownWindow while
// the buyers buy: sales must go on (the ledger is in Redis), the orders
// wait in the stream, and the books check that MySQL has them all after.
func runMySQLDown(x *run) error {
	var restores []func() error
	for i := range x.c.Replicas() {
		r, err := x.c.CutMySQL(i)
		if err != nil {
			return errors.Join(err, restoreAll(restores))
		}
		restores = append(restores, r)
	}
	cutAt := time.Now()
	herr := x.hold(cutAt.Add(mysqlDownWindow))
	rdb := x.stockRedis()
	defer rdb.Close()
	waiting, lerr := x.ordersWaiting(rdb)
	if err := errors.Join(herr, restoreAll(restores)); err != nil {
		return err
	}
	x.faultEnd = time.Now()
	// By send time: a sale sent once MySQL was gone and answered sold.
	sold := x.load.countSent(cutAt, func(r response) bool { return r.sold() && !r.Replayed && r.At.Before(x.faultEnd) })
	if sold == 0 {
		x.problemf("nothing sold while MySQL was down: sales must not need it")
	}
	switch {
	case lerr != nil:
		x.problemf("read the orders' lag at the outage's end: %v", lerr)
	case waiting == 0:
		x.problemf("no order waited for MySQL at the outage's end: the outage was not felt")
	}
	x.notef("MySQL down %v: %d sold meanwhile, %d order(s) waiting at its end", mysqlDownWindow, sold, waiting)
	return nil
}

// ordersWaiting is the group's lag: entries not yet delivered plus those
// delivered and not acknowledged (stored).
func (x *run) ordersWaiting(rdb *redis.Client) (int64, error) {
	ctx, cancel := x.until()
	defer cancel()
	groups, err := rdb.XInfoGroups(ctx, ordersStream).Result()
	if err != nil {
		return 0, err
	}
	for _, g := range groups {
		if g.Name == ordersGroup {
			return max(g.Lag, 0) + g.Pending, nil
		}
	}
	return 0, fmt.Errorf("no group %q on %s", ordersGroup, ordersStream)
}

// racePairs is how many purchases replayrace sends twice at once.
const racePairs = 20

// runReplayRace sends purchases of buyers of their own to two replicas
// (directly, not through nginx) at the same instant, with the same key:
// one send may sell, the other must replay that order. Verify then finds
// at most one order per key and every replay naming the original.
func runReplayRace(x *run) error {
	n := x.c.Replicas()
	var once, other int
pairs:
	for k := range racePairs {
		if x.ctx.Err() != nil {
			return x.ctx.Err()
		}
		i, p := x.load.plan.extra("r")
		var a, b response
		var wg sync.WaitGroup
		urlA, urlB := x.c.ReplicaURL(k%n)+"/stock/reduce", x.c.ReplicaURL((k+1)%n)+"/stock/reduce"
		wg.Go(func() { a = x.load.resolve(x.ctx, urlA, i, p, false) })
		wg.Go(func() { b = x.load.resolve(x.ctx, urlB, i, p, true) })
		wg.Wait()
		switch {
		case a.Result == api.SoldOut || b.Result == api.SoldOut:
			x.notef("sold out after %d racing pairs", k)
			break pairs
		case a.sold() && b.sold() && a.Replayed != b.Replayed && a.Order == b.Order:
			once++
		default:
			// Neither sold (limit, fenced), or two orders for one key,
			// which Verify counts as a duplicate.
			other++
		}
	}
	x.notef("%d racing pairs: %d sold once and replayed once, %d otherwise", once+other, once, other)
	if once == 0 {
		x.problemf("no racing send was answered as a replay of the other: the race did not happen")
	}
	return nil
}
