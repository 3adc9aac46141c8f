package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"seckill/internal/etcdsess"
	"seckill/internal/lock"
	"seckill/internal/lock/etcdlock"
	"seckill/internal/lock/flawedlock"
	"seckill/internal/lock/locallock"
	"seckill/internal/lock/nolock"
	"seckill/internal/lock/redislock"
	"seckill/internal/lock/redissonlock"
	"seckill/internal/lock/zklock"
	"seckill/internal/zksess"
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
	// none and local are deliberately unsafe across replicas: they exist to
	// show the overselling the articles start from.
	"none":  {needs: needsNothing, labOnly: true, build: func(context.Context, *wiring) (lock.Locker, error) { return nolock.New(), nil }},
	"local": {needs: needsNothing, labOnly: true, build: func(context.Context, *wiring) (lock.Locker, error) { return locallock.New(), nil }},
	"redis": {needs: needsRedis, build: func(_ context.Context, w *wiring) (lock.Locker, error) {
		return redislock.New(w.lockRedis(), redislock.Options{TTL: w.cfg.Lock.TTL, Logger: w.log}), nil
	}},
	"redisson": {needs: needsRedis, build: func(_ context.Context, w *wiring) (lock.Locker, error) {
		return redissonlock.New(w.lockRedis(), redissonlock.Options{
			Watchdog: w.cfg.Redisson.Watchdog, LeaseTime: w.cfg.Redisson.LeaseTime,
		}), nil
	}, ttl: func(c *Config) time.Duration { return cmp.Or(c.Redisson.LeaseTime, c.Redisson.Watchdog) }},
	"etcd": {needs: needsEtcd, build: func(_ context.Context, w *wiring) (lock.Locker, error) {
		m, err := w.etcdSession()
		if err != nil {
			return nil, err
		}
		return etcdlock.New(m, etcdlock.Options{}), nil
	}, ttl: func(c *Config) time.Duration { return c.Etcd.SessionTTL }},
	"zookeeper": {needs: needsZK, build: func(ctx context.Context, w *wiring) (lock.Locker, error) {
		s, err := w.zkSession(ctx)
		if err != nil {
			return nil, err
		}
		return zklock.New(s, zklock.Options{Root: w.cfg.ZooKeeper.Root}), nil
	}, ttl: func(c *Config) time.Duration { return c.ZooKeeper.SessionTimeout }},
	// Lab-only broken Redis locks (issue 7): each fails in the way one of the
	// articles' versions does. Never safe; they exist to be watched failing.
	"setnx":          {needs: needsRedis, labOnly: true, build: flawed(flawedlock.NewSetNX)},
	"redis-nocheck":  {needs: needsRedis, labOnly: true, build: flawed(flawedlock.NewNoCheck)},
	"redis-checkdel": {needs: needsRedis, labOnly: true, build: flawed(flawedlock.NewCheckDel)},
}

func flawed(newFn func(redis.UniversalClient, flawedlock.Options) *flawedlock.Locker) func(context.Context, *wiring) (lock.Locker, error) {
	return func(_ context.Context, w *wiring) (lock.Locker, error) {
		return newFn(w.lockRedis(), flawedlock.Options{TTL: w.cfg.Lock.TTL}), nil
	}
}

// backendNames lists the valid lock.backend values, sorted, for messages.
func backendNames() []string {
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// wiring owns the clients built for the locker and closes them, last built
// first, after the locker itself.
type wiring struct {
	cfg     *Config
	log     *slog.Logger
	lockRDB *redis.Client
	etcdMgr *etcdsess.Manager // shared by the etcd lock and the etcd election
	zkSess  *zksess.Session   // shared by the ZooKeeper lock and election
	closers []func() error
}

// lockRedis is the Redis the lock lives in: the stock Redis unless
// lock.redis_addr names another (the fault tests proxy them separately). It
// is always a client of its own: the lock's scripts are idempotent per
// attempt (an owner id per acquisition), so go-redis may retry them, which
// the stock client must not do.
func (w *wiring) lockRedis() redis.UniversalClient {
	if w.lockRDB == nil {
		addr := w.cfg.Lock.RedisAddr
		if addr == "" {
			addr = w.cfg.Redis.Addr
		}
		w.lockRDB = newRedisClient(w.cfg, addr, 0)
		w.onClose(w.lockRDB.Close)
	}
	return w.lockRDB
}

// etcdSession returns the process's etcd session manager, building the
// client and manager on first use. clientv3.New does not block on the
// connection: an unreachable etcd shows in /readyz and as 503s, not here.
func (w *wiring) etcdSession() (*etcdsess.Manager, error) {
	if w.etcdMgr != nil {
		return w.etcdMgr, nil
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   w.cfg.Etcd.Endpoints,
		DialTimeout: w.cfg.Etcd.DialTimeout,
		// Keep-alive probes notice a dead connection within seconds, well
		// inside the session TTL.
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(), // the client's zap logs are noise; failures surface as errors
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	w.onClose(cli.Close)
	w.etcdMgr = etcdsess.New(cli, w.cfg.Etcd.SessionTTL)
	w.onClose(w.etcdMgr.Close)
	return w.etcdMgr, nil
}

// zkSession dials ZooKeeper on first use and waits for a session. A JVM that
// has just started can take seconds to grant one under load, so the wait is
// longer than the session timeout alone.
func (w *wiring) zkSession(ctx context.Context) (*zksess.Session, error) {
	if w.zkSess != nil {
		return w.zkSess, nil
	}
	dctx, cancel := context.WithTimeout(ctx, w.cfg.ZooKeeper.SessionTimeout+15*time.Second)
	defer cancel()
	s, err := zksess.Dial(dctx, w.cfg.ZooKeeper.Servers, w.cfg.ZooKeeper.SessionTimeout)
	if err != nil {
		return nil, fmt.Errorf("zookeeper: %w", err)
	}
	w.zkSess = s
	w.onClose(func() error { s.Close(); return nil })
	return s, nil
}

func (w *wiring) onClose(f func() error) { w.closers = append(w.closers, f) }

// close closes everything registered, in reverse order.
func (w *wiring) close() error {
	var errs []error
	for _, f := range slices.Backward(w.closers) {
		errs = append(errs, f())
	}
	w.closers = nil
	return errors.Join(errs...)
}

// buildLocker constructs the configured backend and describes it. Lockers
// that cannot describe themselves are treated as unsafe: fencing needs
// tokens the backend vouches for.
func buildLocker(ctx context.Context, w *wiring) (lock.Locker, lock.Info, error) {
	name := w.cfg.Lock.Backend
	spec, ok := backends[name]
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

// newRedisClient builds a client; maxRetries is go-redis's MaxRetries (0 =
// its default of 3, -1 = none).
func newRedisClient(cfg *Config, addr string, maxRetries int) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:         addr,
		MaxRetries:   maxRetries,
		Password:     cfg.Redis.Password,
		DB:           cfg.Redis.DB,
		DialTimeout:  cfg.Redis.Timeout,
		ReadTimeout:  cfg.Redis.Timeout,
		WriteTimeout: cfg.Redis.Timeout,
		// Honour ctx deadlines on commands: a sale's context bounds its I/O.
		ContextTimeoutEnabled: true,
	})
}
