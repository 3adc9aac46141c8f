package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/backoff"
	"seckill/internal/lab/localcluster"
	"seckill/internal/metrics"
	"seckill/internal/stock"
	"seckill/internal/stockd"
)

// scenario is one fault and how to stage it.
type scenario struct {
	summary     string
	concurrency int  // buyers through nginx
	noWarmup    bool // do not wait for a first sale before the fault
	// env adds stockd settings for the cell, given the backend's lease.
	env func(lease time.Duration) stockd.Edit
	// run stages the fault while the load runs. It sets faultEnd when the
	// fault has an end to recover from.
	run func(x *run) error
	// check runs after the books are read, for expectations on the counts.
	check func(x *run)
	// election turns on the leader election (and its leader-only audit job)
	// on the backend's own server, where it has one that elects (etcd,
	// ZooKeeper).
	election bool
	// buyers: the scenario is about orders, and runs only in cells with
	// named buyers (Cell.Buyers, buyers.go).
	buyers bool
	// failover: the stock Redis is a Sentinel set, started for the cell
	// (failover.go).
	failover bool
	// cluster: the stock Redis is a Redis Cluster, started for the cell
	// (clusterfaults.go).
	cluster bool
	// items: the scenario sells items of its own (items.go), redis only,
	// and no load on the default sale runs.
	items bool
	// reserve: the scenario runs a sale with reservations of its own
	// (reservecells.go), on reserveBackends, and no load on the default
	// sale runs.
	reserve bool
	// previous: the replicas start as the previous release
	// (upgrade.go), which resets the sale.
	previous bool
	// initial, when set, is the cell's stock instead of Initial.
	initial int
}

// namedScenario is one row of the scenario table: its name, and how to
// stage it.
type namedScenario struct {
	name string
	scenario
}

