package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"sync"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"seckill/internal/etcdsess"
	"seckill/internal/lab/bench/peers"
	"seckill/internal/lock"
	"seckill/internal/lock/etcdlock"
	"seckill/internal/lock/redislock"
	"seckill/internal/lock/redissonlock"
	"seckill/internal/lock/zklock"
	"seckill/internal/zksess"
)

// Kinds of subject, in report order.
const (
	KindBackend = "backend" // a seckill lock backend
	KindPeer    = "peer"    // a library or baseline it is measured against
	KindCeiling = "ceiling" // no lock at all
)

// Servers are the addresses of the lock servers a run measures on.
// An empty address makes the subjects that need it unavailable.
type Servers struct {
	Redis, Etcd, ZooKeeper string
	// MySQL is a go-sql-driver DSN (MariaDB here), not an address.
	MySQL string
}

// lockTTL is the TTL / session lifetime every lease-based subject uses, so
// none gains by expiring sooner. No row comes close to it.
const lockTTL = 10 * time.Second

// Subject is one lock (or the lock-free sale) the micro benchmark runs.
type Subject struct {
	Name   string // row label, e.g. "redis" or "redsync"
	Kind   string // KindBackend, KindPeer or KindCeiling
	Server string // "redis", "etcd", "zookeeper" or "mysql"
	About  string // one line for the report: what exactly is run
	// lockFree: no lock; every sale is one script (the ceiling).
	lockFree bool
	// open starts one "process": its own clients and lockers.
	open func(ctx context.Context, s Servers, c *Counter, gaveUp *peers.GaveUp) (procSet, error)
}

// procSet is one client set: the clients and lockers of one process.
type procSet interface {
	// contender returns the lock handle of one contending goroutine on key.
	contender(ctx context.Context, key string) (contender, error)
	// close releases everything the set opened.
	close() error
}

// contender is one goroutine's view of a lock.
type contender interface {
	Lock(ctx context.Context) (peers.Unlock, error)
}

// Subjects lists everything the micro benchmark measures, in report order.
// Each goal's pair sits side by side (redis then redsync, etcd then its raw
// mutex, …) because rows run in this order per contender count: on a shared
// machine, rows measured a few seconds apart see the same background load.
func Subjects() []Subject {
	subjects := []Subject{
		{Name: "redis", Kind: KindBackend, Server: "redis",
			About: "redislock: Redis FIFO with direct hand-off by pub/sub; in-process cohort passes (≤8 in a row)",
			open: redisOpen(func(rdb *redis.Client) lock.Locker {
				return redislock.New(rdb, redislock.Options{TTL: lockTTL, Logger: quiet()})
			})},
		{Name: "redsync", Kind: KindPeer, Server: "redis",
			About: "go-redsync/redsync v4 defaults (32 tries, 50-250 ms random delay); a given-up Lock is called again",
			open:  redsyncOpen},
		{Name: "redisson", Kind: KindBackend, Server: "redis",
			About: "redissonlock: Redisson RLock (hash + watchdog), one waker per process, owner transfer to a local waiter (≤8)",
			open: redisOpen(func(rdb *redis.Client) lock.Locker {
				return redissonlock.New(rdb, redissonlock.Options{})
			})},
		{Name: "etcd", Kind: KindBackend, Server: "etcd",
			About: "etcdlock: one session per process, create-revision FIFO, prefix watch, in-process cohort passes (≤8)",
			open:  etcdBackendOpen},
		{Name: "etcd-mutex", Kind: KindPeer, Server: "etcd",
			About: "etcd concurrency.Mutex used raw: one session per contender",
			open:  etcdMutexOpen},
		{Name: "zookeeper", Kind: KindBackend, Server: "zookeeper",
			About: "zklock: Curator-style ephemeral-sequential node per process, predecessor watch, in-process cohort passes (≤8)",
			open:  zkBackendOpen},
		{Name: "zk-lock", Kind: KindPeer, Server: "zookeeper",
			About: "go-zookeeper zk.NewLock per contender, one conn per process",
			open:  zkLockOpen},
	}
	subjects = append(subjects, mysqlSubjects()...)
	return append(subjects, []Subject{
		{Name: "bsm-1ms", Kind: KindPeer, Server: "redis",
			About: "bsm/redislock Obtain, LinearBackoff(1ms)",
			open:  bsmOpen(time.Millisecond)},
		{Name: "bsm-10ms", Kind: KindPeer, Server: "redis",
			About: "bsm/redislock Obtain, LinearBackoff(10ms)",
			open:  bsmOpen(10 * time.Millisecond)},
		{Name: "setnx-poll", Kind: KindPeer, Server: "redis",
			About: "the articles' baseline: SET NX PX, sleep 10 ms, retry (peers.Naive)",
			open:  naiveOpen},
		{Name: "lock-free", Kind: KindCeiling, Server: "redis", lockFree: true,
			About: "no lock: one Lua script per sale (check, DECR, INCR lucky)",
			open:  func(context.Context, Servers, *Counter, *peers.GaveUp) (procSet, error) { return nopSet{}, nil }},
	}...)
}

