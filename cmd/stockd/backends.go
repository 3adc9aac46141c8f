package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/locallock"
	"seckill/internal/lock/nolock"
	"seckill/internal/lock/redislock"
	"seckill/internal/lock/redissonlock"
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

// backendSpec is one row of the wiring table. A nil build means the name is
// reserved and validated, but its package is not wired in yet.
type backendSpec struct {
	needs needs
	build func(ctx context.Context, w *wiring) (lock.Locker, error)
}

// errNotBuilt marks a backend whose name is valid but which this binary
// cannot construct yet. It is a configuration error (exit 2), and names
// lock.backend so the e2e tests can skip rather than fail.
var errNotBuilt = errors.New("not built yet")

var backends = map[string]backendSpec{
	// none and local are deliberately unsafe across replicas: they exist to
	// show the overselling the articles start from.
	"none":  {needs: needsNothing, build: func(context.Context, *wiring) (lock.Locker, error) { return nolock.New(), nil }},
	"local": {needs: needsNothing, build: func(context.Context, *wiring) (lock.Locker, error) { return locallock.New(), nil }},
	"redis": {needs: needsRedis, build: func(_ context.Context, w *wiring) (lock.Locker, error) {
		return redislock.New(w.lockRedis(), redislock.Options{TTL: w.cfg.Lock.TTL, Logger: w.log}), nil
	}},
	"redisson": {needs: needsRedis, build: func(_ context.Context, w *wiring) (lock.Locker, error) {
		return redissonlock.New(w.lockRedis(), redissonlock.Options{
			Watchdog: w.cfg.Redisson.Watchdog, LeaseTime: w.cfg.Redisson.LeaseTime,
		}), nil
	}},
	// TODO(lead): etcdsess.New(w.etcd(), cfg.Etcd.SessionTTL) → etcdlock.New(m, etcdlock.Options{})
	// and zksess.Dial(ctx, cfg.ZooKeeper.Servers, cfg.ZooKeeper.SessionTimeout) →
	// zklock.New(s, zklock.Options{Root: cfg.ZooKeeper.Root}), registering each
	// session's Close with w.onClose.
	"etcd":      {needs: needsEtcd},
	"zookeeper": {needs: needsZK},
	// Lab-only broken Redis locks (issue 7), reserved here so the names validate.
	"setnx":          {needs: needsRedis},
	"redis-nocheck":  {needs: needsRedis},
	"redis-checkdel": {needs: needsRedis},
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
	cfg      *Config
	log      *slog.Logger
	stockRDB *redis.Client
	lockRDB  *redis.Client
	closers  []func() error
}

// lockRedis is the Redis the lock lives in: the stock Redis unless
// lock.redis_addr names another (the fault tests proxy them separately).
func (w *wiring) lockRedis() redis.UniversalClient {
	if w.cfg.Lock.RedisAddr == "" || w.cfg.Lock.RedisAddr == w.cfg.Redis.Addr {
		return w.stockRDB
	}
	if w.lockRDB == nil {
		w.lockRDB = newRedisClient(w.cfg, w.cfg.Lock.RedisAddr)
		w.onClose(w.lockRDB.Close)
	}
	return w.lockRDB
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
	if spec.build == nil {
		return nil, lock.Info{}, fmt.Errorf("config: lock.backend: backend %q %w in this binary", name, errNotBuilt)
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

func newRedisClient(cfg *Config, addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:         addr,
		Password:     cfg.Redis.Password,
		DB:           cfg.Redis.DB,
		DialTimeout:  cfg.Redis.Timeout,
		ReadTimeout:  cfg.Redis.Timeout,
		WriteTimeout: cfg.Redis.Timeout,
		// Honour ctx deadlines on commands: a sale's context bounds its I/O.
		ContextTimeoutEnabled: true,
	})
}
