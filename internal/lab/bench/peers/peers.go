// Package peers adapts the lock libraries seckill is measured against to one
// shape, Lock(ctx) → unlock, so the benchmark runs the same sale loop over
// every one of them. Each adapter uses its library the way a plain user
// would (defaults, or the one option named in its constructor); none is
// tuned. The package also holds the baseline the articles start from: a
// SETNX lock polled every 10 ms (Naive).
//
// Where a library gives up on its own (redsync after its 32 tries,
// bsm/redislock at its TTL deadline), the adapter simply calls it again, as
// an application that must sell would; GaveUp counts those calls.
package peers

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Unlock releases what a Lock call obtained.
type Unlock func(ctx context.Context) error

// GaveUp counts lock calls a library abandoned by itself (not by ctx) and
// that the adapter repeated. Shared by all adapters of one benchmark row.
type GaveUp = atomic.Int64

// Redsync is a go-redsync/redsync mutex with the library's defaults (8s
// expiry, 32 tries 50-250 ms apart) on one Redis pool. Like redsync's own
// Mutex it is stateful: use one per goroutine.
type Redsync struct {
	m      *redsync.Mutex
	gaveUp *GaveUp
}

// NewRedsyncPool wraps rdb as the single pool redsync needs. Share it among
// the Redsync mutexes of one "process".
func NewRedsyncPool(rdb redis.UniversalClient) *redsync.Redsync {
	return redsync.New(goredis.NewPool(rdb))
}

// NewRedsync returns a mutex on key from rs with default options.
func NewRedsync(rs *redsync.Redsync, key string, gaveUp *GaveUp) *Redsync {
	return &Redsync{m: rs.NewMutex(key), gaveUp: gaveUp}
}

// Lock blocks until the mutex is held or ctx is done.
func (r *Redsync) Lock(ctx context.Context) (Unlock, error) {
	for {
		err := r.m.LockContext(ctx)
		if err == nil {
			return func(ctx context.Context) error {
				if _, err := r.m.UnlockContext(ctx); err != nil {
					return fmt.Errorf("redsync: unlock: %w", err)
				}
				return nil
			}, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("redsync: lock: %w", ctx.Err())
		}
		var taken *redsync.ErrTaken
		if !errors.Is(err, redsync.ErrFailed) && !errors.As(err, &taken) {
			return nil, fmt.Errorf("redsync: lock: %w", err)
		}
		r.gaveUp.Add(1)
	}
}

// BSM is bsm/redislock's Obtain with a linear retry strategy.
type BSM struct {
	c      *bsm.Client
	key    string
	ttl    time.Duration
	retry  time.Duration
	gaveUp *GaveUp
}

// NewBSM returns an Obtain loop on key retrying every retry; ttl is the lock
// TTL and, since the caller's ctx has no deadline, also how long one Obtain
// call retries before the library gives up.
func NewBSM(c *bsm.Client, key string, ttl, retry time.Duration, gaveUp *GaveUp) *BSM {
	return &BSM{c: c, key: key, ttl: ttl, retry: retry, gaveUp: gaveUp}
}

// Lock blocks until the lock is held or ctx is done.
func (b *BSM) Lock(ctx context.Context) (Unlock, error) {
	for {
		l, err := b.c.Obtain(ctx, b.key, b.ttl, &bsm.Options{RetryStrategy: bsm.LinearBackoff(b.retry)})
		if err == nil {
			return func(ctx context.Context) error {
				if err := l.Release(ctx); err != nil {
					return fmt.Errorf("bsm/redislock: release: %w", err)
				}
				return nil
			}, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("bsm/redislock: obtain: %w", ctx.Err())
		}
		// Obtain gives up with ErrNotObtained, or with its own deadline's
		// error when the ctx had none.
		if !errors.Is(err, bsm.ErrNotObtained) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("bsm/redislock: obtain: %w", err)
		}
		b.gaveUp.Add(1)
	}
}

// EtcdMutex is etcd's concurrency.Mutex used raw: a session of its own
// (one lease, kept alive) and a mutex on prefix, as the etcd docs show it.
type EtcdMutex struct {
	s *concurrency.Session
	m *concurrency.Mutex
}

// NewEtcdMutex opens a session with ttl on cli and a mutex on prefix.
// Close ends the session.
func NewEtcdMutex(ctx context.Context, cli *clientv3.Client, prefix string, ttl time.Duration) (*EtcdMutex, error) {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(max(1, int(ttl.Seconds()))), concurrency.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("etcd session: %w", err)
	}
	return &EtcdMutex{s: s, m: concurrency.NewMutex(s, prefix)}, nil
}

// Lock blocks until the mutex is held or ctx is done.
func (e *EtcdMutex) Lock(ctx context.Context) (Unlock, error) {
	if err := e.m.Lock(ctx); err != nil {
		return nil, fmt.Errorf("etcd mutex: lock: %w", err)
	}
	return func(ctx context.Context) error {
		if err := e.m.Unlock(ctx); err != nil {
			return fmt.Errorf("etcd mutex: unlock: %w", err)
		}
		return nil
	}, nil
}

// Close revokes the session's lease.
func (e *EtcdMutex) Close() error { return e.s.Close() }

// ZKLock is go-zookeeper's Lock recipe used raw on a shared connection.
// zk.Lock cannot be cancelled: Lock returns when the lock is held or the
// connection fails, whatever ctx says.
type ZKLock struct{ l *zk.Lock }

// NewZKLock returns a recipe lock on path over conn.
func NewZKLock(conn *zk.Conn, path string) *ZKLock {
	return &ZKLock{l: zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))}
}

// Lock blocks until the lock is held; ctx is not consulted (see ZKLock).
func (z *ZKLock) Lock(context.Context) (Unlock, error) {
	if err := z.l.Lock(); err != nil {
		return nil, fmt.Errorf("zk lock: %w", err)
	}
	return func(context.Context) error {
		if err := z.l.Unlock(); err != nil {
			return fmt.Errorf("zk unlock: %w", err)
		}
		return nil
	}, nil
}