// table is every scenario, in the order the matrix and its reports list
// them: the one place a scenario is named.
var table = []namedScenario{
	{"kill", scenario{
		summary:     "kill -9 the replica that just read the stock (the holder, mid critical section)",
		concurrency: 6,
		env:         always(workDelay(300 * time.Millisecond)),
		run:         runKill,
	}},
	{"pause", scenario{
		summary:     "SIGSTOP the holder with its write on the wire for 2x the lease, then SIGCONT",
		concurrency: 6,
		// A long client timeout so the resumed replica reads the store's
		// answer to its write (fenced or not) instead of timing out.
		env: func(time.Duration) stockd.Edit {
			return func(c *stockd.Config) {
				c.Work.Delay = stock.FixedDelay(50 * time.Millisecond)
				c.Redis.Timeout, c.Stock.ConfirmTimeout = 30*time.Second, 30*time.Second
			}
		},
		run: runPause,
		check: func(x *run) {
			if !x.cell.Fencing || x.res.Fenced > 0 {
				return
			}
			// A buyer whose purchase is cut on purpose (buyerCut) hangs up
			// before the paused replica answers: its 409 reaches no one,
			// and only the replica's own count of fenced answers shows it.
			// The count is this cell's: Run's SetBackend starts every
			// replica afresh, and pause restarts none.
			if n := x.replicaCounter("seckill_reduce_total", "result", "fenced"); n > 0 {
				x.notef("%d fenced answer(s) counted by the replicas, none received (the buyer hung up)", n)
				return
			}
			x.problemf("the resumed write was not fenced")
		},
	}},
	{"slowwork", scenario{
		summary:     "business time 1.5x the lease: renewal must keep the lock",
		concurrency: 3,
		env: func(lease time.Duration) stockd.Edit {
			return workDelay(lease * 3 / 2)
		},
		run: runSlowWork,
		check: func(x *run) {
			if x.cell.Expect() == ExpectSafe && (x.res.LockLost > 0 || x.res.Fenced > 0) {
				x.problemf("renewal did not keep the lock: %d lock_lost, %d fenced", x.res.LockLost, x.res.Fenced)
			}
		},
	}},
	{"partition", scenario{
		summary:     "cut the holder off from the lock server for 2x the lease, then restore",
		concurrency: 3,
		// Every sale takes 1.5 leases, so the restored replica's own sale may
		// queue behind all the buyers: wait for the lock rather than shed.
		env: func(lease time.Duration) stockd.Edit {
			return func(c *stockd.Config) {
				c.Work.Delay, c.Lock.WaitTimeout = stock.FixedDelay(lease*3/2), 30*time.Second
			}
		},
		run: runPartition,
	}},
	{"lockrestart", scenario{
		summary:     "restart the lock server (lock Redis, etcd, ZooKeeper) under load",
		concurrency: 6,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runLockRestart,
	}},
	{"stockdown", scenario{
		summary:     "cut every replica off from the stock Redis for 2x the lease, then restore",
		concurrency: 6,
		env:         always(workDelay(100 * time.Millisecond)),
		run:         runStockDown,
	}},
	{"latency", scenario{
		summary:     "delay everything the holder sends (stock and lock) by 2x the lease",
		concurrency: 6,
		env: func(lease time.Duration) stockd.Edit {
			slow := 2*lease + 5*time.Second
			return func(c *stockd.Config) {
				c.Work.Delay = stock.FixedDelay(100 * time.Millisecond)
				c.Redis.Timeout, c.Stock.ConfirmTimeout = slow, slow
			}
		},
		run: runLatency,
	}},
	{"lostreply", scenario{
		summary:     "lose 2% of the servers' replies (the command ran, the answer is cut) on every link for 5s",
		concurrency: 6,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runLostReply,
	}},
	{"slowreply", scenario{
		summary:     "delay the replies on a quarter of every link's connections past the Redis read timeout for 5s",
		concurrency: 6,
		env: func(time.Duration) stockd.Edit {
			return func(c *stockd.Config) {
				c.Work.Delay, c.Redis.Timeout = stock.FixedDelay(20*time.Millisecond), slowReplyTimeout
			}
		},
		run: runSlowReply,
	}},
	{"lockforget", scenario{
		summary:     "the lock service forgets everything while a write is on the wire: lock Redis flushed (counters aged +10^6) 3 times, etcd/ZooKeeper restarted empty twice",
		concurrency: 6,
		// A long read timeout, as in pause: the held write's own answer
		// (fenced or sold) is what the cell is about.
		env: func(time.Duration) stockd.Edit {
			return func(c *stockd.Config) {
				c.Work.Delay = stock.FixedDelay(20 * time.Millisecond)
				c.Redis.Timeout, c.Stock.ConfirmTimeout = 30*time.Second, 30*time.Second
			}
		},
		run: runLockForget,
	}},
	{"blip", scenario{
		summary:     "cut the lock link for a third of the lease, 6 times (one replica each, then all), election on; the sale must finish",
		concurrency: 6,
		// Slow enough sales that the blips land mid-sale, not after it.
		env:      always(workDelay(50 * time.Millisecond)),
		run:      runBlip,
		check:    checkBlip,
		election: true,
	}},
	{"netsplit", scenario{
		summary:     "the holder's every link (stock and lock) silently drops packets for 2x the lease + 1s, then heals",
		concurrency: 6,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runNetsplit,
	}},
	{"evict", scenario{
		summary:     "turn the stock Redis to allkeys-lru (every replica must go unready, then ready again), then fill it to its maxmemory under noeviction for 2x the lease: definite 503s, books exact",
		concurrency: 6,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runEvict,
	}},
	{"wipe", scenario{
		summary:     "kill -9 the stock Redis mid-sale and start it empty: every sale after it must be refused store_lost, none recreate the stock",
		concurrency: 6,
		env:         storeLossEnv(nil),
		run:         runWipe,
		check:       checkStoreLoss,
	}},
	{"restore", scenario{
		summary:     "SAVE the stock Redis, sell on, kill -9 it and start it from that snapshot: the sale must halt on every replica, no unit sold twice",
		concurrency: 6,
		env:         storeLossEnv(nil),
		run:         runRestore,
		check:       checkStoreLoss,
	}},
	{"reserve-restore", scenario{
		summary:     "restore with reservations (orders.payment_window 1s, no buyer pays, so units come back all along): after the first return and a sale on every replica, SAVE, every replica sells on, kill -9 and start from the snapshot: the sale must halt on every replica, though returns raised the stock before (the ceilings are of the stock less the units returned)",
		concurrency: 6,
		env:         storeLossEnv(reserveEnv),
		run:         runReserveRestore,
		check:       checkStoreLoss,
	}},
	{"restore-all", scenario{
		summary:     "restore, with every stockd restarted while the stock Redis is down (stock.witness etcd): the new processes must halt the sale",
		concurrency: 6,
		env:         storeLossEnv(witnessEnv),
		run:         runRestoreAll,
		check:       checkStoreLoss,
	}},
	{"restore-both", scenario{
		summary:     "restore-all with the witness restored too (its record from before the SAVE written back while Redis is down) and durable orders on: only MariaDB's orders remember the units sold since, and every replica must halt (orders_ahead)",
		concurrency: 6,
		env:         storeLossEnv(restoreBothEnv),
		run:         runRestoreBoth,
		check:       checkRestoreBoth,
	}},
	{"witness-wipe", scenario{
		summary:     "restore-all with the witness's record deleted while Redis and every stockd are down (one host's crash): every replica must halt (witness_lost), none adopt Redis's sale; then the operator reconciles by the buyers' answers and the sale goes on, no unit sold twice",
		concurrency: 6,
		env:         storeLossEnv(witnessEnv),
		run:         runWitnessWipe,
		check:       checkWitnessWipe,
	}},
	{"witness-restore", scenario{
		summary:     "restore the witness's record, while every stockd sells, to a backup from before the sale's reset: the next flush must halt the sale (witness_lost), no sale sent after answered 200; then the operator adopts Redis's sale and it goes on, no unit sold twice",
		concurrency: 6,
		env:         storeLossEnv(witnessEnv),
		run:         runWitnessRestore,
		check:       checkWitnessRestore,
	}},
	{"reconcile", scenario{
		summary:     "MariaDB paused (the orders consumer behind), restore with every replica running, then POST /stock/reconcile: the witness's count kept, the units without an order held, the sale goes on with no unit sold twice",
		concurrency: 6,
		env:         storeLossEnv(restoreBothEnv),
		run:         runReconcile,
		check:       checkReconcile,
	}},
	{"other-sale", scenario{
		summary:     "kill -9 the stock Redis mid-sale and bring it back holding another sale (stock.witness etcd): every replica must halt, none sell from it",
		concurrency: 6,
		env:         storeLossEnv(witnessEnv),
		run:         runOtherSale,
		check:       checkStoreLoss,
	}},
	{"witnessdown", scenario{
		summary:     "cut every replica from etcd, the witness (stock.witness etcd), for 2s mid-sale: no sale answered sold without its record, the sale goes on after",
		concurrency: 4,
		env:         storeLossEnv(witnessEnv),
		run:         runWitnessDown,
		check:       checkWitnessDown,
	}},
	{"consumerkill", scenario{
		summary:     "cut a replica from MariaDB until its orders consumer holds entries pending, then kill -9 it: the others' XAUTOCLAIM stores them (named buyers)",
		concurrency: 6,
		buyers:      true,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runConsumerKill,
	}},
	{"mysqldown", scenario{
		summary:     "cut every replica from MariaDB for 2s mid-sale: sales go on, the orders wait in the stream and drain after (named buyers)",
		concurrency: 6,
		buyers:      true,
		// Slow enough sales that the 100 units outlast the outage: the
		// cell must see sales after it too.
		env: always(workDelay(50 * time.Millisecond)),
		run: runMySQLDown,
	}},
	{"replayrace", scenario{
		summary:     "one purchase (buyer and key) sent to two replicas at once, 20 times mid-sale: one order, the other send replays it (named buyers)",
		concurrency: 6,
		buyers:      true,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runReplayRace,
	}},
	{"item-halt", scenario{
		summary: "two items sold at once by two runs; once the first has sold 30 its halt key is set: its sales after it must all be refused store_lost, its books balance, the second sells out exactly (redis)",
		env:     always(workDelay(5 * time.Millisecond)),
		run:     runItemHalt,
		items:   true,
	}},
	{"item-window", scenario{
		summary: "an item whose window opens 1s after its buyers start (200/s for 4s) and lasts 2s, by Redis's clock: every sold answer inside it, not_started only before, ended only after, books exact (redis)",
		env:     always(workDelay(time.Millisecond)),
		run:     runItemWindow,
		items:   true,
	}},
	{"item-restore-all", scenario{
		summary: "restore-all with two items (stock.witness etcd): SAVE once both sold 20, sell on, restart every stockd around the Redis's restart from it: both items halt on every replica, none sold twice, a new item sells out (redis)",
		env:     storeLossEnv(witnessEnv),
		run:     runItemRestoreAll,
		items:   true,
	}},
	{"item-clock-back", scenario{
		summary: "an item's window as in item-window, buyers on past its end, and 0.5s after the end the stock Redis's clock steps back 2.5s (beyond stock.max_clock_skew): no sale after the advertised end, ended only after it (redis, etcd)",
		env:     always(workDelay(time.Millisecond)),
		run:     runItemClockBack,
		items:   true,
	}},
	{"reserve-race", scenario{
		summary: "reservations (1 s to pay, a third never pay): each sale's read and write 50ms apart on the lock while the first units come back; a return must refuse the write that read before it (read_after_return), the census exact (redis, etcd)",
		reserve: true,
		initial: reserveStock,
		env:     always(workDelay(reserveRaceWork)),
		run:     runReserveRace,
	}},
	{"reserve-lostreply", scenario{
		summary: "reservations: 3% of the replies on every link lost for the whole sale (a sale's, a payment's, an expiry's script ran, its answer cut); buyers send again with the same key or payment id; the census exact (redis, etcd)",
		reserve: true,
		initial: reserveStock,
		env:     always(workDelay(5 * time.Millisecond)),
		run:     runReserveLostReply,
	}},
	{"reserve-kill", scenario{
		summary: "reservations: kill -9 two of three replicas at the first return, their expirers at work, then start them; the census exact, no unit back twice (redis, etcd)",
		reserve: true,
		initial: reserveStock,
		env:     always(workDelay(5 * time.Millisecond)),
		run:     runReserveKill,
	}},
	{"reserve-durable", scenario{
		summary: "reservations with durable orders: MariaDB paused (SIGSTOP) at the first return while 3 payments run in the stock Redis, then resumed; every order's end in orders_ends as the stock Redis decided it, the census exact (redis; etcd by name)",
		reserve: true,
		initial: reserveStock,
		env:     always(reserveDurableEnv),
		run:     runReserveDurable,
	}},
	{"reserve-clock", scenario{
		summary: "reservations: the stock Redis's clock steps 3s forward past every deadline held, then back: each unit returned once, no deadline set earlier than one answered before, the census exact (redis, etcd)",
		reserve: true,
		initial: reserveStock,
		env:     always(workDelay(5 * time.Millisecond)),
		run:     runReserveClock,
	}},
	{"reserve-deadline", scenario{
		summary: "reservations: the reservations' clock held at a never-paid order's deadline, every expirer run twice, then a payment must pay it; held 1 ms past another's, a payment must be answered expired with a refund; the census exact (redis, etcd)",
		reserve: true,
		initial: reserveStock,
		env:     always(workDelay(5 * time.Millisecond)),
		run:     runReserveDeadline,
	}},
	{"reserve-failover", scenario{
		summary:  "reservations on a Sentinel set (stock.min_replica_acks 1): kill -9 the stock Redis primary at the first return, the expirers at work; the replica promoted, the old primary back as its replica; no payment answered paid lost, the census exact on the new primary (redis, etcd)",
		reserve:  true,
		failover: true,
		initial:  reserveStock,
		env:      always(workDelay(5 * time.Millisecond)),
		run:      runReserveFailover,
	}},
	{"clock-jump", scenario{
		summary:     "the stock Redis's clock jumps 25h (past stock.idempotency_ttl and every receipt) and, on redis, the lock Redis's past the lock TTL with a write held: 10 keyed purchases made before replay after, the held write is fenced (named buyers; redis, etcd)",
		concurrency: 6,
		buyers:      true,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runClockJump,
		check:       checkClockJump,
	}},
	{"failover-kill", scenario{
		summary:     "kill -9 the stock Redis primary mid-sale; Sentinel promotes the replica, the old primary rejoins as its replica (acks 1, and the acks-0 control)",
		concurrency: 4,
		failover:    true,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runFailoverKill,
		check:       checkFailover,
	}},
	{"failover-lag", scenario{
		summary:     "starve the stock Redis replica of the replication stream for 1s of sales, then kill -9 the primary: the control must lose those sales, acks 1 none",
		concurrency: 4,
		failover:    true,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runFailoverLag,
		check:       checkFailover,
	}},
	{"failover-stop", scenario{
		summary:     "SIGSTOP the stock Redis primary mid-sale until every Sentinel has switched, then SIGCONT it (it becomes a replica)",
		concurrency: 4,
		failover:    true,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runFailoverStop,
		check:       checkFailover,
	}},
	{"split", scenario{
		summary:     "cut the stock Redis primary off from the Sentinels and its replica mid-sale, not from stockd; heal after the switch: acks 1 with min-replicas-to-write loses nothing, the acks-0 control must lose",
		concurrency: 4,
		failover:    true,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runSplit,
		check:       checkFailover,
	}},
	{"failover-clock", scenario{
		summary:  "an item sold on a Sentinel set whose replica's clock is 60s ahead: 2s after the opening the primary is killed (the one ahead is promoted), comes back 60s behind and is promoted in turn when the other is killed, all inside a 14s window that then ends with buyers on: no sold outside it, no ended before its end (redis, etcd)",
		env:      always(workDelay(time.Millisecond)),
		run:      runFailoverClock,
		failover: true,
		items:    true,
	}},
	{"cluster-kill", scenario{
		summary:     "kill -9 the Redis Cluster master holding the sale's slot mid-sale; the cluster promotes its replica, the old master rejoins as its replica (acks 1, and the acks-0 control)",
		concurrency: 4,
		cluster:     true,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runClusterKill,
		check:       checkFailover,
	}},
	{"cluster-lag", scenario{
		summary:     "as cluster-kill, but first the replica is cut off its stream for 500ms of sales (SIGSTOP, its connection dropped by the master), woken after the kill and promoted without them: acks 1 loses nothing, the acks-0 control must lose",
		concurrency: 4,
		cluster:     true,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runClusterLag,
		check:       checkFailover,
	}},
	{"cluster-failover", scenario{
		summary:     "CLUSTER FAILOVER on the replica of the Redis Cluster master holding the sale's slot, mid-sale: a manual failover, nothing acknowledged lost",
		concurrency: 4,
		cluster:     true,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runClusterFailover,
		check:       checkFailover,
	}},
	{"cluster-move", scenario{
		summary:     "move the sale's slot to another Redis Cluster master mid-sale (MIGRATING/IMPORTING, MIGRATE 10 keys at a time, sales between batches): ASK and TRYAGAIN, a stall, nothing lost",
		concurrency: 4,
		cluster:     true,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runClusterMove,
		check:       checkFailover,
	}},
	{"cluster-items", scenario{
		summary: "two items on two Redis Cluster masters sold at once; kill -9 the first's master once it has sold 30: the second sells on while the first's slot fails over, the first sells again after its old master rejoins, each item's books and history exact, nothing acknowledged lost (acks 1)",
		cluster: true,
		items:   true,
		env:     always(workDelay(5 * time.Millisecond)),
		run:     runClusterItems,
	}},
	{"upgrade", scenario{
		summary:     "three replicas of the previous release (release/previous) sell with the witness, the ledger and durable orders on; each is replaced by this build in turn mid-sale, then one rolled back: the witness's record and the orders as a sale that never upgraded holds them (redis, etcd)",
		concurrency: 6,
		previous:    true,
		// Enough units to outlast four replacements: a stopped replica
		// drains its buyers waiting on the lock (up to lock.wait_timeout)
		// before it exits. The cell ends after the last step, unsold
		// units and all.
		initial: 1000,
		env:     always(upgradeEnv),
		run:     runUpgrade,
		check:   checkUpgrade,
	}},
	{"newer-reset", scenario{
		summary:     "mid-sale, a newer release resets the sale in a format this build does not read (a new epoch, stock:format 3): every replica must refuse (503, /readyz naming stock:format), none sell in it; rolled back (the key goes), the sale goes on, books exact",
		concurrency: 6,
		env:         always(workDelay(20 * time.Millisecond)),
		run:         runNewerReset,
		check:       checkNewerReset,
	}},
	{"crash", scenario{
		summary:     "crash between SETNX and EXPIRE (failpoint setnx/afterSetNX=exit)",
		concurrency: 4,
		noWarmup:    true,
		env: func(time.Duration) stockd.Edit {
			return func(c *stockd.Config) {
				c.Lab.Failpoints = "setnx/afterSetNX=1*exit"
				c.Lock.WaitTimeout, c.Work.Delay = time.Second, stock.FixedDelay(20*time.Millisecond)
			}
		},
		run:   runCrash,
		check: checkCrash,
	}},
	{"bellearly", scenario{
		summary:     "a broken bell (failpoint stock/ringEarly): every holder wakes the buyers queued behind it before it reads, units left or not; each must read again and go back to the lock, so the sale sells out with no sold_out told while a unit was left: books exact, history linearizable",
		concurrency: 12,
		env: func(time.Duration) stockd.Edit {
			return func(c *stockd.Config) {
				c.Lab.Failpoints, c.Work.Delay = stock.FailpointRingEarly+"=return", stock.FixedDelay(5*time.Millisecond)
			}
		},
		run: runBellEarly,
	}},
	{"falsesoldout", scenario{
		summary:     "a broken build (failpoint stock/falseSoldOut): each replica's first 10 buyers are told sold_out without a look; the sums balance, the history check must fail it",
		concurrency: 6,
		noWarmup:    true,
		env: func(time.Duration) stockd.Edit {
			return func(c *stockd.Config) {
				c.Lab.Failpoints, c.Work.Delay = stock.FailpointFalseSoldOut+"=10*return", stock.FixedDelay(5*time.Millisecond)
			}
		},
		run: runFalseSoldOut,
	}},
}

