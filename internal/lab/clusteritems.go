package lab

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lab/loadgen"
	"seckill/internal/servers"
	"seckill/internal/stock/redisstore"
)

// clusteritems.go: the cluster-items cell. Two items on two masters of a
// Redis Cluster are sold at once; once the first has sold clusterItemsAt,
// its master is killed. The item on the other master must not notice (it
// sells on while the first's slot fails over, and sells out exactly); the
// first stalls until its replica is promoted and its old master rejoins
// (acks 1), then sells again; neither loses an acknowledged sale nor sells
// one twice, each by its own books and history (addItem).

const (
	clusterItemsAt    = 30
	clusterItemsStock = 150
)

// clusterItemIDs picks two items whose slots are on two masters.
func clusterItemIDs(ctx context.Context, cc *redis.ClusterClient) (a, b string, err error) {
	seen := map[string]string{} // master → the first id on it
	for i := range 64 {
		id := fmt.Sprintf("lab-cl-%d", i)
		node, err := cc.MasterForKey(ctx, redisstore.ItemMetaKey(id))
		if err != nil {
			return "", "", err
		}
		addr := node.Options().Addr
		if _, ok := seen[addr]; ok {
			continue
		}
		seen[addr] = id
		if a == "" {
			a = id
		} else {
			return a, id, nil
		}
	}
	return "", "", errors.New("no two items on two masters")
}

func runClusterItems(x *run) error {
	if x.rcluster == nil {
		return errors.New("no Redis Cluster")
	}
	x.res.Failover = &Failover{Acks: x.cell.Acks}
	cc := x.clusterClient()
	defer cc.Close()
	ctx, cancel := x.until()
	defer cancel()
	hit, bystander, err := clusterItemIDs(ctx, cc)
	if err != nil {
		return err
	}
	node, err := cc.MasterForKey(ctx, redisstore.ItemMetaKey(hit))
	if err != nil {
		return err
	}
	var master *servers.Process
	for _, m := range x.rcluster.Masters() {
		if m.Addr() == node.Options().Addr {
			master = m
		}
	}
	if master == nil {
		return fmt.Errorf("%s's master %s is not one the cluster was formed with", hit, node.Options().Addr)
	}
	// Buyers arrive at a fixed rate, for long enough that both items
	// still sell when the master dies and the hit one outlasts its
	// failover: the bystander's stock lasts about 7 s, the kill comes
	// after about 1 s, the failover takes about 4.
	cfgs := []loadgen.Config{
		x.itemRun(hit, loadgen.Config{Stock: clusterItemsStock, Rate: 40, Duration: 12 * time.Second}),
		x.itemRun(bystander, loadgen.Config{Stock: clusterItemsStock, Rate: 20, Duration: 12 * time.Second}),
	}
	reports, errs := make([]*loadgen.Report, 2), make([]error, 3)
	var wg sync.WaitGroup
	for i := range cfgs {
		wg.Go(func() { reports[i], errs[i] = loadgen.Run(x.ctx, cfgs[i]) })
	}
	var (
		killAt, promotedAt, rejoinedAt time.Time
		killedAt                       int64 // the hit item's lucky at the kill
	)
	func() {
		if killedAt, err = waitSold(ctx, cc, hit, clusterItemsAt); err != nil {
			errs[2] = err
			return
		}
		killAt = time.Now()
		if err := master.Kill(); err != nil {
			errs[2] = err
			return
		}
		if _, err := x.rcluster.WaitPromoted(ctx, master); err != nil {
			errs[2] = err
			return
		}
		promotedAt = time.Now()
		if err := master.Start(ctx); err != nil {
			errs[2] = fmt.Errorf("start %s again: %w", master.Name(), err)
			return
		}
		if err := waitReplicating(ctx, master.Addr()); err != nil {
			errs[2] = err
			return
		}
		rejoinedAt = time.Now()
	}()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	x.res.Failover.SwitchMS = ms(promotedAt.Sub(killAt))
	x.res.Failover.RejoinMS = ms(rejoinedAt.Sub(killAt))
	h := x.addItem(hit, "master killed", reports[0])
	b := x.addItem(bystander, "bystander", reports[1])
	// Lost: sales told (sold, or unconfirmed and settled sold) the
	// item's lucky does not hold.
	for _, rep := range reports {
		x.res.Failover.Lost += max(0, rep.Sold+rep.UnconfirmedSold-int(rep.Lucky))
	}
	soldBetween := func(rep *loadgen.Report, from, to time.Time) int {
		n := 0
		for _, a := range rep.Answers {
			if a.Outcome == loadgen.OutcomeSold && !a.Sent.Before(from) && a.Sent.Before(to) {
				n++
			}
		}
		return n
	}
	during := soldBetween(reports[1], killAt, promotedAt)
	afterHit := soldBetween(reports[0], rejoinedAt, time.Now())
	hitDown := soldBetween(reports[0], killAt, rejoinedAt)
	if !reports[1].OK() || b.Sold != clusterItemsStock || b.Lucky != clusterItemsStock || b.Stock != 0 {
		x.problemf("%s (bystander) did not sell out exactly: verdict %q, sold %d, lucky %d, stock %d", bystander, b.Verdict, b.Sold, b.Lucky, b.Stock)
	}
	if during == 0 {
		x.problemf("%s (bystander, on another master) sold nothing while %s's master was down: a master's failure stalled another's items", bystander, hit)
	}
	if afterHit == 0 && h.Lucky < clusterItemsStock {
		x.problemf("%s sold nothing after its old master rejoined, with %d left", hit, h.Stock)
	}
	if x.res.Failover.Lost > 0 && x.cell.Acks > 0 {
		x.problemf("lost %d acknowledged sale(s) with min_replica_acks %d", x.res.Failover.Lost, x.cell.Acks)
	}
	x.notef("%s's master %s killed at lucky %d: promoted in %dms, rejoined %dms after; %s sold %d sent before the rejoin, %d after (lucky %d, stock %d); %s on another master sold %d while it was down, out %d/%d",
		hit, master.Addr(), killedAt, x.res.Failover.SwitchMS, x.res.Failover.RejoinMS, hit, hitDown, afterHit, h.Lucky, h.Stock,
		bystander, during, b.Lucky, clusterItemsStock)
	return nil
}
