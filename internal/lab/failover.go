package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/backoff"
	"seckill/internal/lab/loadgen"
	"seckill/internal/servers"
	"seckill/internal/stockd"
)

// failover.go: the stock Redis fails over. The cells run the
// replicas on a replicated stock Redis behind Sentinel (localcluster's
// StartSentinel), take its primary away mid-sale — SIGKILL, or SIGSTOP
// until every Sentinel has switched — and count the acknowledged sales the
// promoted replica does not hold. With replica acks on (Cell.Acks 1) there
// must be none; the control (acks 0) may lose some, and the row shows it.

// failoverScenarios are the scenarios that need the Sentinel set.
var failoverScenarios = []string{"failover-kill", "failover-lag", "failover-stop", "split", "failover-clock", "reserve-failover"}

// IsFailover reports whether scenario takes the stock Redis primary away
// (the cells run on a Sentinel set), or fails the master of its slot on
// a Redis Cluster (clusterfaults.go).
func IsFailover(scenario string) bool {
	return slices.Contains(failoverScenarios, scenario) || isCluster(scenario)
}

// failoverBackends get the failover-kill cells in the default matrix: the
// lock in the failing Redis itself (its token counter fails over with the
// fence) and a lock outside it; failover-lag runs by default on the first.
// The others, and failover-stop, run when named: the e2e matrix has ~40 s
// for these cells.
var failoverBackends = []string{"redis", "etcd"}

// failoverAcks are the cells' stock.min_replica_acks: on, then the control.
var failoverAcks = []int{1, 0}

// failoverSentinel is Sentinel's timing in the cells: the harness's
// down-after (servers.DefaultDownAfter, 3 s: with 1 s a loaded machine saw
// a second, spurious failover right after the switch, the empty primary of
// docs/faults.md), so a failover takes seconds. failover-lag's replica replicates through a
// proxy (localcluster.LagReplication), which Sentinel would bypass after
// failover-timeout ("fixing" a replica that names another master): a long
// one keeps it in the path.
//
// The split's set is Splittable, and with acks on its nodes keep
// min-replicas-to-write 1, as a deployment that wants no acknowledged
// write lost to a split would.
func failoverSentinel(c Cell) servers.SentinelOptions {
	opt := servers.SentinelOptions{DownAfter: servers.DefaultDownAfter, FailoverTimeout: 3 * time.Second}
	switch c.Scenario {
	case "failover-lag":
		opt.FailoverTimeout = time.Minute
	case "failover-clock":
		opt.Clocks = true
	case "split":
		opt.Splittable = true
		if c.Acks > 0 {
			opt.MinReplicasToWrite = 1
		}
	}
	return opt
}

// failoverLagWindow is how long failover-lag sells with the replica
// starved before the primary is killed.
const failoverLagWindow = time.Second

// How a failover cell takes the primary away.
type failoverFault int

const (
	faultKill  failoverFault = iota // SIGKILL
	faultStop                       // SIGSTOP, SIGCONT after the switch
	faultLag                        // the replica starved, then SIGKILL
	faultSplit                      // cut off from the Sentinels and the replica, healed after the switch
)

