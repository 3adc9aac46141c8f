package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lab/localcluster"
	"seckill/internal/stockd"
)

// Config describes a benchmark run. Zero values are the documented defaults.
type Config struct {
	// Quick is a smoke test: a tiny fixed stock per row, no calibration,
	// and a small end-to-end run. The report's structure is the same.
	Quick bool
	// Contenders are the micro-benchmark's contender counts. The default is
	// 1, 8, 50.
	Contenders []int
	// Sets is the number of client sets ("processes"). The default is 3.
	Sets int
	// Subjects limits the micro-benchmark to these names (see Subjects).
	// The default is all.
	Subjects []string
	// Stock fixes N for every row; 0 calibrates per row (Quick: 40).
	Stock int64
	// RowTarget is how long a calibrated row should sell for. The default
	// is 5s.
	RowTarget time.Duration
	// MicroRuns is how many times each micro row runs; the report keeps the
	// median run. The runs of one contender count interleave (every
	// subject once, then again), so a pair of subjects compared by a goal
	// sees the same background load. The default is 3 (Quick: 1).
	MicroRuns int
	// Calibrate is the calibration run's length. The default is 600ms.
	Calibrate time.Duration
	// MinStock and MaxStock clamp the calibrated N. Defaults 100 and 300000.
	MinStock, MaxStock int64
	// RowTimeout bounds one row's sale loop. The default is 60s (Quick 30s).
	RowTimeout time.Duration
	// RTTPings is the length of the PING loop. The default is 2000 (Quick 200).
	RTTPings int
	// SkipMicro leaves out the lock micro-benchmark (and so MariaDB) and
	// the hold rows.
	SkipMicro bool
	// SkipHold leaves out the hold rows (throughput against
	// critical-section time, HoldDelays).
	SkipHold bool
	// E2E configures the end-to-end part.
	E2E E2EConfig
	// Stockd is the stockd binary for the cluster; empty builds it.
	Stockd string
	// Command is the command line, printed in the report.
	Command string
	// Logger receives progress. The default discards it.
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if len(c.Contenders) == 0 {
		c.Contenders = []int{1, 8, 50}
	}
	if c.Sets == 0 {
		c.Sets = 3
	}
	if c.Quick && c.Stock == 0 {
		c.Stock = 40
	}
	if c.RowTarget == 0 {
		c.RowTarget = 5 * time.Second
	}
	if c.MicroRuns <= 0 {
		c.MicroRuns = 3
		if c.Quick {
			c.MicroRuns = 1
		}
	}
	if c.Calibrate == 0 {
		c.Calibrate = 600 * time.Millisecond
	}
	if c.MinStock == 0 {
		c.MinStock = 100
	}
	if c.MaxStock == 0 {
		c.MaxStock = 300_000
	}
	if c.RowTimeout == 0 {
		c.RowTimeout = 60 * time.Second
		if c.Quick {
			c.RowTimeout = 30 * time.Second
		}
	}
	if c.RTTPings == 0 {
		c.RTTPings = 2000
		if c.Quick {
			c.RTTPings = 200
		}
	}
	c.E2E.defaults(c.Quick)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// runner holds what a run shares between rows.
type runner struct {
	cfg     Config
	log     *slog.Logger
	servers Servers
	data    []*redis.Client // one per client set: reads and writes the stock
	pids    map[string]int  // server name → pid, for CPU evidence
	jitWarm bool            // ZooKeeper's JIT warm-up has run
}

// newRunner returns a runner on srv with one data client per client set;
// cfg must have its defaults applied.
func newRunner(cfg Config, srv Servers) *runner {
	r := &runner{cfg: cfg, log: cfg.Logger, servers: srv, pids: map[string]int{}}
	for range cfg.Sets {
		r.data = append(r.data, redis.NewClient(&redis.Options{Addr: srv.Redis, ContextTimeoutEnabled: true}))
	}
	return r
}

func (r *runner) close() {
	for _, rdb := range r.data {
		_ = rdb.Close()
	}
}

func (r *runner) serverUp(name string) bool {
	switch name {
	case "redis":
		return r.servers.Redis != ""
	case "etcd":
		return r.servers.Etcd != ""
	case "zookeeper":
		return r.servers.ZooKeeper != ""
	case "mysql":
		return r.servers.MySQL != ""
	}
	return false
}

// Run starts a local cluster (redis, etcd, ZooKeeper, stockd replicas,
// nginx), runs every part of the benchmark on it and returns the report.
// A subject or backend that cannot run is a row marked unavailable, not an
// error; Run fails only when the cluster (or its Redis) cannot start.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	rep := &Report{Command: cfg.Command, Quick: cfg.Quick, Started: time.Now().UTC()}
	rep.Machine = machineInfo()
	log := cfg.Logger

	log.Info("starting local cluster (redis, etcd, zookeeper, stockd replicas, nginx)")
	ccfg := localcluster.Config{
		Replicas: cfg.E2E.Replicas, Backend: "none", Env: stockd.Overrides(cfg.E2E.env(false)),
		Etcd: true, ZooKeeper: true, Stockd: cfg.Stockd, Logger: log,
	}
	cl, err := localcluster.Start(ctx, ccfg)
	if err != nil {
		// Run what can run: Redis alone still measures the Redis locks.
		log.Warn("cluster with etcd and zookeeper did not start; retrying with redis only", "err", firstLine(err))
		rep.Notes = append(rep.Notes, "etcd/ZooKeeper did not start: "+firstLine(err))
		ccfg.Etcd, ccfg.ZooKeeper = false, false
		if cl, err = localcluster.Start(ctx, ccfg); err != nil {
			return nil, fmt.Errorf("bench: start cluster: %w", err)
		}
	}
	defer func() {
		if err := cl.Close(); err != nil {
			log.Warn("cluster close", "err", err)
		}
	}()

	srv := Servers{Redis: cl.Redis().Addr()}
	if p := cl.Etcd(); p != nil {
		srv.Etcd = p.Addr()
	}
	if p := cl.ZooKeeper(); p != nil {
		srv.ZooKeeper = p.Addr()
	}
	var (
		my    *mariadb
		myErr error
	)
	if wantsServer(cfg, "mysql") {
		my, myErr = startMariaDB(ctx)
	}
	if myErr != nil {
		log.Warn("MariaDB did not start; the mysql rows are unavailable", "err", firstLine(myErr))
		rep.Notes = append(rep.Notes, "MariaDB did not start: "+firstLine(myErr))
	} else if my != nil {
		srv.MySQL = my.dsn()
		defer func() {
			if err := my.stop(); err != nil {
				log.Warn("MariaDB stop", "err", err)
			}
		}()
	}
	r := newRunner(cfg, srv)
	defer r.close()
	if my != nil {
		r.pids["mysql"] = my.p.Pid()
	}
	r.pids["redis"] = cl.Redis().Pid()
	if p := cl.Etcd(); p != nil {
		r.pids["etcd"] = p.Pid()
	}
	if p := cl.ZooKeeper(); p != nil {
		r.pids["zookeeper"] = p.Pid()
	}
	rep.Versions = serverVersions(ctx, r.servers)
	rep.Machine.LoadStart = loadAvg()

	rtt, err := measureRTT(ctx, r.data[0], cfg.RTTPings)
	if err != nil {
		return nil, fmt.Errorf("bench: redis RTT: %w", err)
	}
	rep.RTT = rtt
	log.Info("redis round trip", "mean", rtt.Mean, "p50", rtt.P50)

	subjects := Subjects()
	for _, c := range cfg.Contenders {
		if cfg.SkipMicro {
			break
		}
		runs := make(map[string][]MicroRow)
		for run := range cfg.MicroRuns {
			for _, subj := range runOrder(subjects, run) {
				if len(cfg.Subjects) > 0 && !slices.Contains(cfg.Subjects, subj.Name) {
					continue
				}
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				row := r.microRow(ctx, subj, c)
				log.Info("micro", "subject", row.Subject, "contenders", c, "run", run+1, "stock", row.Stock,
					"sales/s", int(row.SalesPerSec), "acquire_rt", round2(row.AcquireRT),
					"fairness", round2(row.Fairness), "ok", row.InvariantOK, "err", row.Error)
				runs[subj.Name] = append(runs[subj.Name], row)
			}
		}
		for _, subj := range subjects {
			if rows := runs[subj.Name]; len(rows) > 0 {
				rep.Micro = append(rep.Micro, medianRow(rows))
			}
		}
	}

	if !cfg.SkipMicro && !cfg.SkipHold {
		rep.Hold = r.holdRows(ctx, rtt.P50)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}

	// Report order is subject-major; the run was contender-major.
	slices.SortStableFunc(rep.Micro, func(a, b MicroRow) int {
		return slices.IndexFunc(subjects, func(s Subject) bool { return s.Name == a.Subject }) -
			slices.IndexFunc(subjects, func(s Subject) bool { return s.Name == b.Subject })
	})

	if !cfg.E2E.Skip && cfg.E2E.runs(RowsBackends) {
		rep.E2E = runE2E(ctx, cl, cfg.E2E, log)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if !cfg.E2E.Skip && cfg.E2E.runs(RowsScaling) {
		rep.Scaling = runScaling(ctx, cl, cfg.E2E, cfg.Quick, log)
		if !cfg.Quick {
			rep.ScalingTarget = cfg.E2E.Target
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if !cfg.E2E.Skip && cfg.E2E.runs(RowsLedger) {
		rep.Ledger = runLedger(ctx, cl, cfg.E2E, cfg.Quick, log)
		if !cfg.Quick {
			rep.LedgerTarget = cfg.E2E.Target
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if !cfg.E2E.Skip && cfg.E2E.runs(RowsFlood) {
		rep.Flood = runFlood(ctx, cl, cfg.E2E, cfg.Quick, log)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if !cfg.E2E.Skip && cfg.E2E.runs(RowsReserve) {
		rep.Reserve = runReserve(ctx, cl, cfg.E2E, cfg.Quick, log)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if !cfg.E2E.Skip && cfg.E2E.runs(RowsItems) {
		rep.Items = runItems(ctx, cl, cfg.E2E, cfg.Quick, log)
		rep.ItemsTarget = cfg.E2E.Target
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if !cfg.E2E.Skip && cfg.E2E.runs(RowsMemory) {
		m := runMemory(ctx, cl, cfg.E2E, cfg.Quick, log)
		rep.Memory = &m
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if !cfg.E2E.Skip && cfg.E2E.runs(RowsCluster) {
		rep.Cluster = runCluster(ctx, cl, cfg.E2E, cfg.Quick, log)
		rep.ClusterTarget = cfg.E2E.Target
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	rep.Machine.LoadEnd = loadAvg()
	rep.Finished = time.Now().UTC()
	rep.evaluate()
	return rep, nil
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// RTT is the measured Redis round trip.
type RTT struct {
	Pings int           `json:"pings"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
}

// measureRTT sends n PINGs one after another.
func measureRTT(ctx context.Context, rdb *redis.Client, n int) (RTT, error) {
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for range n {
		t0 := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return RTT{}, err
		}
		lat = append(lat, time.Since(t0))
	}
	total := time.Since(start)
	slices.Sort(lat)
	return RTT{Pings: n, Mean: total / time.Duration(n), P50: lat[n/2], P99: lat[min(n-1, n*99/100)]}, nil
}

func firstLine(err error) string {
	s := err.Error()
	for i, ch := range s {
		if ch == '\n' {
			return s[:i]
		}
	}
	return s
}

// wantsServer reports whether a subject selected by cfg runs on server.
func wantsServer(cfg Config, server string) bool {
	if cfg.SkipMicro {
		return false
	}
	for _, s := range Subjects() {
		if s.Server == server && (len(cfg.Subjects) == 0 || slices.Contains(cfg.Subjects, s.Name)) {
			return true
		}
	}
	return false
}
