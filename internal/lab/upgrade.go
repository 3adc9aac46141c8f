package lab

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"seckill/internal/api"
	"seckill/internal/backoff"
	"seckill/internal/lab/localcluster"
	"seckill/internal/orders"
	"seckill/internal/servers"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stockd"
)

// upgrade.go: the upgrade cell. Nobody upgrades a flash-sale service by
// stopping the sale: the three replicas start as the previous release
// (release/previous, built from its commit), with the witness, the
// ledger and the durable orders on, and reset and sell; mid-sale each is
// replaced by this build in turn, then one is rolled back. Judged like
// every cell (books, history, no unit answered 200 twice, none
// acknowledged lost), and after the roll the stored state is what a sale
// that never upgraded holds: the witness's record of this build's format
// with no field dropped and its ceiling where the sale's answers put it,
// and one durable order per unit sold.

// upgradeBackends run the cell, by name and in the full matrix: the
// Redis lock, and etcd's (another lock family, and the witness's server).
var upgradeBackends = []string{"redis", "etcd"}

// upgradeEnv: the stored formats the releases share (the witness's
// record, the ledger's entries, the order rows), and sales slow enough
// (100 ms each, one at a time under the lock) that the sale's units
// (the scenario's initial) outlast four replacements.
func upgradeEnv(c *stockd.Config) {
	restoreBothEnv(c)
	c.Work.Delay = stock.FixedDelay(100 * time.Millisecond)
}

// previousStockd builds the previous release's stockd (cached per commit).
func previousStockd(ctx context.Context) (localcluster.Release, string, error) {
	rel, err := localcluster.PreviousRelease(ctx)
	if err != nil {
		return rel, "", err
	}
	bin, err := localcluster.BuildRelease(ctx, rel.Commit, "")
	return rel, bin, err
}

// upgradeStep is one replacement: replica i to the binary.
type upgradeStep struct {
	replica  int
	previous bool // to the previous release (a roll back), else this build
}

var upgradeSteps = []upgradeStep{{0, false}, {1, false}, {2, false}, {1, true}}

// runUpgrade replaces the replicas one at a time, each once a sale has
// been answered by every replica of the step before, and waits for a
// sale answered by the new process.
func runUpgrade(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	rel, prev, err := previousStockd(ctx)
	if err != nil {
		return err
	}
	cur := x.c.OwnStockd()
	var steps []string
	for _, s := range upgradeSteps {
		bin, to := cur, "this build"
		if s.previous {
			bin, to = prev, rel.Name
		}
		name := localcluster.ReplicaName(s.replica)
		began := time.Now()
		if err := x.c.ReplaceReplica(ctx, s.replica, bin); err != nil {
			return fmt.Errorf("replace %s with %s: %w", name, to, err)
		}
		ready := time.Now()
		info, err := replicaRelease(ctx, x.c.ReplicaURL(s.replica))
		if err != nil {
			return fmt.Errorf("%s after its replacement: %w", name, err)
		}
		if want := map[bool]string{false: stockd.Release, true: ""}[s.previous]; info != want {
			// The previous release predates /info's release: it says none.
			return fmt.Errorf("%s runs release %q after its replacement with %s, want %q", name, info, to, want)
		}
		r, err := x.load.waitFor(ctx, ready, func(r response) bool { return r.sold() && r.Replica == name && !r.Sent.Before(ready) })
		if err != nil {
			return fmt.Errorf("no sale answered by %s after its replacement with %s (%w); before: %s", name, to, err, strings.Join(steps, ", "))
		}
		steps = append(steps, fmt.Sprintf("%s to %s: ready in %v, sold %v after", name, to, ready.Sub(began).Round(time.Millisecond), r.At.Sub(ready).Round(time.Millisecond)))
	}
	// Both releases sold after the last step.
	last := time.Now()
	for _, i := range []int{0, 1} {
		name := localcluster.ReplicaName(i)
		if _, err := x.load.waitFor(ctx, last, func(r response) bool { return r.sold() && r.Replica == name && !r.Sent.Before(last) }); err != nil {
			return fmt.Errorf("no sale answered by %s after the roll back (%w)", name, err)
		}
	}
	x.notef("from %s (%s): %s; both releases sold after", rel.Name, rel.Commit[:min(7, len(rel.Commit))], strings.Join(steps, ", "))
	return nil
}

// replicaRelease is the release a replica's GET /info names ("" from a
// release before it said).
func replicaRelease(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/info", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var info api.Info
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return "", fmt.Errorf("GET /info: %d: %w", resp.StatusCode, err)
	}
	return info.Release, nil
}

// witnessFields are the fields of the witness's record a sale that never
// upgraded holds (no operator adoption): an old release that wrote the
// record back without one of this build's would show here.
var witnessFields = []string{"format", "gen", "sales"}

