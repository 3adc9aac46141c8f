package localcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"seckill/internal/servers"
	"seckill/internal/stockd"
)

// replicaReadyTimeout bounds a replica's start: connecting to a lock server
// that is itself starting can take a few seconds (ZooKeeper sessions).
const replicaReadyTimeout = 30 * time.Second

// SetBackend restarts every replica on backend with env as its extra
// settings (replacing the previous Config.Env or SetBackend env, not merged
// with it), starting etcd or ZooKeeper first if the new backend needs them.
// nginx is restarted too, so it holds no keep-alive connection to a replica
// that is gone. On error the replicas that did start keep running; a replica
// that refused the configuration is reported with ErrReplicaExited.
func (c *Cluster) SetBackend(ctx context.Context, backend string, env map[string]string) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.backend, c.env = backend, normalizeEnv(env)
	c.mu.Unlock()

	if err := c.ensureBackingServers(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	old := c.replicas
	c.mu.Unlock()
	// Stopping first frees the ports the new incarnations bind; SIGTERM lets
	// each replica release whatever lock it holds.
	if err := stopAll(old, 10*time.Second); err != nil {
		return fmt.Errorf("localcluster: stop replicas: %w", err)
	}
	err := c.startReplicas(ctx, "/readyz")
	if nginx := c.Nginx(); nginx != nil {
		if rerr := nginx.Restart(ctx); rerr != nil {
			err = errors.Join(err, fmt.Errorf("localcluster: restart nginx: %w", rerr))
		}
	}
	if err != nil {
		c.log.Warn("backend switch failed", "backend", backend, "err", firstLine(err))
	} else {
		c.log.Info("backend switched", "backend", backend)
	}
	return err
}

