package bench

import (
	"context"
	"syscall"
	"time"

	"seckill/internal/metrics"
	"seckill/internal/servers"
)

// Evidence is what bounded a row, measured over its sale loop: CPU spent by
// the benchmark process (all contenders and their clients) and by the lock
// server, per sale, and the server's disk syncs. On two shared cores a row
// whose CPU per sale × sales/s is near the core count is CPU-bound; a row
// whose fsyncs per sale × fsync time is near its time per sale is bound by
// the disk.
type Evidence struct {
	ClientCPUus float64 `json:"client_cpu_us_per_sale"`
	ServerCPUus float64 `json:"server_cpu_us_per_sale"` // the lock server's process; -1 unknown
	DataCPUus   float64 `json:"redis_cpu_us_per_sale"`  // the stock's Redis (same as ServerCPUus for Redis locks)
	// Fsyncs is the lock server's WAL fsyncs per sale and FsyncMs their mean
	// duration (etcd only: etcd_disk_wal_fsync_duration_seconds); -1 unknown.
	Fsyncs  float64 `json:"fsyncs_per_sale"`
	FsyncMs float64 `json:"fsync_ms"`
}

// probe is a snapshot of the counters Evidence is computed from.
type probe struct {
	self, lockSrv, redis time.Duration
	fsyncs               int64
	fsyncSum             float64
	lockSrvOK, fsyncOK   bool
}

func (r *runner) probe(ctx context.Context, server string) probe {
	p := probe{self: selfCPU(), redis: procCPU(r.pids["redis"])}
	if pid := r.pids[server]; pid > 0 {
		p.lockSrv, p.lockSrvOK = procCPU(pid), true
	}
	if server == "etcd" && r.servers.Etcd != "" {
		p.fsyncs, p.fsyncSum, p.fsyncOK = etcdFsyncs(ctx, r.servers.Etcd)
	}
	return p
}

func evidence(before, after probe, sales int64) Evidence {
	e := Evidence{ServerCPUus: -1, Fsyncs: -1, FsyncMs: -1}
	if sales <= 0 {
		return e
	}
	per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(sales) }
	e.ClientCPUus = per(after.self - before.self)
	e.DataCPUus = per(after.redis - before.redis)
	if before.lockSrvOK && after.lockSrvOK {
		e.ServerCPUus = per(after.lockSrv - before.lockSrv)
	}
	if before.fsyncOK && after.fsyncOK {
		n := after.fsyncs - before.fsyncs
		e.Fsyncs = float64(n) / float64(sales)
		if n > 0 {
			e.FsyncMs = 1000 * (after.fsyncSum - before.fsyncSum) / float64(n)
		}
	}
	return e
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is another process's user+system CPU time (0 when unreadable:
// the row then shows no server CPU rather than failing).
func procCPU(pid int) time.Duration {
	d, err := servers.ProcCPU(pid)
	if err != nil {
		return 0
	}
	return d
}

// etcdFsyncs reads the WAL fsync count and total seconds from etcd's metrics.
func etcdFsyncs(ctx context.Context, addr string) (count int64, sum float64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fams, err := metrics.Scrape(ctx, nil, "http://"+addr+"/metrics")
	if err != nil {
		return 0, 0, false
	}
	n, gotCount := fams.Sum("etcd_disk_wal_fsync_duration_seconds", nil) // a histogram: its count
	sum, gotSum := fams.HistogramSum("etcd_disk_wal_fsync_duration_seconds")
	return int64(n), sum, gotCount && gotSum
}