// Scenarios lists the scenario names in table order.
func Scenarios() []string {
	names := make([]string, len(table))
	for i, s := range table {
		names[i] = s.name
	}
	return names
}

// Summary describes a scenario in one line.
func Summary(name string) string { return scenarios[name].summary }

// scenarios is the table by name.
var scenarios = func() map[string]scenario {
	m := make(map[string]scenario, len(table))
	for _, s := range table {
		m[s.name] = s.scenario
	}
	return m
}()

// The stock keys as they appear in RESP on the wire (stockd's defaults).
var (
	stockKey = []byte("$5\r\nstock\r\n")
	luckyKey = []byte("$5\r\nlucky\r\n")
)

// isRead matches a sale's read (GET stock, or the fenced-read script): it
// names the stock key and not the lucky key.
func isRead(b []byte) bool { return bytes.Contains(b, stockKey) && !bytes.Contains(b, luckyKey) }

// isWrite matches a sale's write (MULTI SET/INCR, or the fenced-write
// script), not the MGET of GET /stock, which names lucky too.
func isWrite(b []byte) bool {
	return bytes.Contains(b, luckyKey) && !bytes.Contains(bytes.ToLower(b), []byte("mget"))
}

// hold keeps a fault in place until at, or until the run is cancelled: the
// fault's length is part of its definition, not a synchronisation.
func (x *run) hold(at time.Time) error {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-x.ctx.Done():
		return x.ctx.Err()
	}
}