// ensureBackingServers starts etcd, ZooKeeper and MariaDB on first need.
func (c *Cluster) ensureBackingServers(ctx context.Context) error {
	c.mu.Lock()
	wantEtcd := c.etcd == nil && needsEtcd(c.backend, c.env)
	wantZK := c.zookeeper == nil && needsZooKeeper(c.backend, c.env)
	wantMySQL := c.mariadb == nil && needsMariaDB(c.backend, c.env)
	c.mu.Unlock()
	var wg sync.WaitGroup
	var etcdErr, zkErr, mysqlErr error
	if wantEtcd {
		wg.Go(func() {
			p, err := startServer(ctx, c.cfg.Dir, "etcd", servers.StartEtcd)
			c.mu.Lock()
			c.etcd, etcdErr = p, err
			c.mu.Unlock()
		})
	}
	if wantZK {
		wg.Go(func() {
			p, err := startServer(ctx, c.cfg.Dir, "zookeeper", servers.StartZooKeeper)
			c.mu.Lock()
			c.zookeeper, zkErr = p, err
			c.mu.Unlock()
		})
	}
	if wantMySQL {
		wg.Go(func() {
			p, err := startServer(ctx, c.cfg.Dir, "mariadb", servers.StartMariaDB)
			c.mu.Lock()
			c.mariadb, mysqlErr = p, err
			c.mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(etcdErr, zkErr, mysqlErr)
}

// RestartReplicas stops every replica (SIGTERM), runs between while none
// runs, and starts them all again on the same backend and settings: new
// processes, which remember nothing of the sale. They are waited for on
// /healthz, not /readyz: a replica that finds the sale halted is up but
// not ready, which is what a caller staging a fault around the restart
// wants to see. nginx is restarted too.
func (c *Cluster) RestartReplicas(ctx context.Context, between func() error) error {
	c.mu.Lock()
	old := c.replicas
	c.mu.Unlock()
	if err := stopAll(old, 10*time.Second); err != nil {
		return fmt.Errorf("localcluster: stop replicas: %w", err)
	}
	var err error
	if between != nil {
		err = between()
	}
	err = errors.Join(err, c.startReplicas(ctx, "/healthz"))
	if nginx := c.Nginx(); nginx != nil {
		if rerr := nginx.Restart(ctx); rerr != nil {
			err = errors.Join(err, fmt.Errorf("localcluster: restart nginx: %w", rerr))
		}
	}
	return err
}

// startReplicas starts all replicas in parallel with the current backend and
// env, each waited for on readyPath. A replica that fails leaves a nil slot.
func (c *Cluster) startReplicas(ctx context.Context, readyPath string) error {
	replicas := make([]*servers.Process, len(c.addrs))
	errs := make([]error, len(c.addrs))
	var wg sync.WaitGroup
	for i := range c.addrs {
		wg.Go(func() { replicas[i], errs[i] = c.startReplica(ctx, i, readyPath) })
	}
	wg.Wait()
	c.mu.Lock()
	c.replicas = replicas
	c.mu.Unlock()
	return errors.Join(errs...)
}

func (c *Cluster) startReplica(ctx context.Context, i int, readyPath string) (*servers.Process, error) {
	name := ReplicaName(i)
	dir := filepath.Join(c.cfg.Dir, name)
	rotateLog(dir, name)
	p, err := servers.Start(ctx, servers.Spec{
		Name:         name,
		Path:         c.Stockd(i),
		Env:          c.replicaEnv(i),
		Dir:          dir,
		Addr:         c.addrs[i],
		Ready:        servers.HTTPReady(readyPath),
		ReadyTimeout: replicaReadyTimeout,
	})
	if err != nil {
		// servers reports an early exit only in its message; a replica that
		// exits at once has refused its configuration (stockd exits 2).
		if strings.Contains(err.Error(), "exited during start-up") {
			return nil, fmt.Errorf("%w: %s (backend %s): %v", ErrReplicaExited, name, c.Backend(), err)
		}
		return nil, fmt.Errorf("localcluster: %s: %w", name, err)
	}
	return p, nil
}

// rotateLog moves a previous incarnation's log aside (name.1.log,
// name.2.log, …) so the current log, and the tail quoted in start-up
// errors, belongs to this incarnation alone.
func rotateLog(dir, name string) {
	cur := filepath.Join(dir, name+".log")
	if _, err := os.Stat(cur); err != nil {
		return
	}
	for gen := 1; ; gen++ {
		old := filepath.Join(dir, fmt.Sprintf("%s.%d.log", name, gen))
		if _, err := os.Stat(old); errors.Is(err, os.ErrNotExist) {
			_ = os.Rename(cur, old)
			return
		}
	}
}

// Defaults are the settings every replica of a local cluster starts with,
// beside its servers' addresses and the cluster's secrets; the cluster's
// Env and SetBackend's env go over them.
func Defaults(c *stockd.Config) {
	// Buyers are named by tokens the cluster's Minter signs, as a login
	// would; no client names one by a header.
	c.Auth.Buyers, c.Auth.JWTIssuer, c.Auth.JWTAudience = "jwt", JWTIssuer, JWTAudience
	// The lab, demo, bench and tests wait up to a minute for the lock
	// (queueing, not shedding, is what they measure); a sale must be
	// answered before stockd's write deadline.
	c.HTTP.WriteTimeout = 5 * time.Minute
	// The cluster is the lab: it runs the backends that oversell on
	// purpose, unfenced writes and failpoints, which stockd refuses
	// without lab.unsafe.
	c.Lab.Unsafe = true
}

// replicaEnv is replica i's environment, as KEY=VALUE lines in a stable
// order: cluster defaults, then the user's env, then what must not be
// overridden (the replica's name and address, the backend).
func (c *Cluster) replicaEnv(i int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	env := stockd.Overrides(Defaults, func(cfg *stockd.Config) {
		cfg.Redis.Addr, cfg.Lock.RedisAddr = c.redis.Addr(), c.redis.Addr()
		cfg.Admin.Token, cfg.Auth.JWTSecret = c.cfg.AdminToken, c.jwtSecret
		if c.etcd != nil {
			cfg.Etcd.Endpoints = []string{"http://" + c.etcd.Addr()}
		}
		if c.zookeeper != nil {
			cfg.ZooKeeper.Servers = []string{c.zookeeper.Addr()}
		}
		if c.mariadb != nil {
			cfg.MySQL.DSN = servers.MariaDBDSN(c.mariadb.Addr())
		}
	})
	if err := c.faultEnv(i, env); err != nil {
		// The replica then talks to its servers directly: faults aimed at
		// it will not land, which the fault tests notice.
		c.log.Warn("fault proxies", "replica", ReplicaName(i), "err", err)
	}
	maps.Copy(env, c.env)
	env["STOCKD_REPLICA"] = ReplicaName(i)
	env["STOCKD_HTTP_ADDR"] = c.addrs[i]
	env["STOCKD_LOCK_BACKEND"] = c.backend
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// normalizeEnv turns config keys ("work.delay") into stockd's environment
// names (STOCKD_WORK_DELAY); STOCKD_* names pass through.
func normalizeEnv(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[EnvName(k)] = v
	}
	return out
}

// EnvName maps a stockd config key to its environment variable, as stockd
// does: "lock.wait_timeout" → "STOCKD_LOCK_WAIT_TIMEOUT". Names already
// starting with STOCKD_ or SECKILL_ (SECKILL_FAILPOINTS) are returned
// unchanged.
func EnvName(key string) string {
	if strings.HasPrefix(key, "STOCKD_") || strings.HasPrefix(key, "SECKILL_") {
		return key
	}
	return stockd.EnvName(key)
}

func needsEtcd(backend string, env map[string]string) bool {
	return backend == "etcd" || env["STOCKD_ELECTION_BACKEND"] == "etcd" || env["STOCKD_STOCK_WITNESS"] == "etcd"
}

func needsZooKeeper(backend string, env map[string]string) bool {
	return backend == "zookeeper" || env["STOCKD_ELECTION_BACKEND"] == "zookeeper"
}

// needsMySQL: the mysql backends keep their locks in MariaDB (no election
// runs on it).
func needsMySQL(backend string) bool {
	return backend == "mysql" || backend == "mysql-row"
}

// needsMariaDB: the mysql backends' locks, or durable orders
// (orders.durable), which the replicas' order consumers store in MariaDB.
func needsMariaDB(backend string, env map[string]string) bool {
	durable, _ := strconv.ParseBool(env["STOCKD_ORDERS_DURABLE"])
	return needsMySQL(backend) || durable
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
