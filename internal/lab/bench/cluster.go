package bench

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/servers"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stockd"
)

// cluster.go: the same sales on one Redis and on a Redis Cluster of 3
// masters (3 replicas), side by side: 8 items at once in atomic mode
// (Redis does the whole sale: the mode a cluster can spread), the same
// under their locks, and one hot sale of 8 segments, which stays on one
// master by design (docs/cluster.md). Each run switches the replicas
// between the two layouts, so a row's runs interleave with the other
// layout's; the CPU split counts every cluster node as Redis, and says
// how the Redis CPU fell over the masters.

// RowsCluster: the cluster rows (E2EConfig.Rows).
const RowsCluster = "cluster"

// clusterShapes are the sales the cluster rows compare.
var clusterShapes = []clusterShape{
	{name: "8 items, atomic", items: 8, atomic: true},
	{name: "8 items, locked", items: 8},
	{name: "hot sale, 8 segments, locked", segments: 8},
}

type clusterShape struct {
	name     string
	items    int // 0: the default sale
	segments int
	atomic   bool
}

// ClusterRow is one shape on one layout: its median run.
type ClusterRow struct {
	Shape string `json:"shape"`
	// Layout is "one Redis" or "cluster".
	Layout      string    `json:"layout"`
	Units       int       `json:"units"`
	SalesPerSec float64   `json:"sales_per_sec"`
	Runs        []float64 `json:"runs_sales_per_sec,omitempty"`
	SoldP99     float64   `json:"sold_p99_ms"`
	CPU         RunCPU    `json:"cpu,omitempty"`
	// MasterShare is, on the cluster, each master's part of the Redis
	// CPU the median run took (sorted, largest first): 8 items over 3
	// masters share it, a hot sale's is one master's. Predicted is what
	// the design predicts: each master's part of the sales, by the
	// slots of the sale's keys.
	MasterShare []float64 `json:"master_share,omitempty"`
	Predicted   []float64 `json:"predicted_share,omitempty"`
	Consistent  bool      `json:"consistent"`
	Error       string    `json:"error,omitempty"`
}

const (
	layoutOne     = "one Redis"
	layoutCluster = "cluster"
)

// clusterLayout is the local cluster with the stock on one Redis (env
// nil) or on its Redis Cluster: what runs and what CPU is counted.
type clusterLayout struct {
	*localcluster.Cluster
	rcl *servers.RedisCluster // nil: one Redis
	env map[string]string
}

func (l clusterLayout) SetBackend(ctx context.Context, backend string, env map[string]string) error {
	e := maps.Clone(env)
	maps.Copy(e, l.env)
	return l.Cluster.SetBackend(ctx, backend, e)
}

// RedisCluster is the cluster whose nodes' CPU counts as Redis's, nil on
// one Redis (sampleCPU).
func (l clusterLayout) RedisCluster() *servers.RedisCluster { return l.rcl }

// runCluster runs the cluster rows on cl: starts its Redis Cluster, then
// per shape a calibration sale on one Redis, and cfg.Runs runs on each
// layout, alternating.
func runCluster(ctx context.Context, cl *localcluster.Cluster, cfg E2EConfig, quick bool, log *slog.Logger) []ClusterRow {
	rcl, err := cl.StartRedisCluster(ctx, servers.RedisClusterOptions{})
	var rows []ClusterRow
	if err != nil {
		for _, s := range clusterShapes {
			for _, l := range []string{layoutOne, layoutCluster} {
				rows = append(rows, ClusterRow{Shape: s.name, Layout: l, Error: firstLine(err)})
			}
		}
		return rows
	}
	layouts := []clusterLayout{{Cluster: cl}, {Cluster: cl, rcl: rcl, env: localcluster.RedisClusterEnv(rcl)}}
	for _, s := range clusterShapes {
		units := 40 * max(s.items, 1)
		var errs [2]string
		if !quick {
			r := sellShape(ctx, layouts[0], s, max(max(s.items, 1)*ItemsConcurrency*10, 2000))
			if r.err != "" || r.salesPerSec <= 0 {
				errs[0] = "calibration: " + r.err
				errs[1] = errs[0]
			}
			units = max(int(math.Ceil(r.salesPerSec*cfg.Target.Seconds())), max(s.items, 1)*ItemsConcurrency)
			log.Info("cluster: calibrated", "shape", s.name, "sales/s", int(r.salesPerSec), "units", units)
		}
		var reps [2][]itemsRun
		for run := 0; run < cfg.Runs && ctx.Err() == nil; run++ {
			for i, l := range layouts {
				if errs[i] != "" {
					continue
				}
				r := sellShape(ctx, l, s, units)
				if r.err != "" {
					errs[i] = r.err
				}
				reps[i] = append(reps[i], r)
			}
		}
		for i, l := range layouts {
			name := layoutOne
			if l.rcl != nil {
				name = layoutCluster
			}
			row := clusterRow(s.name, name, units, reps[i])
			if l.rcl != nil {
				row.Predicted = predictShares(ctx, l.rcl, s)
			}
			if errs[i] != "" {
				row.Error, row.Consistent = errs[i], false
			}
			log.Info("cluster", "shape", s.name, "layout", name, "sales/s", int(row.SalesPerSec), "consistent", row.Consistent, "err", row.Error)
			rows = append(rows, row)
		}
	}
	return rows
}

