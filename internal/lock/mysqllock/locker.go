package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
)

// Backend names, as lock.Info reports them.
const (
	BackendGetLock = "mysql"
	BackendRow     = "mysql-row"
)

// Locker is a MySQL/MariaDB lock: GET_LOCK sessions (New) or row locks
// (NewRow), behind the cohort's local FIFO. Safe for concurrent use.
type Locker struct {
	cfg     resolved
	backend string // BackendGetLock or BackendRow
	name    string // error prefix: the package name
	log     *slog.Logger
	co      *cohort.Locker
	control *sql.DB // autocommit: schema, KILL QUERY, checks, the row lock's mints
	lockDB  *sql.DB
	pool    *pool
	rows    sync.Map // lock names whose seckill_locks row is known to exist

	bg lock.Group // keep-alives and KILL QUERYs still on their way
}

var (
	_ lock.Locker        = (*Locker)(nil)
	_ lock.Closer        = (*Locker)(nil)
	_ lock.Pinger        = (*Locker)(nil)
	_ lock.Describer     = (*Locker)(nil)
	_ lock.TokenAdvancer = (*Locker)(nil)
)

// New returns the "mysql" backend: a GET_LOCK named lock held by a
// dedicated session per hold. It creates the schema (idempotent) within
// ctx. Close it to release its locks and connections.
func New(ctx context.Context, cfg Config) (*Locker, error) {
	return open(ctx, cfg, BackendGetLock)
}

// NewRow returns the "mysql-row" backend: a transaction holding
// SELECT … FOR UPDATE on the key's seckill_locks row per hold. It creates
// the schema (idempotent) within ctx. Close it to release its locks and
// connections.
func NewRow(ctx context.Context, cfg Config) (*Locker, error) {
	return open(ctx, cfg, BackendRow)
}

func open(ctx context.Context, cfg Config, backend string) (*Locker, error) {
	r, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	const name = "mysqllock"
	ctrl, err := mysql.NewConnector(r.controlDSN())
	if err != nil {
		return nil, fmt.Errorf("%s: Config.DSN: %w", name, err)
	}
	sess, err := mysql.NewConnector(r.sessionDSN(backend == BackendRow))
	if err != nil {
		return nil, fmt.Errorf("%s: Config.DSN: %w", name, err)
	}
	l := &Locker{
		cfg:     r,
		backend: backend,
		name:    name,
		log:     r.Logger.With("component", name, "lock", backend),
		control: sql.OpenDB(ctrl),
		lockDB:  sql.OpenDB(sess),
	}
	l.control.SetMaxIdleConns(4)
	l.control.SetConnMaxIdleTime(time.Minute)
	l.pool = newPool(l.lockDB, r.PoolSize, r.TTL)
	if err := createSchema(ctx, l.control); err != nil {
		_ = l.control.Close()
		_ = l.lockDB.Close()
		return nil, lock.Unavailable(name, backend+": schema", err)
	}
	var srv cohort.Server = getLockServer{l}
	if backend == BackendRow {
		srv = rowServer{l}
	}
	l.co = cohort.New(srv, cohort.Config{Name: name, Handoffs: r.Handoffs, CleanupTimeout: r.CleanupTimeout, Log: l.log})
	return l, nil
}

// Acquire blocks until key is held or ctx is done. Goroutines of this
// Locker queue locally in FIFO order; one at a time waits at the server.
// Errors wrap lock.ErrNotObtained (with ctx's error), lock.ErrUnavailable
// or lock.ErrClosed.
func (l *Locker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	return l.co.Acquire(ctx, key)
}

// Describe names the backend for logs, metrics and the fence.
func (l *Locker) Describe() lock.Info { return lock.Info{Name: l.backend, Safe: true} }

// Ping checks that the server answers and the token table is there; the
// error wraps lock.ErrUnavailable.
func (l *Locker) Ping(ctx context.Context) error {
	var n int
	err := l.control.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+tokenTable+" WHERE name = ''").Scan(&n)
	if err != nil {
		return lock.Unavailable(l.name, l.backend+": ping", err)
	}
	return nil
}

// WaitQueued returns once at least n goroutines of this Locker wait locally
// for key behind its front, or with ctx's error (locktest.Queuer).
func (l *Locker) WaitQueued(ctx context.Context, key string, n int) error {
	return l.co.WaitQueued(ctx, key, n)
}