// failoverCells are backend's failover cells for the wanted scenarios:
// failover-kill (acks 1) on failoverBackends, and failover-lag (both) and
// reserve-failover (acks 1) on redis by default (each starts a Sentinel
// set: CI's budget); failover-kill's control, failover-stop, or another
// backend, only when the scenario is named (and the backend, for one
// outside failoverBackends).
func failoverCells(b string, backends, scenarios []string) []Cell {
	var cells []Cell
	for _, s := range slices.Concat(failoverScenarios, clusterScenarios) {
		named := slices.Contains(scenarios, s)
		if len(scenarios) > 0 && !named {
			continue
		}
		ours := slices.Contains(failoverBackends, b)
		byDefault := s == "failover-kill" || s == "failover-clock" || (s == "reserve-failover" || s == "failover-lag" || s == "split" || isCluster(s)) && b == failoverBackends[0]
		if !(ours && (byDefault || named)) && !(named && slices.Contains(backends, b)) {
			continue
		}
		for _, acks := range failoverAcks {
			if acks == 0 && s == "reserve-failover" {
				// Without acks a failover loses payments answered paid
				// (10 and 12 in two runs), and their units sell again:
				// stockd refuses to start so.
				continue
			}
			if acks == 0 && !named && s != "split" && s != "cluster-lag" {
				// The controls run when named. The kill's may lose but on
				// loopback rarely does, so it proves little by default;
				// the lag's must lose (it proves the checker sees a loss),
				// but both were hit by an unexplained empty primary after
				// the failover (docs/faults.md), which a default cell must
				// not leave to chance until it is understood. The split's
				// control runs: its loss is certain (the isolated primary
				// answers sold until the replicas follow the Sentinels) and
				// no node restarts, so the empty primary has no way in.
				continue
			}
			cells = append(cells, Cell{Backend: b, Scenario: s, Fencing: true, Acks: acks})
		}
	}
	return cells
}

// failoverEnv is a failover cell's stockd configuration beyond the
// Sentinel addresses: the replica acks, and the Redis locks in the stock
// Redis (not the lab's lock Redis), so their token counter fails over too.
func failoverEnv(cell Cell) stockd.Edit {
	return func(c *stockd.Config) {
		c.Stock.MinReplicaAcks = cell.Acks
		if cell.Scenario != "failover-clock" {
			c.Lock.RedisAddr = ""
		}
	}
}

// Failover is a failover cell's own measure.
type Failover struct {
	// Acks is stock.min_replica_acks: 1, or 0 for the control.
	Acks int `json:"acks"`
	// Lost is how many 200 "sold" answers the promoted primary holds no
	// receipt of: acknowledged sales whose unit is for sale again.
	Lost int `json:"lost"`
	// SwitchMS is from the fault to every Sentinel naming the new primary,
	// RejoinMS to the old primary replicating from it.
	SwitchMS int64 `json:"switch_ms"`
	RejoinMS int64 `json:"rejoin_ms"`
	// LagSold and LagUnconfirmed are the answers to the sales sent while
	// failover-lag starved the replica (counted after the cell: with acks
	// on, an answer waits out the ack timeout).
	LagSold        int `json:"lag_sold,omitempty"`
	LagUnconfirmed int `json:"lag_unconfirmed,omitempty"`
	// StallMS is a cluster cell's longest wait for a sale after its fault
	// (clusterfaults.go): what the buyers of a failing or moving slot see.
	StallMS int64 `json:"stall_ms,omitempty"`

	// trail is each node's replication state (servers.NodeState) at the
	// cell's turns: before the fault, at the switch, after the rejoin. It
	// is told only when the books come out empty, to say which turn emptied
	// the primary.
	trail []string
	// epochs are the Sentinels' config epochs once all had switched: a
	// change after that is another failover.
	epochs []int64
}

// record notes the state of the nodes at addrs (default: both) at a turn
// of the cell.
func (x *run) record(ctx context.Context, turn string, addrs ...string) {
	if len(addrs) == 0 {
		addrs = []string{x.sentinel.Primary.Addr(), x.sentinel.Replica.Addr()}
	}
	for _, a := range addrs {
		x.res.Failover.trail = append(x.res.Failover.trail, turn+": "+servers.NodeState(ctx, a))
	}
}

// runFailoverKill SIGKILLs the stock Redis primary mid-sale, waits for
// Sentinel to promote the replica, and brings the old primary back as its
// replica (until then a cell with acks on cannot sell: nothing acks).
func runFailoverKill(x *run) error {
	return x.failover(faultKill)
}

// runFailoverLag starves the replica of the replication stream for
// failoverLagWindow while sales go on, then SIGKILLs the primary: the
// promoted replica never saw those sales. With acks on they were answered
// unconfirmed (and their receipts say not sold); the control answered them
// sold and must lose them, or the checker could not see a loss.
func runFailoverLag(x *run) error {
	return x.failover(faultLag)
}

