package bench

import (
	"os"
	"strconv"
	"strings"
	"time"

	"seckill/internal/servers"
)

// procSource is what the CPU split of a long run needs of the cluster
// (*localcluster.Cluster): the replicas' and Redis's processes.
type procSource interface {
	Replicas() int
	Replica(i int) *servers.Process
	Redis() *servers.Process
}

// RunCPU is where a long run's CPU went, per unit sold: on two cores the
// end-to-end rows are bounded by the machine, not by the lock, when
// CoresBusy nears 2.
type RunCPU struct {
	// CoresBusy is the whole machine's non-idle CPU time over the run's
	// wall time (/proc/stat): 2 is every core of this machine busy.
	CoresBusy float64 `json:"cores_busy"`
	// Per unit sold, in µs: the stockd replicas together, the stock's
	// Redis, this process (the load generator), and everything else
	// (nginx, the lock server, other work on the machine).
	Stockd  float64 `json:"stockd_us_per_sale"`
	Redis   float64 `json:"redis_us_per_sale"`
	Loadgen float64 `json:"loadgen_us_per_sale"`
	Other   float64 `json:"other_us_per_sale"`
	// Masters is, on a Redis Cluster, each master's µs per sale (as
	// formed), counted in Redis with the replicas'.
	Masters []float64 `json:"-"`
}

// ceiling is what the run could sell with cpus cores its own: cpus ÷
// every CPU µs a sale took; 0 when not measured.
func (c RunCPU) ceiling(cpus int) float64 {
	all := c.Stockd + c.Redis + c.Loadgen + c.Other
	if all <= 0 {
		return 0
	}
	return float64(max(cpus, 1)) * 1e6 / all
}

// cpuSample is one reading of the counters RunCPU is made of.
type cpuSample struct {
	at                           time.Time
	machine, self, stockd, redis time.Duration
	masters                      []time.Duration
}

// clusterSource is a procSource whose stock may be on a Redis Cluster
// (clusterLayout): then every node's CPU is Redis's.
type clusterSource interface {
	RedisCluster() *servers.RedisCluster
}

func sampleCPU(ps procSource) cpuSample {
	s := cpuSample{at: time.Now(), machine: machineBusy(), self: selfCPU()}
	if ps != nil {
		for i := range ps.Replicas() {
			if p := ps.Replica(i); p != nil {
				s.stockd += procCPU(p.Pid())
			}
		}
		if cs, ok := ps.(clusterSource); ok && cs.RedisCluster() != nil {
			rcl := cs.RedisCluster()
			for _, p := range rcl.Masters() {
				d := procCPU(p.Pid())
				s.masters = append(s.masters, d)
				s.redis += d
			}
			for _, p := range rcl.Replicas() {
				s.redis += procCPU(p.Pid())
			}
		} else if p := ps.Redis(); p != nil {
			s.redis = procCPU(p.Pid())
		}
	}
	return s
}

// split is the CPU between a and b per unit of sold.
func (b cpuSample) split(a cpuSample, sold int) RunCPU {
	wall := b.at.Sub(a.at)
	if wall <= 0 || sold <= 0 {
		return RunCPU{}
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(sold) }
	machine, self, stockd, redis := b.machine-a.machine, b.self-a.self, b.stockd-a.stockd, b.redis-a.redis
	c := RunCPU{
		CoresBusy: machine.Seconds() / wall.Seconds(),
		Stockd:    per(stockd), Redis: per(redis), Loadgen: per(self),
		Other: per(max(machine-stockd-redis-self, 0)),
	}
	if len(a.masters) == len(b.masters) {
		for i := range b.masters {
			c.Masters = append(c.Masters, per(b.masters[i]-a.masters[i]))
		}
	}
	return c
}

// machineBusy is the machine's non-idle CPU time so far, all cores
// summed: /proc/stat's first line less idle and iowait.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 7 { // idle, iowait; guest time is in user already
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * servers.ClockTick
}
