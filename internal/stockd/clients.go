package stockd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"seckill/internal/etcdsess"
	"seckill/internal/zksess"
)

// wiring builds each server client at most once, on first use, and hands
// the same one to every user: the lock and the election share the etcd
// session and the ZooKeeper session, and the audit reads the stock Redis.
// close closes them in reverse order of construction, so a user built on a
// client (a locker, an elector) is closed before it.
type wiring struct {
	cfg      *Config
	log      *slog.Logger
	stockRDB redis.UniversalClient
	lockRDB  redis.UniversalClient
	etcdMgr  *etcdsess.Manager
	zkSess   *zksess.Session
	closers  []func() error
}

// stockRedis is the stock's Redis, with go-redis's retries off: a retried
// write could sell twice if its first reply was lost. The stock service
// retries its own writes, exactly-once by the attempt id they carry.
func (w *wiring) stockRedis() redis.UniversalClient {
	if w.stockRDB == nil {
		w.stockRDB = stockRedisClient(w.cfg, -1)
		w.onClose(w.stockRDB.Close)
	}
	return w.stockRDB
}

// lockRedis is the Redis the lock lives in: the stock Redis unless
// lock.redis_addr names another (the fault tests proxy them separately). It
// is always a client of its own: the lock's scripts are idempotent per
// attempt (an owner id per acquisition), so go-redis may retry them, which
// the stock client must not do.
func (w *wiring) lockRedis() redis.UniversalClient {
	if w.lockRDB == nil {
		if addr := w.cfg.Lock.RedisAddr; addr != "" {
			w.lockRDB = newRedisClient(w.cfg, addr, 0)
		} else {
			// The stock Redis, through Sentinel when it is: the lock's
			// token counter fails over with the fence it is checked by.
			w.lockRDB = stockRedisClient(w.cfg, 0)
		}
		w.onClose(w.lockRDB.Close)
	}
	return w.lockRDB
}

// etcdSession returns the process's etcd session manager. clientv3.New does
// not block on the connection: an unreachable etcd shows in /readyz and as
// 503s, not here.
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

// zkSession returns the process's ZooKeeper session, dialling it on first
// use. A JVM that has just started can take seconds to grant one under
// load, so the wait is longer than the session timeout alone.
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

// stockRedisClient is a client of the stock Redis: of a Redis Cluster with
// redis.cluster.addrs, through Sentinel when redis.sentinel.master is set
// (a go-redis FailoverClient, which asks the Sentinels for the primary and
// follows a failover), else of redis.addr.
func stockRedisClient(cfg *Config, maxRetries int) redis.UniversalClient {
	if onCluster(cfg) {
		return newClusterClient(cfg, maxRetries)
	}
	if cfg.Redis.Sentinel.Master == "" {
		return newRedisClient(cfg, cfg.Redis.Addr, maxRetries)
	}
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            cfg.Redis.Sentinel.Master,
		SentinelAddrs:         cfg.Redis.Sentinel.Addrs,
		MaxRetries:            maxRetries,
		Password:              cfg.Redis.Password,
		DB:                    cfg.Redis.DB,
		DialTimeout:           cfg.Redis.Timeout,
		ReadTimeout:           cfg.Redis.Timeout,
		WriteTimeout:          cfg.Redis.Timeout,
		ContextTimeoutEnabled: true,
	})
}

// minReplicaAcks is stock.min_replica_acks with its -1 resolved: 1 when
// the stock Redis is behind Sentinel or a Redis Cluster (a replica exists
// to wait for), else 0.
func minReplicaAcks(cfg *Config) int {
	if n := cfg.Stock.MinReplicaAcks; n >= 0 {
		return n
	}
	if cfg.Redis.Sentinel.Master != "" || onCluster(cfg) {
		return 1
	}
	return 0
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