// quiet is the logger handed to lock backends that take one: a benchmark's
// output is its report, and a failure shows up as a row error anyway.
func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func errNoServer(name string) error { return fmt.Errorf("%w: no %s server", ErrUnavailable, name) }

// ErrUnavailable marks a subject or end-to-end row that could not run
// because its server or backend is missing; the report shows it as such.
var ErrUnavailable = errors.New("bench: unavailable")

// newLockRedis is a lock client: counted, and separate from the data clients.
func newLockRedis(addr string, c *Counter) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	rdb.AddHook(redisHook{c})
	return rdb
}

func newEtcd(addr string, c *Counter) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{addr},
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
		DialOptions:          grpcCounting(c),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w: %w", ErrUnavailable, err)
	}
	return cli, nil
}

// closers runs clean-ups in reverse order.
type closers []func() error

func (cs closers) close() error {
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		errs = append(errs, cs[i]())
	}
	return errors.Join(errs...)
}

// lockerSet adapts a lock.Locker process.
type lockerSet struct {
	l lock.Locker
	closers
}

func (s *lockerSet) contender(_ context.Context, key string) (contender, error) {
	return lockerContender{s.l, key}, nil
}

type lockerContender struct {
	l   lock.Locker
	key string
}

func (c lockerContender) Lock(ctx context.Context) (peers.Unlock, error) {
	lease, err := c.l.Acquire(ctx, c.key)
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}

func closeLocker(l lock.Locker) func() error {
	return func() error {
		if c, ok := l.(lock.Closer); ok {
			return c.Close()
		}
		return nil
	}
}

func redisOpen(mk func(*redis.Client) lock.Locker) func(context.Context, Servers, *Counter, *peers.GaveUp) (procSet, error) {
	return func(_ context.Context, s Servers, c *Counter, _ *peers.GaveUp) (procSet, error) {
		if s.Redis == "" {
			return nil, errNoServer("redis")
		}
		rdb := newLockRedis(s.Redis, c)
		l := mk(rdb)
		return &lockerSet{l: l, closers: closers{rdb.Close, closeLocker(l)}}, nil
	}
}

func etcdBackendOpen(_ context.Context, s Servers, c *Counter, _ *peers.GaveUp) (procSet, error) {
	if s.Etcd == "" {
		return nil, errNoServer("etcd")
	}
	cli, err := newEtcd(s.Etcd, c)
	if err != nil {
		return nil, err
	}
	m := etcdsess.New(cli, lockTTL)
	l := etcdlock.New(m, etcdlock.Options{Prefix: "/bench/etcdlock/"})
	return &lockerSet{l: l, closers: closers{cli.Close, m.Close, l.Close}}, nil
}

