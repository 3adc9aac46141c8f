package lab

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/health"
	"seckill/internal/lab/localcluster"
	"seckill/internal/servers"
)

// clusterfaults.go: the stock Redis is a Redis Cluster (localcluster's
// StartRedisCluster: 3 masters, 3 replicas), the replicas sell the default
// sale under one hash tag ({stock}), and the master holding it fails or
// its slot moves mid-sale. They are failover cells (IsFailover): the same
// count of acknowledged sales lost, by receipt, and the same books.

// clusterScenarios run on a Redis Cluster.
var clusterScenarios = []string{"cluster-kill", "cluster-lag", "cluster-failover", "cluster-move", "cluster-items"}

func isCluster(scenario string) bool { return slices.Contains(clusterScenarios, scenario) }

// clusterNodeTimeout is cluster-node-timeout in the cells: a killed
// master's replica is promoted about two of these after the kill.
const clusterNodeTimeout = 2 * time.Second

// clusterMoveBatch is how many keys one MIGRATE moves in cluster-move: the
// sale's slot holds a receipt per sale, so the move takes several batches,
// and sales run between them (the slot split over two masters).
const clusterMoveBatch = 10

// stockMaster finds the master process holding the default sale's slot.
func (x *run) stockMaster(ctx context.Context, cc *redis.ClusterClient) (*servers.Process, error) {
	node, err := cc.MasterForKey(ctx, localcluster.ClusterStockKey)
	if err != nil {
		return nil, fmt.Errorf("the master of %s: %w", localcluster.ClusterStockKey, err)
	}
	for _, m := range append(x.rcluster.Masters(), x.rcluster.Replicas()...) {
		if m.Addr() == node.Options().Addr {
			return m, nil
		}
	}
	return nil, fmt.Errorf("%s's master %s is none of the cluster's nodes", localcluster.ClusterStockKey, node.Options().Addr)
}

func (x *run) clusterClient() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: x.rcluster.Addrs(), MaxRetries: -1})
}

// runClusterKill SIGKILLs the master of the sale's slot mid-sale; the
// cluster promotes its replica, and the old master, started again,
// rejoins as the new one's replica (until then a cell with acks on cannot
// sell: nothing acks).
func runClusterKill(x *run) error { return x.clusterFault("kill") }

// runClusterLag cuts the replica of the sale's master off its stream
// (SIGSTOP it, and the master drops its connection), sells for
// clusterLagWindow, then SIGKILLs the master and wakes the replica, which
// is promoted without those sales. With acks on they were answered
// unconfirmed; the control answered them sold and must lose them.
func runClusterLag(x *run) error { return x.clusterFault("lag") }

// clusterLagWindow is how long cluster-lag sells with the replica cut off:
// well under cluster-node-timeout, so the stopped replica is not failed.
const clusterLagWindow = 500 * time.Millisecond

// runClusterFailover has the replica of the sale's master take over with
// CLUSTER FAILOVER: the manual failover, which pauses the master's clients
// until the replica has caught up, so it should lose nothing even without
// acks.
func runClusterFailover(x *run) error { return x.clusterFault("failover") }

// runClusterMove moves the sale's slot to another master mid-sale, as
// `redis-cli --cluster reshard` does, clusterMoveBatch keys at a time
// with sales between batches.
func runClusterMove(x *run) error { return x.clusterFault("move") }

