package bench

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/stock"
	"seckill/internal/stockd"
)

// E2EConfig is the end-to-end part: loadgen through nginx.
type E2EConfig struct {
	// Skip leaves the end-to-end part out.
	Skip bool
	// Backends are the lock backends to run, each with stock.mode locked.
	// The default is redis, redisson, etcd, zookeeper.
	Backends []string
	// NoAtomic leaves out the ceiling row: stockd's stock.mode atomic (one
	// Lua script per sale, no lock).
	NoAtomic bool
	// Replicas behind nginx. The default is 3.
	Replicas int
	// Requests, Stock and Concurrency are loadgen's. Defaults 3000, 2000,
	// 50 (Quick: 100, 60, 20).
	Requests, Stock, Concurrency int
	// Timeout bounds one row's firing phase. The default is 120s.
	Timeout time.Duration
	// Rows are the row sets to run: RowsBackends, RowsScaling, RowsLedger.
	// The default is RowsBackends and RowsScaling.
	Rows []string
	// Runs is how many times each scaling (and ledger) row runs; it
	// reports the median.
	// The default is 3 (Quick: 1).
	Runs int
	// Target is how long one scaling run should sell for, from the
	// calibrated rate; a sixth above MinFiring so a slightly faster run
	// still fires long enough to count. The default is 6s.
	Target time.Duration
	// Calibrate is the length of each scaling row's calibration sale. The
	// default is 1.5s. Quick runs do not calibrate: they use Requests and
	// Stock.
	Calibrate time.Duration
	// FloodRate is the floods' arrival rate, buyers a second (RowsFlood):
	// 0 is DefaultFloodRate. The floods send as many buyers at any rate.
	FloodRate int
}

// runs reports whether the row set is selected.
func (c E2EConfig) runs(set string) bool { return slices.Contains(c.Rows, set) }

func (c *E2EConfig) defaults(quick bool) {
	if len(c.Backends) == 0 {
		c.Backends = []string{"redis", "redisson", "etcd", "zookeeper"}
	}
	if c.Replicas == 0 {
		c.Replicas = 3
	}
	if c.Requests == 0 {
		c.Requests, c.Stock, c.Concurrency = 3000, 2000, 50
		if quick {
			c.Requests, c.Stock, c.Concurrency = 100, 60, 20
		}
	}
	if c.Timeout == 0 {
		c.Timeout = 120 * time.Second
	}
	if len(c.Rows) == 0 {
		c.Rows = []string{RowsBackends, RowsScaling}
	}
	if c.Runs == 0 {
		c.Runs = 3
		if quick {
			c.Runs = 1
		}
	}
	if c.Target == 0 {
		c.Target = 6 * time.Second
	}
	if c.Calibrate == 0 {
		c.Calibrate = 1500 * time.Millisecond
	}
}

// env is the replicas' configuration: the articles' sale (one critical
// section per buyer; rows that combine say so), no work delay (the lock
// is what is measured), and a wait timeout long enough that every buyer
// queues rather than being turned away as busy.
func (c E2EConfig) env(atomic bool) stockd.Edit {
	return func(c *stockd.Config) {
		c.Stock.Combine = false
		c.Work.Delay, c.Lock.WaitTimeout = stock.Delay{}, time.Minute
		if atomic {
			c.Stock.Mode = "atomic"
		}
	}
}

