// Package localcluster runs the whole seckill topology on one machine from
// real processes: a redis-server, optionally etcd, ZooKeeper and MariaDB, N stockd
// replicas and an nginx load balancer in front of them, each on a free
// loopback port with its own log file in the cluster's directory. It is what
// `seckill demo` and the end-to-end tests stand on.
//
// Nothing is faked: a replica is a stockd binary (built from this module when
// no path is given) and the balancer is the system's nginx, configured from
// the embedded template in package seckill/nginx.
package localcluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"seckill/internal/auth"
	"seckill/internal/servers"
)

// Sentinel errors; returned errors wrap them.
var (
	// ErrConfig: the Config is unusable (negative replicas, …).
	ErrConfig = errors.New("localcluster: bad config")
	// ErrBuild: stockd (or another package) could not be built.
	ErrBuild = errors.New("localcluster: build failed")
	// ErrReplicaExited: a stockd replica exited during start-up, typically
	// because it refused its configuration (an unknown or unbuilt lock
	// backend). The error carries the tail of the replica's log.
	ErrReplicaExited = errors.New("localcluster: replica exited during start-up")
	// ErrClosed: the cluster was closed.
	ErrClosed = errors.New("localcluster: closed")
)

// Config describes a local cluster. Zero values are the documented defaults.
type Config struct {
	// Replicas is the number of stockd processes. The default is 3.
	Replicas int
	// Backend is the lock backend the replicas start with (STOCKD_LOCK_BACKEND).
	// The default is "redis".
	Backend string
	// Env holds extra stockd settings, either as STOCKD_* variables or as
	// config keys ("work.delay" becomes STOCKD_WORK_DELAY). They override the
	// cluster's defaults but not the per-replica address and name.
	Env map[string]string
	// Dir holds every process's files. The default is a new temp directory,
	// removed by Close; a given Dir is left in place.
	Dir string
	// Stockd is the stockd binary. The default builds ./cmd/stockd with
	// BuildStockd (cached by source hash).
	Stockd string
	// Etcd and ZooKeeper start those servers even when neither the backend
	// nor the election needs them. They are always started, on first need,
	// when Backend or a later SetBackend needs them.
	Etcd, ZooKeeper bool
	// MySQL starts MariaDB (the mysql and mysql-row backends' server, and
	// the durable orders' store) up front; it is always started on first
	// need otherwise (a mysql backend, or orders.durable in the env).
	MySQL bool
	// AdminToken guards POST /stock/reset. The default is made for the
	// cluster (auth.NewSecret; AdminToken says it).
	AdminToken string
	// ProxyTimeout is nginx's upstream read timeout: how long a request to a
	// stalled replica waits before nginx answers 504. The default is 30s.
	ProxyTimeout time.Duration
	// Logger receives start/stop progress. The default discards it.
	Logger *slog.Logger
	// Faults turns on the fault layer (faults.go): the lock gets its own
	// redis-server (lock.redis_addr), and every replica reaches each server
	// through its own in-process toxiproxy, so Cut, Latency and Watch can
	// act on one replica's path alone. The stock Redis and the lock Redis
	// then also run on wall clocks a cell can step (StockClock, LockClock).
	Faults bool
}

// Cluster is a running local cluster. Its methods are safe for concurrent
// use, but SetBackend and Close must not race with requests that need the
// replicas.
type Cluster struct {
	cfg     Config
	ownDir  bool
	log     *slog.Logger
	addrs   []string // replica addresses, fixed for the cluster's life
	backend string
	env     map[string]string
	// jwtSecret signs the buyers' tokens (Minter); made for the cluster.
	jwtSecret string

	mu        sync.Mutex
	closed    bool
	redis     *servers.Process
	etcd      *servers.Process
	zookeeper *servers.Process
	mariadb   *servers.Process
	replicas  []*servers.Process
	// binaries holds the replicas that run another stockd than
	// cfg.Stockd (UseStockd), by index.
	binaries map[int]string
	nginx    *servers.Process
	faults   *faultNet // nil unless Config.Faults
	// stockClock and lockClock step the stock Redis's and the lock
	// Redis's wall clocks (Config.Faults; nil otherwise).
	stockClock, lockClock *servers.ShiftedClock
	// sentinel is the replicated stock Redis of StartSentinel, or nil.
	sentinel    *servers.SentinelSet
	sentinelGen int
	// rcluster is the Redis Cluster of StartRedisCluster, or nil.
	rcluster    *servers.RedisCluster
	rclusterGen int
}