// predictShares is each master's part of s's sales, sorted largest
// first: the items' keys (loadgen.ItemIDs("bench", n), as sellItems names
// them) hashed to their masters, or the one master of the default sale.
func predictShares(ctx context.Context, rcl *servers.RedisCluster, s clusterShape) []float64 {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rcl.Addrs()})
	defer cc.Close()
	keys := []string{localcluster.ClusterStockKey}
	if s.items > 0 {
		keys = nil
		for _, id := range loadgen.ItemIDs("bench", s.items) {
			keys = append(keys, redisstore.ItemMetaKey(id))
		}
	}
	per := map[string]float64{}
	for _, m := range rcl.Masters() {
		per[m.Addr()] = 0
	}
	for _, k := range keys {
		node, err := cc.MasterForKey(ctx, k)
		if err != nil {
			return nil
		}
		per[node.Options().Addr] += 1 / float64(len(keys))
	}
	out := slices.Collect(maps.Values(per))
	slices.SortFunc(out, func(a, b float64) int { return cmpFloat(b, a) })
	for i := range out {
		out[i] = math.Round(out[i]*100) / 100
	}
	return out
}

// sellShape switches l's replicas to s and sells units of it once.
func sellShape(ctx context.Context, l clusterLayout, s clusterShape, units int) itemsRun {
	mode := stock.ModeLocked
	if s.atomic {
		mode = stock.ModeAtomic
	}
	if err := l.SetBackend(ctx, "redis", stockd.Overrides(func(c *stockd.Config) {
		c.Stock.Mode, c.Stock.Segments, c.Lock.WaitTimeout = string(mode), max(s.segments, 1), time.Minute
		// No replica acks on either layout: one Redis has no replica,
		// and the rows compare where the sales run, not WAIT.
		c.Stock.MinReplicaAcks = 0
	})); err != nil {
		return itemsRun{err: firstLine(err)}
	}
	if s.items > 0 {
		r := sellItems(ctx, l, l, s.items, units)
		r.masters = r.cpu.Masters
		return r
	}
	before := sampleCPU(l)
	rep, err := loadgen.Run(ctx, loadgen.Config{
		URL: l.URL(), AdminToken: l.AdminToken(), Requests: units, Concurrency: ItemsConcurrency,
		Stock: units, Timeout: 2 * time.Minute, NoHistory: true,
	})
	r := itemsRun{expected: units}
	if err != nil {
		r.err = firstLine(err)
	}
	if rep == nil {
		return r
	}
	r.sold = rep.Sold
	r.cpu = sampleCPU(l).split(before, rep.Sold)
	r.masters = r.cpu.Masters
	if rep.DurationMS > 0 {
		r.salesPerSec = float64(rep.Sold) / (rep.DurationMS / 1000)
	}
	r.p99, r.busy, r.errors = rep.P99ms, rep.Busy, rep.Errors
	r.consistent = rep.Consistent && rep.Oversold == 0 && rep.Sold == units
	return r
}

// clusterRow is a row from its runs: the median by sales/s.
func clusterRow(shape, layout string, units int, runs []itemsRun) ClusterRow {
	row := ClusterRow{Shape: shape, Layout: layout, Units: units, Consistent: len(runs) > 0}
	if len(runs) == 0 {
		row.Error = "no run"
		return row
	}
	var med itemsRun
	row.Runs, row.Consistent, med = summarize(runs)
	row.SalesPerSec, row.SoldP99, row.CPU = med.salesPerSec, med.p99, med.cpu
	if total := sum(med.masters); total > 0 {
		for _, m := range med.masters {
			row.MasterShare = append(row.MasterShare, math.Round(m/total*100)/100)
		}
		slices.SortFunc(row.MasterShare, func(a, b float64) int { return cmpFloat(b, a) })
	}
	row.CPU.Masters = nil
	return row
}