// Handoffs is the resolved pass bound per server hold (0: passing off).
func (l *Locker) Handoffs() int { return l.co.Handoffs() }

// Passes counts the leases passed in memory so far.
func (l *Locker) Passes() uint64 { return l.co.Passes() }

// Close ends waiting Acquires with ErrClosed, releases held locks (their
// leases become lost) within CleanupTimeout, and closes every connection.
// It returns the releases it could not confirm.
func (l *Locker) Close() error {
	err := l.co.Close()
	l.bg.Close() // each bounded by KeepAlive or CleanupTimeout
	l.pool.close()
	return errors.Join(err, l.lockDB.Close(), l.control.Close())
}

// AdvanceTokens moves key's counter so that every later acquisition gets
// a token above `above` (lock.TokenAdvancer): for a database recreated
// empty, or restored from a backup older than the fence.
func (l *Locker) AdvanceTokens(ctx context.Context, key string, above uint64) error {
	if err := advance(ctx, l.control, LockName(key), cohort.BaseOf(above)); err != nil {
		return lock.Unavailable(l.name, fmt.Sprintf("advance tokens %q", key), err)
	}
	return nil
}

// killGrace is how long a cancelled wait may take to end once its KILL
// QUERY is on its way; after that the connection is dropped instead, so
// Acquire returns about at its deadline even when the server cannot be
// reached.
const killGrace = 500 * time.Millisecond

// interruptible runs a statement that waits server-side (GET_LOCK, a
// locking read) on s. The statement runs on a context detached from ctx:
// the driver would answer a cancelled ctx by closing the connection, and a
// closed connection does not stop a server-side wait (MariaDB notices only
// when it next writes), so the wait would outlive us and could even be
// granted. Instead, when ctx ends, KILL QUERY from a control session
// interrupts it at once; the statement then returns and the session stays
// usable. If the statement has not returned killGrace later (the server is
// unreachable or stalled), or the KILL fails, the connection is dropped
// after all: the KILL, still on its way in the background, or else the
// slice, ends the orphaned wait. A session whose KILL may still land is
// marked tainted and never reused, so a late KILL cannot hit a later
// statement.
func (l *Locker) interruptible(ctx context.Context, s *session, run func(context.Context) error) error {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.WaitSlice+l.cfg.CleanupTimeout)
	defer cancel()
	killed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		grace := time.AfterFunc(killGrace, cancel)
		kill := func() {
			defer close(killed)
			defer grace.Stop()
			if err := l.killQuery(s.id); err != nil {
				l.log.Debug("KILL QUERY failed; dropping the connection", "conn", s.id, "err", err)
				cancel()
			}
		}
		if !l.bg.Go(kill) {
			kill() // closed: the control pool is gone, this fails at once
		}
	})
	err := run(qctx)
	if !stop() {
		select {
		case <-killed:
		default:
			s.tainted = true
		}
	}
	if qctx.Err() != nil {
		s.tainted = true // the driver dropped the connection
	}
	return err
}

func (l *Locker) killQuery(id uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.CleanupTimeout)
	defer cancel()
	_, err := l.control.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", id))
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errNoSuchThread {
		return nil // the session is gone: nothing waits any more
	}
	return err
}

// MySQL error numbers this package tells apart.
const (
	errNoSuchThread     = 1094 // KILL of a connection that is gone
	errLockWaitTimeout  = 1205 // innodb_lock_wait_timeout elapsed
	errServerShutdown   = 1053
	errConnectionKilled = 1927 // MariaDB: KILL CONNECTION of this session
	errIdleTimeout      = 4031 // MySQL 8.0.24+: wait_timeout closed the session
)

// connLost reports whether err means the session itself is gone or
// unusable (as opposed to a statement error on a live session).
func connLost(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == errConnectionKilled || me.Number == errServerShutdown || me.Number == errIdleTimeout
	}
	return true // transport errors: EOF, reset, ErrInvalidConn, ErrBadConn
}

// acquireErr wraps err for an Acquire: ctx's end wins, otherwise the
// server is unavailable.
func (l *Locker) acquireErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w: %w", what, lock.ErrNotObtained, ctx.Err())
	}
	return fmt.Errorf("%s: %w: %w", what, lock.ErrUnavailable, err)
}

// cleanupCtx is for releases and rollbacks nobody waits for.
func (l *Locker) cleanupCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), l.cfg.CleanupTimeout)
}