// Start builds (if needed) and starts the cluster, returning when nginx and
// every replica answer their readiness probes. On error everything already
// started is stopped again.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if cfg.Replicas == 0 {
		cfg.Replicas = 3
	}
	if cfg.Replicas < 0 {
		return nil, fmt.Errorf("%w: replicas %d", ErrConfig, cfg.Replicas)
	}
	if cfg.Backend == "" {
		cfg.Backend = "redis"
	}
	if cfg.AdminToken == "" {
		cfg.AdminToken = auth.NewSecret()
	}
	if cfg.ProxyTimeout == 0 {
		cfg.ProxyTimeout = 30 * time.Second
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger, backend: cfg.Backend, env: normalizeEnv(cfg.Env), jwtSecret: rand.Text() + rand.Text()}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "seckill-cluster-")
		if err != nil {
			return nil, fmt.Errorf("localcluster: %w", err)
		}
		c.cfg.Dir, c.ownDir = dir, true
	}
	defer func() {
		if err != nil {
			_ = c.Close()
		}
	}()

	// The build (seconds when the tree changed) and the servers (redis is
	// instant, etcd ~0.5s, ZooKeeper's JVM 1-2s, MariaDB 2-4s with its
	// install) do not depend on each other.
	var wg sync.WaitGroup
	errs := make([]error, 6)
	wg.Go(func() { errs[0] = c.ensureStockd(ctx) })
	redisStart := servers.StartRedis
	if cfg.Faults {
		if c.stockClock, c.lockClock, err = newClocks(c.cfg.Dir); err != nil {
			return nil, err
		}
		redisStart = servers.RedisOnClock(c.stockClock)
	}
	wg.Go(func() {
		c.redis, errs[1] = startServer(ctx, c.cfg.Dir, "redis", redisStart)
	})
	if cfg.Etcd || needsEtcd(c.backend, c.env) {
		wg.Go(func() { c.etcd, errs[2] = startServer(ctx, c.cfg.Dir, "etcd", servers.StartEtcd) })
	}
	if cfg.ZooKeeper || needsZooKeeper(c.backend, c.env) {
		wg.Go(func() { c.zookeeper, errs[3] = startServer(ctx, c.cfg.Dir, "zookeeper", servers.StartZooKeeper) })
	}
	if cfg.MySQL || needsMariaDB(c.backend, c.env) {
		wg.Go(func() { c.mariadb, errs[5] = startServer(ctx, c.cfg.Dir, "mariadb", servers.StartMariaDB) })
	}
	if cfg.Faults {
		c.faults = newFaultNet()
		wg.Go(func() { c.faults.lockRedis, errs[4] = startLockRedis(ctx, c.cfg.Dir, c.lockClock) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	c.addrs = make([]string, cfg.Replicas)
	for i := range c.addrs {
		if c.addrs[i], err = servers.LoopbackAddr(); err != nil {
			return nil, fmt.Errorf("localcluster: %w", err)
		}
	}
	if err := c.startReplicas(ctx, "/readyz"); err != nil {
		return nil, err
	}
	if err := c.startNginx(ctx); err != nil {
		return nil, err
	}
	c.log.Info("cluster up", "url", c.URL(), "backend", c.backend, "replicas", cfg.Replicas, "dir", c.cfg.Dir)
	return c, nil
}

func (c *Cluster) ensureStockd(ctx context.Context) error {
	if c.cfg.Stockd != "" {
		// Absolute, because each replica runs in its own directory.
		abs, err := filepath.Abs(c.cfg.Stockd)
		if err != nil {
			return fmt.Errorf("%w: stockd binary: %v", ErrConfig, err)
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("%w: stockd binary: %v", ErrConfig, err)
		}
		c.cfg.Stockd = abs
		return nil
	}
	c.log.Info("building stockd")
	bin, err := BuildStockd(ctx, "")
	if err != nil {
		return err
	}
	c.cfg.Stockd = bin
	return nil
}

type starter func(ctx context.Context, dir, addr string) (*servers.Process, error)

func startServer(ctx context.Context, dir, name string, start starter) (*servers.Process, error) {
	addr, err := servers.LoopbackAddr()
	if err != nil {
		return nil, fmt.Errorf("localcluster: %s: %w", name, err)
	}
	p, err := start(ctx, filepath.Join(dir, name), addr)
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	return p, nil
}

// URL is nginx's base URL, e.g. "http://127.0.0.1:41234".
func (c *Cluster) URL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nginx == nil {
		return ""
	}
	return "http://" + c.nginx.Addr()
}

// Replicas is the number of stockd replicas.
func (c *Cluster) Replicas() int { return len(c.addrs) }

// Replica returns the process of replica i (0-based; its STOCKD_REPLICA is
// "stockd-<i+1>"). SetBackend replaces the processes, so do not keep it.
func (c *Cluster) Replica(i int) *servers.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replicas[i]
}