// checkUpgrade compares what the mixed releases stored with what a sale
// that never upgraded holds.
func checkUpgrade(x *run) {
	ctx, cancel := x.until()
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: x.c.Redis().Addr()})
	defer rdb.Close()
	keys, err := rdb.MGet(ctx, "stock:epoch", saleIDKey).Result()
	if err != nil {
		x.problemf("read the sale's epoch and id: %v", err)
		return
	}
	epoch, _ := keys[0].(string)
	sale, _ := keys[1].(string)
	x.checkUpgradeWitness(ctx, epoch)
	x.checkUpgradeOrders(ctx, sale)
}

// checkUpgradeWitness: the record is of this build's format, has exactly
// the fields a never-upgraded sale's has, and its ceiling for the sale is
// where the answers put it (the guard is still on).
func (x *run) checkUpgradeWitness(ctx context.Context, epoch string) {
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{x.c.Etcd().Addr()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		x.problemf("witness: %v", err)
		return
	}
	defer etcd.Close()
	got, err := etcd.Get(ctx, witnessKeyName)
	if err != nil || len(got.Kvs) != 1 {
		x.problemf("read the witness's record %s: %d keys, %v", witnessKeyName, len(got.Kvs), err)
		return
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(got.Kvs[0].Value, &fields); err != nil {
		x.problemf("the witness's record: %v", err)
		return
	}
	var names []string
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	if !slices.Equal(names, witnessFields) {
		x.problemf("the witness's record has fields %v, a sale that never upgraded %v", names, witnessFields)
	}
	var rec struct {
		Format int `json:"format"`
		Sales  []struct {
			Epoch    string  `json:"epoch"`
			Ceilings []int64 `json:"ceilings"`
		} `json:"sales"`
	}
	if err := json.Unmarshal(got.Kvs[0].Value, &rec); err != nil {
		x.problemf("the witness's record: %v", err)
		return
	}
	if want := witnessWrites(); rec.Format != want {
		x.problemf("the witness's record is of format %d, this build writes %d", rec.Format, want)
	}
	for _, s := range rec.Sales {
		if s.Epoch != epoch {
			continue
		}
		// One segment: its ceiling is the least stock a sale was answered
		// sold with, held before the answer. So it is at or below every
		// 200's stock left, and at or above the stock Redis holds.
		least := int64(-1)
		for _, r := range x.load.answers() {
			if r.sold() && r.Left >= 0 && (least < 0 || r.Left < least) {
				least = r.Left
			}
		}
		if len(s.Ceilings) != 1 || s.Ceilings[0] < x.res.Stock || (least >= 0 && s.Ceilings[0] > least) {
			x.problemf("the witness's ceilings for the sale are %v; want one, at or below the least stock answered sold (%d) and at or above the stock (%d)", s.Ceilings, least, x.res.Stock)
		}
		x.notef("witness: format %d, fields %v, ceiling %v (least stock answered sold %d, stock %d)", rec.Format, names, s.Ceilings, least, x.res.Stock)
		return
	}
	x.problemf("the witness's record has no entry for the sale's epoch %q", epoch)
}

// witnessWrites is the witness format this build writes.
func witnessWrites() int {
	for _, f := range redisstore.Formats() {
		if f.Name == "witness" {
			return f.Writes
		}
	}
	return 0
}

// checkUpgradeOrders: MariaDB holds one order per unit sold, each unit
// once, whichever release took the sale (the consumers store them within
// about a second; waited for, bounded by the cell).
func (x *run) checkUpgradeOrders(ctx context.Context, sale string) {
	db, err := sql.Open("mysql", servers.MariaDBDSN(x.c.MariaDB().Addr()))
	if err != nil {
		x.problemf("orders: %v", err)
		return
	}
	defer db.Close()
	poll := backoff.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	var n, units int64
	for {
		err = db.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT unit) FROM `"+ordersTable+"` WHERE sale = ?", sale).Scan(&n, &units)
		if err == nil && n >= x.res.Lucky {
			break
		}
		if poll.Wait(ctx) != nil {
			x.problemf("MariaDB holds %d orders of sale %s (%v), want one per unit sold: %d", n, sale, err, x.res.Lucky)
			return
		}
	}
	if n != x.res.Lucky || units != n {
		x.problemf("MariaDB holds %d orders for %d distinct units of sale %s, want %d of each", n, units, sale, x.res.Lucky)
		return
	}
	// The table was made by the previous release and migrated under it
	// by this build (the format column): every row, whichever release
	// stored it, is of the format this build writes.
	var other int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+ordersTable+"` WHERE sale = ? AND format <> ?", sale, orders.RowFormat).Scan(&other); err != nil || other != 0 {
		x.problemf("MariaDB: %d orders of sale %s of another format than %d (%v)", other, sale, orders.RowFormat, err)
		return
	}
	x.notef("orders: %d in MariaDB, one per unit sold, each of format %d", n, orders.RowFormat)
}