func zkBackendOpen(ctx context.Context, s Servers, _ *Counter, _ *peers.GaveUp) (procSet, error) {
	if s.ZooKeeper == "" {
		return nil, errNoServer("zookeeper")
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	sess, err := zksess.Dial(dctx, []string{s.ZooKeeper}, lockTTL)
	if err != nil {
		return nil, fmt.Errorf("zookeeper: %w: %w", ErrUnavailable, err)
	}
	l := zklock.New(sess, zklock.Options{Root: "/bench/zklock"})
	return &lockerSet{l: l, closers: closers{func() error { sess.Close(); return nil }, l.Close}}, nil
}

// funcSet is a process whose contenders are built by a function.
type funcSet struct {
	mk func(ctx context.Context, key string) (contender, error)
	closers
}

func (s *funcSet) contender(ctx context.Context, key string) (contender, error) {
	return s.mk(ctx, key)
}

func redsyncOpen(_ context.Context, s Servers, c *Counter, gaveUp *peers.GaveUp) (procSet, error) {
	if s.Redis == "" {
		return nil, errNoServer("redis")
	}
	rdb := newLockRedis(s.Redis, c)
	rs := peers.NewRedsyncPool(rdb)
	return &funcSet{
		mk: func(_ context.Context, key string) (contender, error) {
			return peers.NewRedsync(rs, key, gaveUp), nil
		},
		closers: closers{rdb.Close},
	}, nil
}

func bsmOpen(retry time.Duration) func(context.Context, Servers, *Counter, *peers.GaveUp) (procSet, error) {
	return func(_ context.Context, s Servers, c *Counter, gaveUp *peers.GaveUp) (procSet, error) {
		if s.Redis == "" {
			return nil, errNoServer("redis")
		}
		rdb := newLockRedis(s.Redis, c)
		client := bsm.New(rdb)
		return &funcSet{
			mk: func(_ context.Context, key string) (contender, error) {
				return peers.NewBSM(client, key, lockTTL, retry, gaveUp), nil
			},
			closers: closers{rdb.Close},
		}, nil
	}
}

func naiveOpen(_ context.Context, s Servers, c *Counter, _ *peers.GaveUp) (procSet, error) {
	if s.Redis == "" {
		return nil, errNoServer("redis")
	}
	rdb := newLockRedis(s.Redis, c)
	return &funcSet{
		mk: func(_ context.Context, key string) (contender, error) {
			return peers.NewNaive(rdb, key, lockTTL), nil
		},
		closers: closers{rdb.Close},
	}, nil
}

func etcdMutexOpen(_ context.Context, s Servers, c *Counter, _ *peers.GaveUp) (procSet, error) {
	if s.Etcd == "" {
		return nil, errNoServer("etcd")
	}
	cli, err := newEtcd(s.Etcd, c)
	if err != nil {
		return nil, err
	}
	set := &funcSet{closers: closers{cli.Close}}
	var mu sync.Mutex
	set.mk = func(ctx context.Context, key string) (contender, error) {
		m, err := peers.NewEtcdMutex(ctx, cli, "/bench/etcd-mutex/"+key, lockTTL)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		mu.Lock()
		set.closers = append(set.closers, m.Close)
		mu.Unlock()
		return m, nil
	}
	return set, nil
}

func zkLockOpen(ctx context.Context, s Servers, _ *Counter, _ *peers.GaveUp) (procSet, error) {
	if s.ZooKeeper == "" {
		return nil, errNoServer("zookeeper")
	}
	conn, events, err := zk.Connect([]string{s.ZooKeeper}, lockTTL,
		zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("zookeeper: %w: %w", ErrUnavailable, err)
	}
	// Wait for the session, as a user's first Lock would.
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for conn.State() != zk.StateHasSession {
		select {
		case <-events:
		case <-wctx.Done():
			conn.Close()
			return nil, fmt.Errorf("zookeeper: %w: no session: %w", ErrUnavailable, wctx.Err())
		}
	}
	go func() {
		for range events { // the library closes it when the conn closes
		}
	}()
	return &funcSet{
		mk: func(_ context.Context, key string) (contender, error) {
			return peers.NewZKLock(conn, "/bench/zk-lock/"+key), nil
		},
		closers: closers{func() error { conn.Close(); return nil }},
	}, nil
}

// nopSet serves the lock-free subject, which has no lock.
type nopSet struct{}

func (nopSet) contender(context.Context, string) (contender, error) { return nil, nil }
func (nopSet) close() error                                         { return nil }

// onceSet makes close idempotent: a stuck row closes its sets early, and
// the row's clean-up closes them again (go-zookeeper's Close must not run
// twice).
type onceSet struct {
	procSet
	once sync.Once
	err  error
}

func (s *onceSet) close() error {
	s.once.Do(func() { s.err = s.procSet.close() })
	return s.err
}
