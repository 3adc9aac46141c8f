package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/health"
	"seckill/internal/lab/loadgen"
	"seckill/internal/servers"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stockd"
)

// memory.go: what a large sale holds in the stock Redis. One sale of
// MemoryUnits (a million) through the cluster, atomic mode (the fastest
// sale, so the one whose orders pile up fastest ahead of the consumers),
// anonymous buyers, durable orders with stockd's default trimming: the
// stock Redis's dataset is sampled through the sale, its peak is the
// figure a sale must plan its maxmemory for, and what stays once every
// order is stored and trimmed is the retained cost per unit. Not in the
// default row sets: it sells for minutes.

// RowsMemory: a million-unit sale's Redis memory (E2EConfig.Rows).
const RowsMemory = "memory"

// MemoryUnits is the memory row's sale (quick: memoryQuickUnits).
const (
	MemoryUnits      = 1_000_000
	memoryQuickUnits = 2000
)

// Timing of the memory row: the dataset is sampled every memorySample;
// the drain after the last answer is waited for at most memoryDrain.
const (
	memorySample = 200 * time.Millisecond
	memoryDrain  = 5 * time.Minute
)

// MemoryRow is the memory row.
type MemoryRow struct {
	Mode        string  `json:"mode"`
	Units       int     `json:"units"`
	Sold        int     `json:"sold"`
	Seconds     float64 `json:"seconds"`
	SalesPerSec float64 `json:"sales_per_sec"`
	// Baseline is the dataset after the reset, before the sale; Peak the
	// most it grew by during the sale and its drain, PeakBacklog the most
	// ledger entries the stream held at once (sold, not yet stored and
	// trimmed); Retained what it grew by once every order was stored and
	// trimmed. Bytes: INFO used_memory_dataset.
	Baseline    int64 `json:"baseline_bytes"`
	Peak        int64 `json:"peak_bytes"`
	PeakBacklog int64 `json:"peak_backlog"`
	Retained    int64 `json:"retained_bytes"`
	// DrainMS is from the sale's last answer to every order stored and
	// trimmed; Durable the rows MySQL holds of the sale then.
	DrainMS    float64 `json:"drain_ms"`
	Durable    int64   `json:"durable"`
	Consistent bool    `json:"consistent"`
	Error      string  `json:"error,omitempty"`
}

// PeakPerUnit and RetainedPerUnit are the peak and retained bytes per
// unit sold.
func (r MemoryRow) PeakPerUnit() float64     { return perUnit(r.Peak, r.Sold) }
func (r MemoryRow) RetainedPerUnit() float64 { return perUnit(r.Retained, r.Sold) }

func perUnit(b int64, n int) float64 {
	if n <= 0 {
		return 0
	}
	return float64(b) / float64(n)
}