// runSplit cuts the primary off from the Sentinels and the replica mid-sale
// — not from the stockd replicas, which sell on through it until they
// follow the Sentinels to the promoted replica — and heals the cut once
// every Sentinel has switched. Sentinel then makes the old primary a
// replica of the new, discarding what it took alone: with acks on, those
// sales were never answered sold; the control answered them and loses them.
func runSplit(x *run) error {
	return x.failover(faultSplit)
}

// runFailoverStop SIGSTOPs the primary mid-sale and SIGCONTs it once every
// Sentinel has switched: it wakes as a stale primary that Sentinel turns
// into a replica, and writes the sleeping process never answered are lost
// with its data.
func runFailoverStop(x *run) error {
	return x.failover(faultStop)
}

func (x *run) failover(fault failoverFault) error {
	stop := fault == faultStop
	set := x.sentinel
	if set == nil {
		return errors.New("no Sentinel set")
	}
	x.res.Failover = &Failover{Acks: x.cell.Acks}
	ctx, cancel := x.until()
	defer cancel()
	switched, err := set.WatchSwitch(ctx)
	if err != nil {
		return err
	}
	// Mid-sale, with sales behind it: every sale's write and the
	// replication stream are on the move when the primary goes.
	if _, err := x.load.waitFor(ctx, time.Time{}, nth(failoverSalesBefore, response.sold)); err != nil {
		return fmt.Errorf("fewer than %d sales before the fault: %w", failoverSalesBefore, err)
	}
	// The replica must hold what was sold so far before the fault: one that
	// never synced would be promoted empty and lose everything, which is
	// not the window these cells measure (WaitReplicated waits for the
	// offset of its call; the sales go on meanwhile).
	if err := set.WaitReplicated(ctx, 1); err != nil {
		return fmt.Errorf("the replica is not replicating before the fault: %w", err)
	}
	x.record(ctx, "before the fault")
	if fault == faultLag {
		restore, err := x.c.LagReplication()
		if err != nil {
			return err
		}
		// Broken for good by the kill; taking the toxic away only tidies.
		defer func() { _ = restore() }()
		x.lagFrom = time.Now()
		if err := x.hold(x.lagFrom.Add(failoverLagWindow)); err != nil {
			return err
		}
	}
	old := set.Primary
	faultAt := time.Now()
	x.lagTo = faultAt
	x.faultEnd = faultAt
	var heal func()
	switch fault {
	case faultStop:
		err = old.Pause()
	case faultSplit:
		heal, err = set.Isolate()
	default:
		err = old.Kill()
	}
	if err != nil {
		return fmt.Errorf("stop %s: %w", old.Name(), err)
	}
	defer func() {
		if heal != nil {
			heal()
		}
	}()
	resumed := false
	defer func() {
		if stop && !resumed {
			_ = old.Resume()
		}
	}()
	newPrimary, ok := <-switched
	if !ok {
		return fmt.Errorf("the Sentinels did not all switch to one new primary: %w", ctx.Err())
	}
	x.res.Failover.SwitchMS = ms(time.Since(faultAt))
	x.record(ctx, "at the switch", newPrimary) // the old one is dead or stopped
	if x.res.Failover.epochs, err = set.ConfigEpochs(ctx); err != nil {
		return fmt.Errorf("read the Sentinels' config epochs: %w", err)
	}
	// The old primary comes back: woken, or reachable again (Sentinel
	// demotes it, still running, at its next look), or restarted.
	if stop {
		resumed = true
		err = old.Resume()
	} else if heal != nil {
		heal()
		heal = nil
	} else {
		err = set.Rejoin(ctx, old)
	}
	if err != nil {
		return fmt.Errorf("bring back %s: %w", old.Name(), err)
	}
	if err := set.WaitReplicated(ctx, 1); err != nil {
		return fmt.Errorf("%s never replicated from %s: %w", old.Name(), newPrimary, err)
	}
	rejoinedAt := time.Now()
	x.res.Failover.RejoinMS = ms(rejoinedAt.Sub(faultAt))
	x.record(ctx, "after the rejoin")
	verb := map[failoverFault]string{faultKill: "killed", faultLag: "killed", faultStop: "stopped", faultSplit: "isolated"}[fault]
	x.notef("primary %s; all Sentinels switched to %s in %dms; old primary replicating %dms after the fault",
		verb, newPrimary, x.res.Failover.SwitchMS, x.res.Failover.RejoinMS)
	// Recovery (recovery_ms) is from the fault to the first sale sent after
	// it: an answer to a request sent before says nothing about the new
	// primary. Its bound runs from the old primary replicating again: with
	// acks on and one replica, nothing can be confirmed before, and a
	// woken old primary waits for Sentinel's next INFO (every 10 s) to be
	// made a replica. Then a few more sales, so a unit a lost sale put back
	// is sold again, as it would be.
	x.awaitSales(faultAt, rejoinedAt, "the old primary replicating again")
	return nil
}