func sum(fs []float64) float64 {
	var t float64
	for _, f := range fs {
		t += f
	}
	return t
}

// clusterRowOf finds shape's row on layout.
func (r *Report) clusterRowOf(shape, layout string) (ClusterRow, bool) {
	for _, row := range r.Cluster {
		if row.Shape == shape && row.Layout == layout {
			return row, true
		}
	}
	return ClusterRow{}, false
}

// clusterGoals: every book exact on both layouts, and on the cluster the
// Redis CPU falls over the masters as the design predicts (the items by
// their slots, a hot sale on one master). Sales/s are reported beside
// them, not judged: on this machine every master shares the same cores.
func (r *Report) clusterGoals() []Goal {
	var goals []Goal
	for _, s := range clusterShapes {
		g := Goal{
			Name: "cluster vs one Redis: " + s.name,
			Want: "every book exact on both; each master's share of the Redis CPU within 0.1 of its share of the sales (by the keys' slots)",
		}
		// Locked items also run every item's lock on the lock key's one
		// master ({lock}): their split is shown, not judged.
		shares := s.atomic || s.items == 0
		if !shares {
			g.Want = "every book exact on both (the locks' master also takes every item's lock: the split is shown, not judged)"
		}
		one, ok1 := r.clusterRowOf(s.name, layoutOne)
		many, ok2 := r.clusterRowOf(s.name, layoutCluster)
		switch {
		case !ok1 || !ok2:
			g.Unmeasured = "cluster rows not run"
		case one.Error != "" || !one.Consistent || one.SalesPerSec <= 0:
			g.Unmeasured = "the one-Redis row failed"
		case many.Error != "" || !many.Consistent:
			g.Unmeasured = "the cluster row failed"
		case len(many.MasterShare) == 0 || len(many.MasterShare) != len(many.Predicted):
			g.Unmeasured = "no CPU split of the masters"
		default:
			g.Met = true
			for i := range many.Predicted {
				g.Met = g.Met && (!shares || math.Abs(many.MasterShare[i]-many.Predicted[i]) <= 0.1)
			}
			g.Measured = fmt.Sprintf("masters' shares %v, predicted %v; %.2f× one Redis's sales/s (%.0f vs %.0f; Redis µs/sale %.0f vs %.0f)",
				many.MasterShare, many.Predicted, many.SalesPerSec/one.SalesPerSec, many.SalesPerSec, one.SalesPerSec, many.CPU.Redis, one.CPU.Redis)
		}
		goals = append(goals, g)
	}
	return goals
}

// writeCluster writes the cluster's table.
func (r *Report) writeCluster(p func(string, ...any)) {
	if len(r.Cluster) == 0 {
		return
	}
	p("\n## One Redis or a Redis Cluster\n\n")
	p("The same sales on one Redis and on a local Redis Cluster (3 masters, 3 replicas, `redis.cluster.addrs`,\n")
	p("the default sale under `{stock}`), %d buyers in flight behind nginx, the runs of the two layouts\n", ItemsConcurrency)
	p("alternating; each row's stock is sized from a calibration sale on one Redis to sell for about %s, median\n", r.ClusterTarget)
	p("of the runs. *Redis µs/sale* counts every node of the cluster, its replicas' included; *masters' shares* is how\n")
	p("the masters split it, *predicted* each master's part of the sales by the slots of the sale's keys.\n")
	p("`stock.min_replica_acks` is 0 on both layouts (one Redis has no replica): the rows compare where the sales run.\n\n")
	p("| sale | layout | units | sales/s | runs | sold p99 | cores busy | stockd µs/sale | Redis µs/sale | other µs/sale | masters' shares | predicted | books |\n")
	p("|---|---|--:|--:|---|--:|--:|--:|--:|--:|---|---|---|\n")
	for _, row := range r.Cluster {
		books := "exact"
		if !row.Consistent {
			books = "**NO** " + cellText(row.Error)
		}
		shares, predicted := "-", "-"
		if len(row.MasterShare) > 0 {
			shares = fmt.Sprint(row.MasterShare)
		}
		if len(row.Predicted) > 0 {
			predicted = fmt.Sprint(row.Predicted)
		}
		c := row.CPU
		p("| %s | %s | %d | %.0f | %s | %.1f ms | %.2f | %.0f | %.0f | %.0f | %s | %s | %s |\n",
			row.Shape, row.Layout, row.Units, row.SalesPerSec, runList(row.Runs), row.SoldP99,
			c.CoresBusy, c.Stockd, c.Redis, c.Other, shares, predicted, books)
	}
}