// runMemory runs the memory row on cl.
func runMemory(ctx context.Context, cl replicas, cfg E2EConfig, quick bool, log *slog.Logger) MemoryRow {
	units := MemoryUnits
	if quick {
		units = memoryQuickUnits
	}
	row := MemoryRow{Mode: LabelAtomic, Units: units}
	rp, ok := cl.(interface{ Redis() *servers.Process })
	if !ok || rp.Redis() == nil {
		row.Error = "no stock Redis to measure"
		return row
	}
	log.Info("memory: switching replicas (atomic, durable orders)", "units", units)
	if err := cl.SetBackend(ctx, "none", stockd.Overrides(cfg.env(true), func(c *stockd.Config) {
		c.Stock.Ledger, c.Orders.Durable = true, true
	})); err != nil {
		row.Error = firstLine(err)
		return row
	}
	rdb := redis.NewClient(&redis.Options{Addr: rp.Redis().Addr()})
	defer rdb.Close()
	hc := loadgen.NewClient(1, 10*time.Second)
	if err := loadgen.Reset(ctx, hc, cl.URL(), cl.AdminToken(), units); err != nil {
		row.Error = firstLine(err)
		return row
	}
	// Items sold by earlier rows (the items rows) had no durable copy:
	// now their ledgers are stored and trimmed, which the baseline must
	// not see shrinking under the sale.
	if err := itemsDrained(ctx, rdb); err != nil {
		row.Error = firstLine(err)
		return row
	}
	var err error
	if row.Baseline, err = health.DatasetMemory(ctx, rdb); err != nil {
		row.Error = firstLine(err)
		return row
	}
	probe := newPeakProbe(ctx, rdb, "stock:orders", row.Baseline)
	rep, err := loadgen.Run(ctx, loadgen.Config{
		URL: cl.URL(), AdminToken: cl.AdminToken(), Stock: units, Requests: units, Concurrency: 64,
		// The run resets the sale again: a no-op for memory.
		Timeout: 30 * time.Minute, NoHistory: true,
	})
	if err != nil {
		probe.stop()
		row.Error = firstLine(err)
		return row
	}
	row.Sold, row.Seconds = rep.Sold, rep.DurationMS/1000
	if row.Seconds > 0 {
		row.SalesPerSec = float64(rep.Sold) / row.Seconds
	}
	ended := time.Now()
	l, err := drained(ctx, hc, cl.URL(), cl.AdminToken(), rdb, "stock:orders", int64(rep.Sold))
	row.DrainMS = float64(time.Since(ended).Microseconds()) / 1000
	row.Peak, row.PeakBacklog = probe.stop()
	if err != nil {
		row.Error = firstLine(err)
		return row
	}
	after, err := health.DatasetMemory(ctx, rdb)
	if err != nil {
		row.Error = firstLine(err)
		return row
	}
	row.Retained = after - row.Baseline
	row.Durable = *l.Durable
	row.Consistent = rep.OK() && rep.Oversold == 0 && rep.Sold == units && row.Durable == int64(units)
	log.Info("memory", "units", units, "sales/s", int(row.SalesPerSec), "peak_MiB", row.Peak>>20,
		"peak_B/unit", int(row.PeakPerUnit()), "retained_B/unit", int(row.RetainedPerUnit()),
		"peak_backlog", row.PeakBacklog, "drain_ms", int(row.DrainMS), "consistent", row.Consistent)
	return row
}