// awaitSales sets the cell's recovery after a stock Redis failover: the
// first sale sent after faultAt, then failoverSalesAfter of them: must
// happen (waits.go), and are expected within RecoveryBound of servedAt
// (when the sale's Redis could confirm sales again, which served names).
func (x *run) awaitSales(faultAt, servedAt time.Time, served string) {
	after := func(r response) bool { return r.sold() && !r.Sent.Before(faultAt) }
	rctx, cancel := x.until()
	defer cancel()
	r, err := x.load.waitFor(rctx, faultAt, after)
	if err != nil {
		x.problemf("no sale after %s: %v", served, err)
		return
	}
	x.recovered = r.At
	x.expect("the first sale after "+served, servedAt, r.At, RecoveryBound)
	last, err := x.load.waitFor(rctx, faultAt, nth(failoverSalesAfter, after))
	if err != nil {
		x.problemf("fewer than %d sales after %s: %v", failoverSalesAfter, served, err)
		return
	}
	x.expect(fmt.Sprintf("%d sales after %s", failoverSalesAfter, served), servedAt, last.At, RecoveryBound)
}

// Sales a failover cell sees before its fault and after it.
const (
	failoverSalesBefore = 20
	failoverSalesAfter  = 10
)

// nth is a waitFor predicate that holds at the n-th answer satisfying pred
// (waitFor shows it each answer once).
func nth(n int, pred func(response) bool) func(response) bool {
	seen := 0
	return func(r response) bool {
		if pred(r) {
			seen++
		}
		return seen >= n
	}
}

// checkFailover: with replica acks on, an acknowledged sale lost in the
// failover fails the cell; the control only reports it.
func checkFailover(x *run) {
	f := x.res.Failover
	if f == nil {
		x.problemf("no failover measured")
		return
	}
	if !x.lagFrom.IsZero() {
		in := func(pred func(response) bool) int {
			return x.load.countSent(x.lagFrom, func(r response) bool { return r.Sent.Before(x.lagTo) && pred(r) })
		}
		f.LagSold, f.LagUnconfirmed = in(response.sold), in(func(r response) bool { return r.Result == api.Unconfirmed })
		x.notef("replica starved for %v: %d sold, %d unconfirmed", x.lagTo.Sub(x.lagFrom).Round(time.Millisecond), f.LagSold, f.LagUnconfirmed)
	}
	switch {
	case f.Lost > 0 && f.Acks > 0:
		x.problemf("lost %d acknowledged sale(s) with min_replica_acks %d", f.Lost, f.Acks)
	case f.Lost == 0 && x.res.Expect == ExpectLoss:
		x.problemf("expected acknowledged sales lost (a control: only the lost primary held them, no acks): the checker would miss a loss")
	case f.Lost > 0:
		x.notef("control: lost %d acknowledged sale(s) without replica acks", f.Lost)
	}
}