// holder waits for the next read of the stock and returns who made it: the
// replica now inside its critical section.
func (x *run) holder() (int, time.Time, error) {
	w, err := x.c.Watch(isRead, false)
	if err != nil {
		return -1, time.Time{}, err
	}
	defer w.Close()
	ctx, cancel := x.until()
	defer cancel()
	ev, err := w.Next(ctx, time.Now())
	if err != nil {
		return -1, time.Time{}, err
	}
	return ev.Replica, ev.At, nil
}

// otherSells waits for a sale by a replica other than name after since;
// expected within bound, reported slow after it. The fault stays in place
// until it returns, so the sale it finds was made during the fault.
func (x *run) otherSells(name string, since time.Time, bound time.Duration) (response, error) {
	ctx, cancel := x.until()
	defer cancel()
	r, err := x.load.waitFor(ctx, since, func(r response) bool { return r.sold() && r.Replica != name })
	if err == nil {
		x.expect("a sale by a replica other than "+name, since, r.At, bound)
	}
	return r, err
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func runKill(x *run) error {
	i, readAt, err := x.holder()
	if err != nil {
		return err
	}
	name, p := localcluster.ReplicaName(i), x.c.Replica(i)
	// Kill returns once the process is reaped, by when nginx may already
	// have answered for it: the fault's moment is the signal, not the reap.
	x.faultEnd = time.Now()
	if err := p.Kill(); err != nil {
		return err
	}
	x.notef("killed %s %dms after its read", name, ms(x.faultEnd.Sub(readAt)))
	if r, err := x.otherSells(name, x.faultEnd, RecoveryBound); err == nil {
		x.recovered = r.At
	}
	// nginx must answer the killed request with an error, not replay it on
	// another replica (which could sell the unit twice).
	// Waited for, not counted at once: under load the buyer holding the 502
	// may record it after another replica's sale is recorded.
	wctx, wcancel := x.until()
	_, err = x.load.waitFor(wctx, x.faultEnd, func(r response) bool { return r.Status == http.StatusBadGateway })
	wcancel()
	if err != nil {
		x.problemf("no 502 for the requests on the killed replica: replayed?")
	}
	ctx, cancel := x.until()
	defer cancel()
	if err := p.Start(ctx); err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	return nil
}

func runPause(x *run) error {
	w, err := x.c.Watch(isWrite, true)
	if err != nil {
		return err
	}
	defer w.Close()
	ctx, cancel := x.until()
	i, err := w.Held(ctx)
	cancel()
	if err != nil {
		return err
	}
	name, p := localcluster.ReplicaName(i), x.c.Replica(i)
	if err := p.Pause(); err != nil {
		w.Release()
		return err
	}
	pausedAt := time.Now()
	resume := func() error {
		w.Release()
		return p.Resume()
	}
	other, err := x.otherSells(name, pausedAt, 3*x.lease+RecoveryBound)
	if err != nil {
		x.problemf("no other replica sold while %s was paused", name)
	} else {
		x.notef("%s paused with its write held; %s sold %dms later", name, other.Replica, ms(other.At.Sub(pausedAt)))
	}
	if err := x.hold(pausedAt.Add(2 * x.lease)); err != nil {
		_ = resume()
		return err
	}
	// The write reaches the store first, then the process wakes: the order
	// a GC pause between the last check and the write would produce.
	if err := resume(); err != nil {
		return err
	}
	x.faultEnd = time.Now()
	ctx, cancel = x.forNote(10 * time.Second)
	defer cancel()
	if r, err := x.load.waitFor(ctx, x.faultEnd, func(r response) bool { return r.Replica == name }); err == nil {
		x.notef("%s answered %q after SIGCONT", name, r.Result)
	}
	return nil
}

// runBellEarly lets the sale sell out under the broken bell; the books
// and the history check judge every answer it gave on the way.
func runBellEarly(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	r, err := x.load.waitFor(ctx, time.Now().Add(-time.Hour), func(r response) bool { return r.Result == api.SoldOut })
	if err != nil {
		return fmt.Errorf("no sell-out under the broken bell: %w", err)
	}
	x.notef("sold out at %s", r.At.Format("15:04:05.000"))
	return nil
}

func runSlowWork(x *run) error {
	delay := x.lease * 3 / 2
	ctx, cancel := x.until()
	defer cancel()
	since := time.Now().Add(-time.Hour) // count the warm-up sale too
	for n := 0; n < 3; n++ {
		r, err := x.load.waitFor(ctx, since, response.sold)
		if err != nil {
			return fmt.Errorf("only %d sales of %v each in time: %w", n, delay, err)
		}
		since = r.At.Add(time.Nanosecond)
	}
	x.notef("work %v > lease %v", delay, x.lease)
	return nil
}

func runPartition(x *run) error {
	delay := x.lease * 3 / 2
	i, _, err := x.holder()
	if err != nil {
		return err
	}
	name := localcluster.ReplicaName(i)
	restore, err := x.c.Cut(i, localcluster.LinkLock)
	if err != nil {
		return err
	}
	cutAt := time.Now()
	if other, err := x.otherSells(name, cutAt, 3*x.lease+delay+RecoveryBound); err != nil {
		x.problemf("no other replica sold while %s was cut off", name)
	} else {
		x.notef("%s cut off; %s sold %dms later", name, other.Replica, ms(other.At.Sub(cutAt)))
	}
	if err := x.hold(cutAt.Add(2 * x.lease)); err != nil {
		_ = restore()
		return err
	}
	if err := restore(); err != nil {
		return err
	}
	x.faultEnd = time.Now()
	// By send time, as in stockdown: a sale begun before the cut may end
	// after it; one begun after it cannot renew its lease (work is 1.5x it).
	sold := x.load.countSent(cutAt, func(r response) bool { return r.sold() && r.Replica == name && r.At.Before(x.faultEnd) })
	if sold > 0 {
		x.problemf("%s sold %d while cut off from the lock server", name, sold)
	}
	outcomes := map[api.Result]int{}
	x.load.count(cutAt, func(r response) bool {
		if r.Replica == name && r.At.Before(x.faultEnd) {
			outcomes[r.Result]++
		}
		return false
	})
	x.notef("%s while cut: %v", name, outcomes)
	// Recovery here means the cut replica itself: ready (recovery_ms), then
	// a sale on it, which may queue behind every buyer's 1.5-lease sale.
	readyAt, soldAt, err := x.sellOn(i, RecoveryBound, 4*delay+RecoveryBound)
	if !readyAt.IsZero() {
		x.recovered = readyAt
	}
	if err != nil {
		x.problemf("%s did not serve again after the restore: %v", name, err)
		return nil
	}
	x.notef("%s sold again %dms after the restore", name, ms(soldAt.Sub(x.faultEnd)))
	return nil
}

// runNetsplit is compose's `docker network disconnect` in the lab: the
// holder's links to the stock Redis and the lock server go silent (packets
// dropped, no reset: each side learns only from its own timeouts) for
// longer than its lease. The others must sell meanwhile; once it heals,
// the replica must become ready and sell again, and so must the cluster.
func runNetsplit(x *run) error {
	i, _, err := x.holder()
	if err != nil {
		return err
	}
	name := localcluster.ReplicaName(i)
	var restores []func() error
	for _, link := range []localcluster.Link{localcluster.LinkStock, localcluster.LinkLock} {
		r, err := x.c.Blackhole(i, link)
		if err != nil {
			return errors.Join(err, restoreAll(restores))
		}
		restores = append(restores, r)
	}
	cutAt := time.Now()
	if other, err := x.otherSells(name, cutAt, 3*x.lease+RecoveryBound); err != nil {
		x.problemf("no other replica sold while %s was silent", name)
	} else {
		x.notef("%s silent; %s sold %dms later", name, other.Replica, ms(other.At.Sub(cutAt)))
	}
	herr := x.hold(cutAt.Add(2*x.lease + time.Second))
	if err := errors.Join(herr, restoreAll(restores)); err != nil {
		return err
	}
	x.faultEnd = time.Now()
	readyAt, soldAt, err := x.sellOn(i, RecoveryBound, 2*RecoveryBound)
	if !readyAt.IsZero() {
		x.recovered = readyAt
	}
	if err != nil {
		x.problemf("%s did not serve again after the network healed: %v", name, err)
		return nil
	}
	x.notef("%s sold again %dms after the network healed", name, ms(soldAt.Sub(x.faultEnd)))
	return nil
}

// sellOn waits for replica i's /readyz to pass, then makes one sale on it
// directly, counting it in the load's books: must-happen waits (waits.go),
// expected within readyBound and sellBound of the call, reported slow
// after them. Readiness has no event to wait on from outside the process,
// so it is polled with a growing backoff.
func (x *run) sellOn(i int, readyBound, sellBound time.Duration) (readyAt, soldAt time.Time, err error) {
	ctx, cancel := x.until()
	defer cancel()
	rctx, from := ctx, time.Now()
	name := localcluster.ReplicaName(i)
	defer func() {
		if !readyAt.IsZero() {
			x.expect(name+" ready", from, readyAt, readyBound)
		}
		if !soldAt.IsZero() {
			x.expect("a sale on "+name, from, soldAt, sellBound)
		}
	}()
	base := x.c.ReplicaURL(i)
	poll := backoff.Backoff{Initial: 20 * time.Millisecond, Max: 500 * time.Millisecond}
	var last string
	for {
		wait := rctx
		if readyAt.IsZero() {
			if st, _ := httpStatus(rctx, http.MethodGet, base+"/readyz"); st == http.StatusOK {
				readyAt = time.Now()
			} else {
				last = fmt.Sprintf("readyz %d", st)
			}
		}
		if !readyAt.IsZero() {
			wait = ctx
			r := x.load.reduceAt(ctx, base+"/stock/reduce")
			if r.sold() {
				return readyAt, r.At, nil
			}
			last = fmt.Sprintf("reduce: %d %s %s", r.Status, r.Result, r.Error)
		}
		if err := poll.Wait(wait); err != nil {
			return readyAt, time.Time{}, fmt.Errorf("%w (last: %s)", err, last)
		}
	}
}

func httpStatus(ctx context.Context, method, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Reply faults: how often, for how long.
const (
	lossRate         = 0.02
	replyFaultWindow = 5 * time.Second
	slowReplyTimeout = 250 * time.Millisecond
	slowReplyDelay   = 600 * time.Millisecond
	slowReplyShare   = 0.25
)

// onEveryLink adds a fault to every replica's stock and lock links, holds it
// for replyFaultWindow and takes it away; faultEnd is then.
func (x *run) onEveryLink(add func(i int, link localcluster.Link) (func() error, error)) error {
	var removes []func() error
	removeAll := func() error {
		var errs []error
		for _, r := range removes {
			errs = append(errs, r())
		}
		return errors.Join(errs...)
	}
	for i := range x.c.Replicas() {
		for _, link := range []localcluster.Link{localcluster.LinkStock, localcluster.LinkLock} {
			rm, err := add(i, link)
			if err != nil {
				return errors.Join(err, removeAll())
			}
			removes = append(removes, rm)
		}
	}
	start := time.Now()
	err := x.hold(start.Add(replyFaultWindow))
	if rerr := removeAll(); rerr != nil {
		return errors.Join(err, rerr)
	}
	x.faultEnd = time.Now()
	sold := x.load.countSent(start, func(r response) bool { return r.sold() && r.At.Before(x.faultEnd) })
	unconfirmed := x.load.countSent(start, func(r response) bool { return r.Result == api.Unconfirmed })
	x.notef("%d sold and %d unconfirmed during the %v window; %d stock calls retried with the same attempt id",
		sold, unconfirmed, replyFaultWindow, x.saleEvents("retried"))
	return err
}

// saleEvents sums seckill_sale_events_total{event=...} over the replicas'
// /metrics (-1 if a replica could not be read): evidence that a fault took
// the path it was meant to.
func (x *run) saleEvents(event string) int {
	return x.replicaCounter("seckill_sale_events_total", "event", event)
}

// replicaCounter sums the series of counter name whose label is value
// over the replicas' /metrics, -1 if a replica could not be read.
func (x *run) replicaCounter(name, label, value string) int {
	ctx, cancel := x.until()
	defer cancel()
	urls := make([]string, x.c.Replicas())
	for i := range urls {
		urls[i] = x.c.ReplicaURL(i)
	}
	return counterSum(ctx, urls, name, map[string]string{label: value})
}

// counterSum is replicaCounter over the servers at urls.
func counterSum(ctx context.Context, urls []string, name string, labels map[string]string) int {
	total := 0
	for _, u := range urls {
		fams, err := metrics.Scrape(ctx, nil, u+"/metrics")
		if err != nil {
			return -1
		}
		v, _ := fams.Sum(name, labels)
		total += int(v)
	}
	return total
}

func runLostReply(x *run) error {
	before := localcluster.RepliesLost()
	err := x.onEveryLink(func(i int, link localcluster.Link) (func() error, error) {
		return x.c.LoseReplies(i, link, lossRate)
	})
	lost := localcluster.RepliesLost() - before
	x.notef("%d replies lost", lost)
	if lost == 0 {
		x.problemf("no reply was lost: the fault did not happen")
	}
	return err
}

func runSlowReply(x *run) error {
	return x.onEveryLink(func(i int, link localcluster.Link) (func() error, error) {
		return x.c.SlowReplies(i, link, slowReplyDelay, slowReplyShare)
	})
}

// longLife is how far the lab moves the lock's token counters before it
// makes the lock forget them: a lock server that has served about a million
// acquisitions.
const longLife = 1_000_000

// runLockForget makes the lock service lose everything — locks, queues,
// token counters — while a holder's write is on the wire. Each time the
// write is held in the proxy, the lock server forgets, another replica must
// sell (the lock is free again: two holders), and then the held write
// lands: fencing must refuse it, or it sells a unit twice. The tokens now
// start below the fence: a lock Redis (counters first aged by longLife, as
// after a long life) is flushed, and the service moves its counter past the
// fence (lock.TokenAdvancer); etcd and ZooKeeper start again empty, and the
// fence restarts once it has been quiet for one lock TTL (stock.Fence.Quiet).
func runLockForget(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	forget, rounds := func() error { return x.c.ForgetLockServer(ctx) }, 2
	if lr := x.c.LockRedis(); lr != nil && x.c.LockServer() == lr {
		rdb := redis.NewClient(&redis.Options{Addr: lr.Addr()})
		defer rdb.Close()
		var keys []string
		if err := rdb.Keys(ctx, "*:fence").ScanSlice(&keys); err != nil || len(keys) == 0 {
			return fmt.Errorf("find the token counters (%d found): %w", len(keys), err)
		}
		for _, k := range keys {
			if err := rdb.IncrBy(ctx, k, longLife).Err(); err != nil {
				return fmt.Errorf("age counter %s: %w", k, err)
			}
		}
		x.notef("counters aged by %d", longLife)
		forget, rounds = func() error { return rdb.FlushAll(ctx).Err() }, 3
	}
	var worst time.Duration
	for n := range rounds {
		if err := x.forgetOnce(forget, n+1, &worst); err != nil {
			return err
		}
	}
	x.recovered = x.faultEnd.Add(worst)
	x.notef("forgotten %d times; slowest resumption %dms", rounds, ms(worst))
	return nil
}

// forgetOnce holds the next write, flushes the lock Redis, waits for
// another replica to sell, and lets the held write go.
func (x *run) forgetOnce(forget func() error, n int, worst *time.Duration) error {
	w, err := x.c.Watch(isWrite, true)
	if err != nil {
		return err
	}
	defer w.Close()
	hctx, cancel := x.until()
	i, err := w.Held(hctx)
	cancel()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := forget(); err != nil {
		w.Release()
		return fmt.Errorf("forget %d: %w", n, err)
	}
	x.faultEnd = time.Now()
	if d := x.faultEnd.Sub(start); d > time.Second {
		x.notef("forget %d took %dms", n, ms(d))
	}
	name := localcluster.ReplicaName(i)
	r, err := x.otherSells(name, x.faultEnd, RecoveryBound)
	w.Release()
	if err != nil {
		x.problemf("no other replica sold within %v of forget %d", RecoveryBound, n)
		return nil
	}
	*worst = max(*worst, r.At.Sub(x.faultEnd))
	return nil
}

func runLockRestart(x *run) error {
	ls := x.c.LockServer()
	if ls == nil {
		return errors.New("no lock server process")
	}
	ctx, cancel := x.until()
	defer cancel()
	start := time.Now()
	if err := ls.Restart(ctx); err != nil {
		return fmt.Errorf("restart %s: %w", ls.Name(), err)
	}
	x.faultEnd = time.Now()
	x.notef("%s down and back in %dms", ls.Name(), ms(x.faultEnd.Sub(start)))
	return nil
}

func runStockDown(x *run) error {
	// Cut right after a read, so the holder is in its work and no write is
	// on the wire: a write cut mid-flight has an unknowable outcome.
	if _, _, err := x.holder(); err != nil {
		return err
	}
	var restores []func() error
	for i := range x.c.Replicas() {
		restore, err := x.c.Cut(i, localcluster.LinkStock)
		if err != nil {
			return err
		}
		restores = append(restores, restore)
	}
	cutAt := time.Now()
	restoreAll := func() error {
		var errs []error
		for _, r := range restores {
			errs = append(errs, r())
		}
		return errors.Join(errs...)
	}
	ctx, cancel := x.until()
	r, err := x.load.waitFor(ctx, cutAt, func(r response) bool {
		return r.Status == http.StatusServiceUnavailable && r.Result == api.Error && strings.Contains(r.Error, "unavailable")
	})
	cancel()
	if err != nil {
		x.problemf("no 503 error JSON naming the unavailable Redis during the outage")
	} else {
		x.notef("503 %q", firstN(r.Error, 60))
	}
	// By send time: a sale whose write landed before the cut can answer
	// after it; a request sent after every link was cut cannot sell.
	if sold := x.load.countSent(cutAt, response.sold); sold > 0 {
		x.problemf("%d sales sent while the stock Redis was unreachable", sold)
	}
	if err := x.hold(cutAt.Add(2 * x.lease)); err != nil {
		_ = restoreAll()
		return err
	}
	if err := restoreAll(); err != nil {
		return err
	}
	x.faultEnd = time.Now()
	return nil
}

func runLatency(x *run) error {
	i, _, err := x.holder()
	if err != nil {
		return err
	}
	name, d := localcluster.ReplicaName(i), 2*x.lease
	rmStock, err := x.c.Latency(i, localcluster.LinkStock, d)
	if err != nil {
		return err
	}
	rmLock, err := x.c.Latency(i, localcluster.LinkLock, d)
	if err != nil {
		_ = rmStock()
		return err
	}
	addAt := time.Now()
	remove := func() error { return errors.Join(rmLock(), rmStock()) }
	if other, err := x.otherSells(name, addAt, d+RecoveryBound); err != nil {
		x.problemf("no other replica sold while %s was slow", name)
	} else {
		x.notef("%s slowed by %v; %s sold %dms later", name, d, other.Replica, ms(other.At.Sub(addAt)))
	}
	// Keep the latency until the holder's write (sent ~work.delay after its
	// read) has come through it: removing the toxic flushes what it holds.
	if err := x.hold(addAt.Add(d + 500*time.Millisecond)); err != nil {
		_ = remove()
		return err
	}
	if err := remove(); err != nil {
		return err
	}
	x.faultEnd = time.Now()
	ctx, cancel := x.forNote(10 * time.Second)
	defer cancel()
	if r, err := x.load.waitFor(ctx, addAt, func(r response) bool { return r.Replica == name }); err == nil {
		x.notef("%s's first answer: %q", name, r.Result)
	}
	return nil
}

func runCrash(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	n := x.c.Replicas()
	crashed := make(chan int, n)
	for i := range n {
		p := x.c.Replica(i)
		go func() {
			select {
			case <-p.Exited():
				crashed <- i
			case <-ctx.Done():
			}
		}()
	}
	select {
	case i := <-crashed:
		x.faultEnd = time.Now()
		x.notef("%s died between SETNX and EXPIRE", localcluster.ReplicaName(i))
	case <-ctx.Done():
		return fmt.Errorf("no replica crashed at setnx/afterSetNX (SECKILL_FAILPOINTS armed): %w", ctx.Err())
	}
	// Watch the recovery window (Run waits RecoveryBound for a sale that
	// must not come); checkCrash judges it.
	return nil
}

func checkCrash(x *run) {
	soldAfter := x.load.count(x.faultEnd, response.sold)
	busyAfter := x.load.count(x.faultEnd, func(r response) bool { return r.Result == api.Busy })
	ctx, cancel := x.until()
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: x.c.LockServer().Addr()})
	defer rdb.Close()
	// flawedlock keeps backend B's lock K at "B:lock:K" (its documented
	// layout, Locker.RedisKey), so one demo's stuck lock spares the others.
	ttl, err := rdb.TTL(ctx, x.cell.Backend+":lock:"+lockKey).Result()
	x.notef("after the crash: %d sold, %d busy in %v; lock TTL %v (%v)", soldAfter, busyAfter, RecoveryBound, ttl, err)
	// TTL -1 (go-redis reports it as -1ns): the key exists and never expires.
	x.stuck = soldAfter == 0 && busyAfter > 0 && err == nil && ttl == -1
}

// lockKey is stockd's default lock.key.
const lockKey = "seckill:lock"

func firstN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