// itemsDrained waits (polling: the consumers run in the replicas) until
// every item's ledger stream is stored and trimmed empty, at most
// memoryDrain.
func itemsDrained(ctx context.Context, rdb *redis.Client) error {
	deadline := time.Now().Add(memoryDrain)
	for {
		ids, err := rdb.HKeys(ctx, redisstore.ItemRegistry).Result()
		left := int64(0)
		for _, id := range ids {
			if err != nil {
				break
			}
			var n int64
			n, err = rdb.XLen(ctx, redisstore.ItemKeys(redisstore.Keys{Orders: "stock:orders"}, id).Orders).Result()
			left += n
		}
		if err == nil && left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("earlier rows' items not drained in %v: %d entries left (%v)", memoryDrain, left, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// peakProbe samples the dataset's growth over base and the stream's
// length until stopped, keeping the most of each.
type peakProbe struct {
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	peak, queue int64
}

func newPeakProbe(ctx context.Context, rdb *redis.Client, stream string, base int64) *peakProbe {
	ctx, cancel := context.WithCancel(ctx)
	p := &peakProbe{cancel: cancel}
	p.wg.Go(func() {
		t := time.NewTicker(memorySample)
		defer t.Stop()
		for {
			if b, err := health.DatasetMemory(ctx, rdb); err == nil {
				p.peak = max(p.peak, b-base)
			}
			if n, err := rdb.XLen(ctx, stream).Result(); err == nil {
				p.queue = max(p.queue, n)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return p
}

// stop ends the sampling and returns the peaks.
func (p *peakProbe) stop() (peak, queue int64) {
	p.cancel()
	p.wg.Wait()
	return p.peak, p.queue
}

// drained waits (polling: the drain happens in other processes) until
// GET /ledger says every one of sold orders is stored with no lag and the
// stream is trimmed empty, at most memoryDrain; it returns that ledger.
func drained(ctx context.Context, hc *http.Client, url, admin string, rdb *redis.Client, stream string, sold int64) (api.Ledger, error) {
	deadline := time.Now().Add(memoryDrain)
	var (
		l    api.Ledger
		xlen int64
	)
	for {
		var err error
		l, err = loadgen.GetLedger(ctx, hc, url, admin)
		if err == nil {
			xlen, err = rdb.XLen(ctx, stream).Result()
		}
		if err == nil && l.Durable != nil && *l.Durable == sold && l.Lag != nil && *l.Lag == 0 && xlen == 0 {
			return l, nil
		}
		if time.Now().After(deadline) {
			return l, fmt.Errorf("not drained %v after the sale: ledger %+v, stream %d (%v)", memoryDrain, l, xlen, err)
		}
		select {
		case <-ctx.Done():
			return l, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// memoryGoal is the retained bytes per unit once orders are durable.
const memoryGoal = 300

// memoryGoal judges the memory row: what a sold unit leaves in Redis
// once its order is stored and trimmed.
func (r *Report) memoryGoal() Goal {
	m := r.Memory
	g := Goal{
		Name: fmt.Sprintf("memory: a %d-unit sale with durable orders", m.Units),
		Want: fmt.Sprintf("≤ %d B per sold unit retained once every order is stored, books exact", memoryGoal),
	}
	if m.Error != "" || !m.Consistent {
		g.Unmeasured = "the memory row failed: " + m.Error
		return g
	}
	g.Measured = fmt.Sprintf("%.0f B/unit retained; peak %.0f MiB (%.0f B/unit) with %d orders at most waiting",
		m.RetainedPerUnit(), float64(m.Peak)/(1<<20), m.PeakPerUnit(), m.PeakBacklog)
	g.Met = m.RetainedPerUnit() <= memoryGoal
	return g
}

// writeMemory writes the memory row.
func (r *Report) writeMemory(p func(string, ...any)) {
	m := r.Memory
	if m == nil {
		return
	}
	p("\n## A %d-unit sale's Redis memory\n\n", m.Units)
	p("One sale of %d units through nginx (64 buyers in flight, closed loop, anonymous), atomic mode (the\n", m.Units)
	p("fastest sale, so its orders pile up fastest ahead of the consumers), `orders.durable` with the default\n")
	p("`orders.trim_interval` (1s): every replica's consumer stores the orders in MariaDB and trims them from\n")
	p("Redis while the sale runs. The stock Redis's dataset (INFO used_memory_dataset, less the reset's) is\n")
	p("sampled every %v: *peak* is the most it held, what a sale must plan `maxmemory` for; *retained* is\n", memorySample)
	p("what stays once every order is stored and trimmed (receipts for 10 min, the ledger's counters).\n")
	p("*waiting at most* is the stream's longest backlog (sold, not yet stored and trimmed). Redis 7.0 counts\n")
	p("connections' buffers in the dataset: the replicas' pools add a few hundred KB of noise either way.\n\n")
	p("| units | sold | sales/s | peak | peak B/unit | waiting at most | drained in | retained B/unit | MySQL rows | books |\n")
	p("|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	books := "exact"
	if !m.Consistent || m.Error != "" {
		books = "**NO** " + cellText(m.Error)
	}
	p("| %d | %d | %.0f | %.1f MiB | %.0f | %d | %.1f s | %.0f | %d | %s |\n",
		m.Units, m.Sold, m.SalesPerSec, float64(m.Peak)/(1<<20), m.PeakPerUnit(), m.PeakBacklog, m.DrainMS/1000,
		m.RetainedPerUnit(), m.Durable, books)
}