// lostSales counts the 200 "sold" answers (replays excepted) whose receipt
// the stock Redis no longer holds, asking through base. An answer without
// an attempt id cannot be checked and is an error.
func lostSales(ctx context.Context, client *http.Client, base string, resps []response) (int, error) {
	lost := 0
	for _, a := range resps {
		if !a.sold() || a.Replayed {
			continue
		}
		if a.Attempt == "" {
			return lost, fmt.Errorf("a sold answer from %s carries no attempt id", a.Replica)
		}
		sold, err := receiptSold(ctx, client, base, a.Attempt)
		if err != nil {
			return lost, fmt.Errorf("receipt of sold attempt %s: %w", a.Attempt, err)
		}
		if !sold {
			lost++
		}
	}
	return lost, nil
}

// receiptSold reads a receipt, asking again while stockd answers that it
// cannot settle it yet (a replica still catching up answers 503).
func receiptSold(ctx context.Context, client *http.Client, base, attempt string) (bool, error) {
	poll := backoff.Backoff{Initial: 20 * time.Millisecond, Max: 500 * time.Millisecond}
	for {
		sold, err := loadgen.ReceiptSold(ctx, client, base, attempt)
		if err == nil {
			return sold, nil
		}
		if werr := poll.Wait(ctx); werr != nil {
			return false, fmt.Errorf("%w (last: %w)", werr, err)
		}
	}
}

// failoverConsistent judges a failover cell's books: stock + lucky is the
// initial stock, and lucky holds every sold answer not lost, every
// unconfirmed answer whose receipt says sold, and at most one more per
// error answer (a sale that took effect with its answer cut by the fault).
// extra is how many of those there were.
func failoverConsistent(r *Result) (ok bool, extra int64) {
	held := int64(r.Sold - r.Failover.Lost + r.UnconfirmedSold)
	extra = r.Lucky - held
	ok = r.books().Balanced() && extra >= 0 && extra <= int64(r.Errors)
	return ok, extra
}

// masterBooks reads stock and lucky on the node the Sentinels name as the
// primary, past stockd, and notes them beside each node's key count: the
// lab's own check that stockd's books are the promoted primary's (a client
// following a stale Sentinel answer to an empty node would show here).
func (x *run) masterBooks(ctx context.Context) {
	set := x.sentinel
	addr, err := set.Master(ctx)
	if err != nil {
		x.problemf("ask the Sentinels for the primary: %v", err)
		return
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	vals, err := rdb.MGet(ctx, stockName, luckyName).Result()
	if err != nil {
		x.problemf("read the books on %s: %v", addr, err)
		return
	}
	num := func(v any) int64 {
		s, _ := v.(string)
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	stock, lucky := num(vals[0]), num(vals[1])
	var sizes []string
	for _, p := range []*servers.Process{set.Primary, set.Replica} {
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		n, err := c.DBSize(ctx).Result()
		c.Close()
		sizes = append(sizes, fmt.Sprintf("%s %d keys (%v)", p.Addr(), n, err))
	}
	// One fault, one failover: a second one (a Sentinel's config epoch
	// moves with every failover it adopts) promotes the old primary, maybe
	// before its sync, and resyncs the first promoted one from it.
	if epochs, err := set.ConfigEpochs(ctx); err != nil {
		x.problemf("read the Sentinels' config epochs: %v", err)
	} else if !slices.Equal(epochs, x.res.Failover.epochs) {
		x.record(ctx, "at the end")
		x.problemf("another failover after the switch: the Sentinels' config epochs went from %v to %v (now naming %s); node states: %s",
			x.res.Failover.epochs, epochs, addr, strings.Join(x.res.Failover.trail, " | "))
	}
	if stock+lucky == 0 {
		x.record(ctx, "at the end")
		x.problemf("the Sentinels' primary %s is empty (stock %d, lucky %d); node states: %s",
			addr, stock, lucky, strings.Join(x.res.Failover.trail, " | "))
	}
	if stock != x.res.Stock || lucky != x.res.Lucky {
		x.problemf("stockd's books (stock %d, lucky %d) are not the Sentinels' primary %s's (stock %d, lucky %d; %s)",
			x.res.Stock, x.res.Lucky, addr, stock, lucky, strings.Join(sizes, ", "))
	}
}

// stockd's default stock keys.
const (
	stockName = "stock"
	luckyName = "lucky"
)