func (x *run) clusterFault(kind string) error {
	if x.rcluster == nil {
		return fmt.Errorf("no Redis Cluster")
	}
	x.res.Failover = &Failover{Acks: x.cell.Acks}
	ctx, cancel := x.until()
	defer cancel()
	cc := x.clusterClient()
	defer cc.Close()
	if _, err := x.load.waitFor(ctx, time.Time{}, nth(failoverSalesBefore, response.sold)); err != nil {
		return fmt.Errorf("fewer than %d sales before the fault: %w", failoverSalesBefore, err)
	}
	master, err := x.stockMaster(ctx, cc)
	if err != nil {
		return err
	}
	replica := x.rcluster.ReplicaOf(master)
	faultAt := time.Now()
	x.faultEnd = faultAt
	var rejoinedAt time.Time
	switch kind {
	case "kill", "lag":
		if kind == "lag" {
			if err := x.starve(ctx, master, replica); err != nil {
				return err
			}
		}
		faultAt = time.Now()
		x.faultEnd = faultAt
		if err := master.Kill(); err != nil {
			return err
		}
		if kind == "lag" {
			if err := replica.Resume(); err != nil {
				return err
			}
		}
		np, err := x.rcluster.WaitPromoted(ctx, master)
		if err != nil {
			return err
		}
		x.res.Failover.SwitchMS = ms(time.Since(faultAt))
		// What the promoted replica held: the first thing to read when
		// the books do not balance.
		x.notef("promoted: %s", servers.NodeState(ctx, np.Addr()))
		if err := master.Start(ctx); err != nil {
			return fmt.Errorf("start %s again: %w", master.Name(), err)
		}
		if err := waitReplicating(ctx, master.Addr()); err != nil {
			return err
		}
		rejoinedAt = time.Now()
		x.res.Failover.RejoinMS = ms(rejoinedAt.Sub(faultAt))
		x.notef("master %s killed; replica %s promoted in %dms; old master replicating %dms after the kill",
			master.Addr(), np.Addr(), x.res.Failover.SwitchMS, x.res.Failover.RejoinMS)
	case "failover":
		rdb := redis.NewClient(&redis.Options{Addr: replica.Addr(), MaxRetries: -1})
		err := rdb.ClusterFailover(ctx).Err()
		rdb.Close()
		if err != nil {
			return fmt.Errorf("CLUSTER FAILOVER on %s: %w", replica.Addr(), err)
		}
		if _, err := x.rcluster.WaitPromoted(ctx, master); err != nil {
			return err
		}
		// The old master turns into the new one's replica by itself.
		if err := waitReplicating(ctx, master.Addr()); err != nil {
			return err
		}
		rejoinedAt = time.Now()
		x.res.Failover.SwitchMS = ms(rejoinedAt.Sub(faultAt))
		x.res.Failover.RejoinMS = x.res.Failover.SwitchMS
		x.notef("CLUSTER FAILOVER: %s took over from %s in %dms", replica.Addr(), master.Addr(), x.res.Failover.SwitchMS)
	case "move":
		to := x.rcluster.Masters()[0]
		for _, m := range x.rcluster.Masters() {
			if m != master {
				to = m
				break
			}
		}
		slot, err := cc.ClusterKeySlot(ctx, localcluster.ClusterStockKey).Result()
		if err != nil {
			return err
		}
		batches := 0
		// Between batches, sales run against the split slot (ASK,
		// TRYAGAIN): held until an answer comes, at most a second.
		step := func() {
			batches++
			sctx, scancel := context.WithTimeout(ctx, time.Second)
			defer scancel()
			_, _ = x.load.waitFor(sctx, time.Now(), func(r response) bool { return true })
		}
		if err := x.rcluster.MigrateSlot(ctx, int(slot), clusterMoveBatch, master, to, step); err != nil {
			return err
		}
		rejoinedAt = time.Now()
		// Recovery counts from the slot settled on its new master: the
		// move's own length is the stall, reported beside it.
		x.faultEnd = rejoinedAt
		x.res.Failover.SwitchMS = ms(rejoinedAt.Sub(faultAt))
		x.res.Failover.RejoinMS = x.res.Failover.SwitchMS
		x.notef("slot %d moved from %s to %s in %dms, %d batches of %d keys", slot, master.Addr(), to.Addr(),
			x.res.Failover.SwitchMS, batches, clusterMoveBatch)
	default:
		return fmt.Errorf("unknown cluster fault %q", kind)
	}
	if x.res.Expect == ExpectLoss {
		return x.haltedAfterLoss(faultAt, rejoinedAt)
	}
	// Recovery, as in the Sentinel cells: from the fault to the first
	// sale sent after it, bounded from the sale's slot being served (and
	// replicated) again; then a few more sales.
	x.awaitSales(faultAt, rejoinedAt, "the slot being served again")
	// The longest time without a sale around the fault: what buyers of a
	// moving or failing slot wait.
	var gap time.Duration
	last := faultAt
	for _, a := range x.load.answers() {
		if !a.sold() || a.At.Before(faultAt) {
			continue
		}
		gap = max(gap, a.At.Sub(last))
		last = a.At
	}
	x.res.Failover.StallMS = ms(gap)
	x.notef("longest wait for a sale after the fault %dms", x.res.Failover.StallMS)
	return nil
}

