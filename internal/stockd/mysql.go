package stockd

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/go-sql-driver/mysql"

	"seckill/internal/lock"
	"seckill/internal/lock/mysqllock"
)

// mysqlStartTimeout bounds the first connection at start-up: a MySQL that
// is not up yet must not keep stockd from serving (it answers 503 until the
// server is there), and a stalled one must not hang the start.
const mysqlStartTimeout = 5 * time.Second

// mysqlConfig is the mysqllock configuration from the mysql.* keys.
func mysqlConfig(w *wiring) mysqllock.Config {
	c := w.cfg.MySQL
	return mysqllock.Config{
		DSN:       c.DSN,
		PoolSize:  c.PoolSize,
		TTL:       c.SessionTTL,
		KeepAlive: c.KeepAlive,
		WaitSlice: c.WaitSlice,
		Handoffs:  localHandoffs(w.cfg),
		Logger:    w.log,
	}
}

// mysqlSessionTTL is the lease: the lock session's wait_timeout, which
// MySQL counts in whole seconds (mysqllock rounds up the same way).
func mysqlSessionTTL(c *Config) time.Duration {
	return time.Duration(math.Ceil(c.MySQL.SessionTTL.Seconds())) * time.Second
}

// mysqlBackend builds a mysql or mysql-row locker that connects lazily.
// mysqllock opens its schema at construction, so a server that is down
// would otherwise make stockd exit; instead it tries once, briefly, and
// then on every Acquire and /readyz probe until the server answers, each
// bounded by its caller's context.
func mysqlBackend(open func(context.Context, mysqllock.Config) (*mysqllock.Locker, error)) func(context.Context, *wiring) (lock.Locker, error) {
	return func(ctx context.Context, w *wiring) (lock.Locker, error) {
		cfg := mysqlConfig(w)
		z := mysqllock.NewLazy(lock.Info{Name: w.cfg.Lock.Backend, Safe: true},
			func(ctx context.Context) (*mysqllock.Locker, error) { return open(ctx, cfg) })
		sctx, cancel := context.WithTimeout(ctx, mysqlStartTimeout)
		defer cancel()
		if _, err := z.Open(sctx); err != nil {
			// A bad DSN is caught by Validate; what is left is the server.
			if !errors.Is(err, lock.ErrUnavailable) {
				return nil, err
			}
			w.log.Warn("mysql not reachable yet; sales answer 503 until it is", "err", err)
		}
		return z, nil
	}
}

// validateMySQL checks the mysql.* keys for the mysql backends.
func validateMySQL(c *Config, bad func(key, format string, args ...any)) {
	m := c.MySQL
	switch dsn, err := mysql.ParseDSN(m.DSN); {
	case m.DSN == "":
		bad("mysql.dsn", "must be set for lock.backend %s, e.g. user:password@tcp(host:3306)/seckill", c.Lock.Backend)
	case err != nil:
		// The driver's message does not quote the DSN, which holds a password.
		bad("mysql.dsn", "%v", err)
	case dsn.DBName == "":
		bad("mysql.dsn", "names no database (want …/dbname, e.g. user:password@tcp(host:3306)/seckill)")
	case dsn.ReadTimeout != 0 && dsn.ReadTimeout <= m.WaitSlice:
		bad("mysql.dsn", "readTimeout %s must exceed mysql.wait_slice (%s): a lock wait would time out as a read", dsn.ReadTimeout, m.WaitSlice)
	}
	if m.PoolSize < 1 || m.PoolSize > 1000 {
		bad("mysql.pool_size", "must be between 1 and 1000, got %d", m.PoolSize)
	}
	// MySQL takes wait_timeout and lock wait timeouts in whole seconds: a
	// fraction would be rounded into a session or a wait other than the
	// one configured.
	if m.SessionTTL < time.Second {
		bad("mysql.session_ttl", "must be at least 1s (wait_timeout is whole seconds), got %s", m.SessionTTL)
	} else if m.SessionTTL > 10*time.Minute {
		bad("mysql.session_ttl", "must be between 1s and 10m0s, got %s", m.SessionTTL)
	} else if m.SessionTTL%time.Second != 0 {
		bad("mysql.session_ttl", "must be whole seconds (wait_timeout is), got %s", m.SessionTTL)
	}
	switch ttl := mysqlSessionTTL(c); {
	case m.KeepAlive < 0:
		bad("mysql.keep_alive", "must not be negative, got %s", m.KeepAlive)
	case m.KeepAlive > 0 && m.KeepAlive < 10*time.Millisecond:
		bad("mysql.keep_alive", "must be 0 (session_ttl/3) or at least 10ms, got %s", m.KeepAlive)
	case m.KeepAlive > ttl/2:
		bad("mysql.keep_alive", "must not exceed mysql.session_ttl/2 (%s): the holder would learn of a loss after the server freed the lock, got %s", ttl/2, m.KeepAlive)
	}
	if m.WaitSlice < time.Second || m.WaitSlice > time.Minute {
		bad("mysql.wait_slice", "must be between 1s and 1m0s (whole seconds), got %s", m.WaitSlice)
	} else if m.WaitSlice%time.Second != 0 {
		bad("mysql.wait_slice", "must be whole seconds (GET_LOCK and innodb_lock_wait_timeout take them), got %s", m.WaitSlice)
	}
}