// E2ERow is one end-to-end row: one run (RowsBackends), or the median of
// Runs (RowsScaling; the row's figures are its median run's).
type E2ERow struct {
	// Name labels a scaling row ("locked+combine", "segments=8", …);
	// empty for the backend rows.
	Name     string `json:"name,omitempty"`
	Backend  string `json:"backend"`
	Mode     string `json:"mode"` // "locked" or "atomic"
	Combine  bool   `json:"combine,omitempty"`
	Segments int    `json:"segments,omitempty"`
	// Ledger is the order ledger's form on a ledger row (LedgerOff, …);
	// Users the named buyers its purchases were spread over (0: anonymous).
	Ledger      string  `json:"ledger,omitempty"`
	Users       int     `json:"users,omitempty"`
	Requests    int     `json:"requests"`
	Concurrency int     `json:"concurrency"`
	Stock       int     `json:"stock"`
	Sold        int     `json:"sold"`
	SoldOut     int     `json:"sold_out"`
	Busy        int     `json:"busy"`
	Errors      int     `json:"errors"`
	Seconds     float64 `json:"seconds"`
	SalesPerSec float64 `json:"sales_per_sec"`
	RPS         float64 `json:"rps"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	// Consistent: every run kept the invariant (books balance, every unit
	// sold, no error, no false sold-out, no segment negative).
	Consistent bool `json:"consistent"`
	// FalseSoldOut and NegativeSegments are summed over the runs.
	FalseSoldOut     int      `json:"false_sold_out"`
	NegativeSegments int      `json:"negative_segments"`
	Runs             []E2ERun `json:"runs,omitempty"`
	// CPU is the median run's CPU split (long rows only).
	CPU         RunCPU `json:"cpu,omitempty"`
	Unavailable bool   `json:"unavailable,omitempty"`
	Error       string `json:"error,omitempty"`
}

// Label names the row in tables: its Name, else the backend, or "atomic
// (no lock)" for the ceiling.
func (r E2ERow) Label() string {
	if r.Name != "" {
		return r.Name
	}
	if r.Mode == "atomic" {
		return "atomic (no lock)"
	}
	return r.Backend
}

// RunsText lists a long row's runs (E2ERun.String), in the order they ran,
// joined by sep.
func (r E2ERow) RunsText(sep string) string {
	rs := make([]string, len(r.Runs))
	for i, run := range r.Runs {
		rs[i] = run.String()
	}
	return strings.Join(rs, sep)
}

// Invariant says in words whether a long row kept its invariant: "ok",
// "ok, but <error>" (a run's trouble that broke nothing), "BROKEN" or
// "BROKEN: <error>". invariantCell is the same for the markdown tables.
func (r E2ERow) Invariant() string {
	switch {
	case !r.Consistent && r.Error != "":
		return "BROKEN: " + r.Error
	case !r.Consistent:
		return "BROKEN"
	case r.Error != "":
		return "ok, but " + r.Error
	}
	return "ok"
}

func runE2E(ctx context.Context, cl *localcluster.Cluster, cfg E2EConfig, log *slog.Logger) []E2ERow {
	type run struct {
		backend string
		atomic  bool
	}
	var runs []run
	for _, b := range cfg.Backends {
		runs = append(runs, run{b, false})
	}
	if !cfg.NoAtomic {
		runs = append(runs, run{"none", true})
	}
	var rows []E2ERow
	for _, rn := range runs {
		if ctx.Err() != nil {
			break
		}
		row := E2ERow{Backend: rn.backend, Mode: "locked", Requests: cfg.Requests, Concurrency: cfg.Concurrency, Stock: cfg.Stock}
		if rn.atomic {
			row.Mode = "atomic"
		}
		log.Info("end to end: switching replicas", "backend", rn.backend, "mode", row.Mode)
		err := cl.SetBackend(ctx, rn.backend, stockd.Overrides(cfg.env(rn.atomic)))
		var rep *loadgen.Report
		if err == nil {
			before := sampleCPU(cl)
			rep, err = loadgen.Run(ctx, loadgen.Config{
				URL: cl.URL(), AdminToken: cl.AdminToken(), Requests: cfg.Requests,
				Concurrency: cfg.Concurrency, Stock: cfg.Stock, Timeout: cfg.Timeout,
			})
			if rep != nil {
				row.CPU = sampleCPU(cl).split(before, rep.Sold)
			}
		}
		if rep != nil {
			row.Sold, row.SoldOut, row.Busy, row.Errors = rep.Sold, rep.SoldOut, rep.Busy, rep.Errors
			row.Seconds = rep.DurationMS / 1000
			if row.Seconds > 0 {
				row.SalesPerSec = float64(rep.Sold) / row.Seconds
			}
			row.RPS, row.P50ms, row.P99ms = rep.RPS, rep.P50ms, rep.P99ms
			row.FalseSoldOut, row.NegativeSegments = rep.FalseSoldOut, rep.NegativeSegments
			row.Consistent = runOK(rep, cfg.Stock)
		}
		if err != nil {
			row.Error = firstLine(err)
			// stockd refuses a backend name it has not been built with.
			row.Unavailable = errors.Is(err, localcluster.ErrReplicaExited) && strings.Contains(err.Error(), "lock.backend")
			if row.Unavailable {
				row.Error = backendRefusal(err)
			}
		}
		log.Info("end to end", "backend", row.Label(), "sales/s", int(row.SalesPerSec), "consistent", row.Consistent, "err", row.Error)
		rows = append(rows, row)
	}
	return rows
}

// backendRefusal picks stockd's own complaint about lock.backend out of the
// log tail a failed start carries, which says more than "exited".
func backendRefusal(err error) string {
	for _, line := range strings.Split(err.Error(), "\n") {
		if i := strings.Index(line, "lock.backend"); i >= 0 {
			return "stockd refused it: " + strings.Trim(line[i:], `" `)
		}
	}
	return firstLine(err)
}