func role(info string) string { v, _ := health.InfoField(info, "role"); return v }
func link(info string) string { v, _ := health.InfoField(info, "master_link_status"); return v }

// haltedAfterLoss is the control's verdict after the fault: the promoted
// replica lacks sales answered sold, its stock above the lowest a stockd
// answered, so every stockd that sold must halt the sale (503 store_lost:
// the stock Redis went back in time) rather than sell those units again.
func (x *run) haltedAfterLoss(faultAt, rejoinedAt time.Time) error {
	x.faultEnd = time.Time{} // nothing to recover to: the halt is the verdict
	rctx, cancel := x.until()
	defer cancel()
	halted, err := x.load.waitFor(rctx, faultAt, func(r response) bool {
		return r.Result == api.StoreLost && !r.Sent.Before(faultAt)
	})
	if err != nil {
		x.problemf("no 503 store_lost after the replica's promotion: the rewound stock was not caught (%v)", err)
		return nil
	}
	x.expect("the first 503 store_lost", rejoinedAt, halted.At, RecoveryBound)
	// Once one replica has halted, a sale sent after that is refused by
	// it; another replica that never sold since the fault may still sell
	// once (it has nothing to compare), so the count is of every replica's.
	if n := x.load.countSent(halted.At.Add(time.Second), response.sold); n > 0 {
		x.problemf("%d sale(s) sent more than 1s after the first store_lost answered sold: the rewind is not caught everywhere", n)
	}
	x.notef("the promoted replica went back in time: sales halted (store_lost) %dms after the kill", ms(halted.At.Sub(faultAt)))
	return nil
}

// starve stops the replica and has the master drop its connection, then
// sells for clusterLagWindow: the master's writes from then on reach no
// replica (a woken replica finds its link closed, its master dead).
func (x *run) starve(ctx context.Context, master, replica *servers.Process) error {
	// The sales before the lag must be on the replica, so that what the
	// control loses is the lag's sales, not a replica already behind.
	if err := servers.WaitReplicated(ctx, master.Addr(), localcluster.ClusterStockKey+":lab:synced", 1); err != nil {
		return fmt.Errorf("%s's replica before the lag: %w: %s", master.Addr(), err, servers.NodeState(ctx, master.Addr()))
	}
	if err := replica.Pause(); err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: master.Addr(), MaxRetries: -1})
	err := rdb.ClientKillByFilter(ctx, "TYPE", "replica").Err()
	rdb.Close()
	if err != nil {
		_ = replica.Resume()
		return fmt.Errorf("drop %s's replica: %w", master.Addr(), err)
	}
	x.lagFrom = time.Now()
	x.lagTo = x.lagFrom.Add(clusterLagWindow)
	if err := x.hold(x.lagTo); err != nil {
		_ = replica.Resume()
		return err
	}
	return nil
}

// waitReplicating polls the node at addr until it is a replica whose link
// to its master is up: a restarted or demoted master has rejoined.
func waitReplicating(ctx context.Context, addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer rdb.Close()
	for {
		info, err := rdb.Info(ctx, "replication").Result()
		if err == nil && role(info) == "slave" && link(info) == "up" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s is not replicating: %w (last: %v)", addr, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clusterBooks reads stock and lucky in the cluster, past stockd: the
// lab's own check that stockd's books are the sale's master's.
func (x *run) clusterBooks(ctx context.Context) {
	cc := x.clusterClient()
	defer cc.Close()
	vals, err := cc.MGet(ctx, localcluster.ClusterStockKey, localcluster.ClusterLuckyKey).Result()
	if err != nil {
		x.problemf("read the books in the cluster: %v", err)
		return
	}
	num := func(v any) int64 {
		s, _ := v.(string)
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	stock, lucky := num(vals[0]), num(vals[1])
	if stock != x.res.Stock || lucky != x.res.Lucky {
		x.problemf("stockd's books (stock %d, lucky %d) are not the cluster's (stock %d, lucky %d)",
			x.res.Stock, x.res.Lucky, stock, lucky)
	}
}