// ReplicaURL is replica i's own base URL, bypassing nginx.
func (c *Cluster) ReplicaURL(i int) string { return "http://" + c.addrs[i] }

// ReplicaName is replica i's STOCKD_REPLICA value.
func ReplicaName(i int) string { return fmt.Sprintf("stockd-%d", i+1) }

// Nginx returns the nginx process.
func (c *Cluster) Nginx() *servers.Process { return c.get(&c.nginx) }

// Redis returns the redis-server process.
func (c *Cluster) Redis() *servers.Process { return c.get(&c.redis) }

// Etcd returns the etcd process, or nil when it was not started.
func (c *Cluster) Etcd() *servers.Process { return c.get(&c.etcd) }

// ZooKeeper returns the ZooKeeper process, or nil when it was not started.
func (c *Cluster) ZooKeeper() *servers.Process { return c.get(&c.zookeeper) }

// MariaDB returns the MariaDB process (the mysql backends' server), or nil
// when it was not started. servers.MariaDBDSN(p.Addr()) connects to it
// directly, past the fault proxies.
func (c *Cluster) MariaDB() *servers.Process { return c.get(&c.mariadb) }

func (c *Cluster) get(p **servers.Process) *servers.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return *p
}

// AdminToken is the token for POST /stock/reset.
func (c *Cluster) AdminToken() string { return c.cfg.AdminToken }

// The issuer and audience of the cluster's buyers' tokens.
const (
	JWTIssuer   = "seckill-lab"
	JWTAudience = "seckill"
)

// Minter signs tokens the replicas accept: named buyers buy with them.
func (c *Cluster) Minter() *auth.Minter {
	return auth.NewMinter([]byte(c.jwtSecret), JWTIssuer, JWTAudience, time.Hour)
}

// Backend is the lock backend the replicas currently run.
func (c *Cluster) Backend() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backend
}

// Dir is the cluster's directory (logs, configs, data).
func (c *Cluster) Dir() string { return c.cfg.Dir }

// Logs returns the last n lines of every replica's and nginx's log, for
// test failure messages.
func (c *Cluster) Logs(n int) string {
	c.mu.Lock()
	procs := append([]*servers.Process{c.nginx}, c.replicas...)
	c.mu.Unlock()
	var b strings.Builder
	for _, p := range procs {
		if p == nil {
			continue
		}
		fmt.Fprintf(&b, "==> %s <==\n%s\n", p.LogPath(), p.LogTail(n))
	}
	if c.cfg.Dir != "" {
		if errLog, err := os.ReadFile(filepath.Join(c.cfg.Dir, "nginx", "error.log")); err == nil {
			fmt.Fprintf(&b, "==> nginx error.log <==\n%s\n", tail(string(errLog), n))
		}
	}
	return b.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Close stops nginx, then the replicas (gracefully, so they release their
// locks), then the servers, and removes the directory if Start created it.
// It is safe to call more than once.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	nginx, replicas := c.nginx, c.replicas
	backing := []*servers.Process{c.redis, c.etcd, c.zookeeper, c.mariadb}
	set := c.sentinel
	c.sentinel = nil
	rcl := c.rcluster
	c.rcluster = nil
	c.mu.Unlock()

	var errs []error
	if nginx != nil {
		errs = append(errs, nginx.Stop(5*time.Second))
	}
	errs = append(errs, stopAll(replicas, 10*time.Second))
	errs = append(errs, stopAll(backing, 5*time.Second))
	if set != nil {
		set.Stop(5 * time.Second)
	}
	if rcl != nil {
		errs = append(errs, rcl.Close())
	}
	if c.faults != nil {
		errs = append(errs, c.faults.close())
	}
	if c.ownDir {
		errs = append(errs, os.RemoveAll(c.cfg.Dir))
	}
	c.log.Info("cluster down")
	return errors.Join(errs...)
}

// stopAll stops processes in parallel; nil entries are skipped.
func stopAll(procs []*servers.Process, timeout time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, len(procs))
	for i, p := range procs {
		if p != nil {
			wg.Go(func() { errs[i] = p.Stop(timeout) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
