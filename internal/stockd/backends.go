package stockd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/backend"
	"seckill/internal/lock/etcdlock"
	"seckill/internal/lock/mysqllock"
	"seckill/internal/lock/redislock"
	"seckill/internal/lock/redissonlock"
	"seckill/internal/lock/zklock"
)

// This file is the one place that maps a lock.backend name to a constructor.
// Adding a backend means adding one row to backends.

// needs says which server a backend (or the election) talks to, so validation
// checks the right addresses and main builds only the clients in use.
type needs int

const (
	needsNothing needs = iota
	needsRedis
	needsEtcd
	needsZK
	needsMySQL
)

// backendSpec is one row of the wiring table.
type backendSpec struct {
	needs needs
	build func(ctx context.Context, w *wiring) (lock.Locker, error)
	// ttl is how long the lock outlives a silent holder; nil means lock.ttl.
	ttl func(c *Config) time.Duration
	// labOnly backends oversell across replicas on purpose; stockd runs
	// them only with lab.unsafe: true.
	labOnly bool
	// redisKeys names the Redis keys of the lock named key, for a backend
	// that keeps its locks in Redis: on the stock Redis they must not
	// collide with the sale's (keyspace.go).
	redisKeys func(key string) []string
}

// localHandoffs is how many times in a row a backend passes a released
// lock in memory to another request of this process before it goes back
// to the server (cohort.Config.Handoffs): with stock.combine none (-1),
// else the backends' default (0: cohort.DefaultHandoffs). A combined sale
// queues a replica's buyers itself, in its batches: its next gatherer is
// the only local waiter, and a pass to it keeps the lock on this replica
// for up to nine batches in a row while the other replicas' batches wait.
// Without passes the replicas take turns, and batches grow (docs/scaling.md
// has the flood's numbers).
func localHandoffs(c *Config) int {
	if c.Stock.Combine {
		return -1
	}
	return 0
}

// lockTTL is the configured backend's lease: after that long without an
// accepted read, the fence restarts at the next token it sees
// (stock.ServiceConfig.LockTTL), so the sale recovers from a lock service
// that lost its state.
func lockTTL(c *Config) time.Duration {
	if spec, ok := backends[c.Lock.Backend]; ok && spec.ttl != nil {
		return spec.ttl(c)
	}
	return c.Lock.TTL
}

var backends = map[string]backendSpec{
	backend.Redis: {needs: needsRedis, redisKeys: redislock.RedisKeys, build: func(_ context.Context, w *wiring) (lock.Locker, error) {
		return redislock.New(w.lockRedis(), redislock.Options{TTL: w.cfg.Lock.TTL, Logger: w.log, LocalHandoffs: localHandoffs(w.cfg)}), nil
	}},
	backend.Redisson: {needs: needsRedis, redisKeys: redissonlock.RedisKeys, build: func(_ context.Context, w *wiring) (lock.Locker, error) {
		return redissonlock.New(w.lockRedis(), redissonlock.Options{
			Watchdog: w.cfg.Redisson.Watchdog, LeaseTime: w.cfg.Redisson.LeaseTime,
			LocalHandoffs: localHandoffs(w.cfg),
		}), nil
	}, ttl: func(c *Config) time.Duration { return cmp.Or(c.Redisson.LeaseTime, c.Redisson.Watchdog) }},
	backend.Etcd: {needs: needsEtcd, build: func(_ context.Context, w *wiring) (lock.Locker, error) {
		m, err := w.etcdSession()
		if err != nil {
			return nil, err
		}
		return etcdlock.New(m, etcdlock.Options{LocalHandoffs: localHandoffs(w.cfg)}), nil
	}, ttl: func(c *Config) time.Duration { return c.Etcd.SessionTTL }},
	backend.ZooKeeper: {needs: needsZK, build: func(ctx context.Context, w *wiring) (lock.Locker, error) {
		s, err := w.zkSession(ctx)
		if err != nil {
			return nil, err
		}
		return zklock.New(s, zklock.Options{Root: w.cfg.ZooKeeper.Root, LocalHandoffs: localHandoffs(w.cfg)}), nil
	}, ttl: func(c *Config) time.Duration { return c.ZooKeeper.SessionTimeout }},
	backend.MySQL:    {needs: needsMySQL, build: mysqlBackend(mysqllock.New), ttl: mysqlSessionTTL},
	backend.MySQLRow: {needs: needsMySQL, build: mysqlBackend(mysqllock.NewRow), ttl: mysqlSessionTTL},
}

// labBackends are the backends only a lab build has (backends_lab.go adds
// their rows): a product build names them in its refusal instead of
// calling them unknown.
var labBackends = backend.LabOnly()

// backendNames lists the valid lock.backend values, sorted, for messages.
func backendNames() []string {
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// buildLocker constructs the configured backend and describes it. Lockers
// that cannot describe themselves are treated as unsafe: fencing needs
// tokens the backend vouches for.
func buildLocker(ctx context.Context, w *wiring) (lock.Locker, lock.Info, error) {
	name := w.cfg.Lock.Backend
	spec, ok := backends[name]
	if !ok && slices.Contains(labBackends, name) {
		return nil, lock.Info{}, fmt.Errorf("config: lock.backend: %w", errNotLabBuild(name))
	}
	if !ok {
		return nil, lock.Info{}, fmt.Errorf("config: lock.backend: unknown backend %q (want one of %s)",
			name, strings.Join(backendNames(), ", "))
	}
	lk, err := spec.build(ctx, w)
	if err != nil {
		return nil, lock.Info{}, fmt.Errorf("lock backend %s: %w", name, err)
	}
	info := lock.Info{Name: name}
	if d, ok := lk.(lock.Describer); ok {
		info = d.Describe()
	}
	if c, ok := lk.(lock.Closer); ok {
		w.onClose(c.Close)
	}
	return lk, info, nil
}
