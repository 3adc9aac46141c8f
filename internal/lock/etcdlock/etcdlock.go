package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"

	"seckill/internal/etcdsess"
	"seckill/internal/lock"
	"seckill/internal/lock/backend"
	"seckill/internal/lock/cohort"
)

// DefaultPrefix is the etcd key prefix used when Options.Prefix is empty.
const DefaultPrefix = "/seckill/locks/"

// cleanupTimeout bounds the background removal of a key left by an
// abandoned acquisition and the releases done by Close.
const cleanupTimeout = 3 * time.Second

// closeTimeout bounds Close's releases and last sweep together.
const closeTimeout = 2 * time.Second

var (
	_ lock.Locker    = (*Locker)(nil)
	_ lock.Closer    = (*Locker)(nil)
	_ lock.Pinger    = (*Locker)(nil)
	_ lock.Describer = (*Locker)(nil)
)

// lockerIDs tells apart Lockers sharing one session (one Manager): their
// keys must differ, or two of them would both believe they hold the lock.
var lockerIDs atomic.Uint64

// Options configure a Locker.
type Options struct {
	// Prefix is prepended to every lock's etcd keys. The default is
	// DefaultPrefix ("/seckill/locks/").
	Prefix string
	// LocalHandoffs bounds the cohort: how many times in a row the lock may
	// be handed over in memory to another goroutine of this Locker, so
	// that at most LocalHandoffs+1 local holders go before the next
	// process: cohort.Config.Handoffs (the default, 0, is 8; a negative
	// value disables hand-overs; values above 65535 are capped).
	LocalHandoffs int
}

// Locker acquires etcd locks through the session of an etcdsess.Manager.
// It is safe for concurrent use. Leases are lost when the session expires.
type Locker struct {
	co *cohort.Locker
	m  *etcdsess.Manager
	// prefix is Options.Prefix resolved.
	prefix string
	// passMargin: a hold whose session lease is known alive for less than
	// this is not passed on in memory (session TTL/6: one lost keep-alive
	// is tolerated, two are not).
	passMargin time.Duration
	id         uint64
	seq        atomic.Uint64 // makes every acquisition's key unique
	log        *slog.Logger

	life  context.Context // cancelled by Close: aborts waits and watches
	close context.CancelFunc
	bg    lock.Group        // prefix watches (feeds) and hold watches
	sw    *etcdsess.Sweeper // removes keys whose delete was not confirmed

	mu      sync.Mutex
	feeds   map[string]*feed // prefix watch per name in use here
	closed  bool
	closeBy time.Time // Close's deadline for releases, once closed
}

// New returns a Locker that borrows m's session. Closing the Locker does not
// close m.
func New(m *etcdsess.Manager, opts Options) *Locker {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	life, cancel := context.WithCancel(context.Background())
	id := lockerIDs.Add(1)
	log := slog.Default().With("component", "etcdlock", "locker", id)
	l := &Locker{
		m:          m,
		prefix:     opts.Prefix,
		passMargin: m.TTL() / 6,
		id:         id,
		log:        log,
		sw:         m.NewSweeper(log),
		life:       life,
		close:      cancel,
		feeds:      make(map[string]*feed),
	}
	l.co = cohort.New(server{l}, cohort.Config{Name: "etcdlock", Handoffs: opts.LocalHandoffs,
		CleanupTimeout: cleanupTimeout, Log: log})
	return l
}

// KeyPrefix returns the etcd prefix under which name's contenders put their
// keys. Names are path-escaped so that lock "a" never covers lock "a/b".
func (l *Locker) KeyPrefix(name string) string {
	return l.prefix + url.PathEscape(name) + "/"
}

// Describe names the backend.
func (l *Locker) Describe() lock.Info { return lock.Info{Name: backend.Etcd, Safe: true} }

// Ping checks that etcd answers a linearizable read (which needs a quorum).
// Errors wrap lock.ErrUnavailable.
func (l *Locker) Ping(ctx context.Context) error {
	if _, err := l.m.Client().Get(ctx, l.prefix, clientv3.WithCountOnly()); err != nil {
		return lock.Unavailable("etcdlock", "ping", err)
	}
	return nil
}

// Close stops the Locker: pending Acquires return lock.ErrClosed, leases
// still held are released in etcd (best effort, bounded) and report
// lock.ErrLost wrapping lock.ErrClosed. It does not close the Manager.
func (l *Locker) Close() error {
	// One deadline for all the releases and the sweeper's last round, not
	// one each: Close is bounded however many leases are held while etcd is
	// unreachable (then ending their sessions takes finalEndBound more).
	budget := closeTimeout
	if !l.connected() {
		// Unreachable: a delete could only wait out the deadline. The
		// sweeper ends the keys' sessions instead (keep-alive stopped, so
		// the keys go with their leases).
		budget = 0
	}
	deadline := time.Now().Add(budget)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.closeBy = deadline
	l.mu.Unlock()

	l.close()
	err := l.co.Close() // ends waiters and leases; releases the holds by deadline
	l.bg.Close()
	// Last: the releases above may have left keys to sweep.
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	l.sw.Close(ctx)
	return err
}

func (l *Locker) isClosed() bool { return l.life.Err() != nil }

// connected reports whether the client's connection to etcd is up; used to
// say "unavailable" rather than just "deadline exceeded" when a wait ended
// because etcd stopped answering.
func (l *Locker) connected() bool {
	conn := l.m.Client().ActiveConnection()
	return conn != nil && conn.GetState() == connectivity.Ready
}

// acquireErr turns the reason an etcd acquisition failed into the lock
// package's sentinels; the cohort adds ErrNotObtained when the caller's
// ctx ended. ctx is the acquisition's.
func (l *Locker) acquireErr(ctx context.Context, err error) error {
	switch {
	case l.isClosed() || errors.Is(err, etcdsess.ErrClosed):
		return fmt.Errorf("%w: %w", lock.ErrClosed, err)
	case ctx.Err() != nil && !l.connected():
		return fmt.Errorf("%w (etcd unreachable): %w", lock.ErrUnavailable, err)
	case ctx.Err() != nil:
		return err
	case errors.Is(err, errSessionExpired):
		return fmt.Errorf("%w: %w", lock.ErrNotObtained, err)
	default:
		return fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
	}
}

// WaitQueued returns once at least n goroutines of this Locker wait locally
// for key behind the one holding it or acquiring it from the server, or
// with ctx's error. It is for tests and tools that must know a waiter has
// queued (locktest.Queuer).
func (l *Locker) WaitQueued(ctx context.Context, key string, n int) error {
	return l.co.WaitQueued(ctx, key, n)
}
