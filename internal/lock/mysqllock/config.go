package mysqllock

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Defaults for the zero values of Config.
const (
	DefaultTTL       = 10 * time.Second
	DefaultWaitSlice = 5 * time.Second
	DefaultPoolSize  = 16
	// DefaultCleanupTimeout is Config.CleanupTimeout when it is zero.
	DefaultCleanupTimeout = 3 * time.Second
	// DefaultHandoffs is Config.Handoffs when it is zero: 32, not the
	// cohort's 8, because a hold that goes back to the server costs more
	// here than with the other backends. The next process's GET_LOCK (or
	// row-lock wait) is woken by the release, and only then mints its
	// token, an InnoDB commit that fsyncs the redo log: about 0.35 ms on
	// this project's test machine, two to four times a sale's critical
	// section (two Redis round trips). With 8 passes that hand-off cost
	// about a fifth of the throughput at 50 contenders; with 32 it is
	// spread over 33 leases. The bound still bounds unfairness: another
	// process waits at most 33 critical sections of this one, and each
	// process's turn comes in the server's arrival order.
	DefaultHandoffs = 32
)

// Config configures a Locker. Only DSN is required.
type Config struct {
	// DSN is a go-sql-driver/mysql data source name with a database, e.g.
	// "user:pass@tcp(127.0.0.1:3306)/seckill". The Locker always
	// interpolates parameters client-side (one round trip per statement
	// instead of prepare/execute/close), forces autocommit on the sessions
	// that mint tokens, and sets wait_timeout (and, for the row lock,
	// autocommit=0 and innodb_lock_wait_timeout) on its lock sessions; a
	// readTimeout in the DSN must exceed WaitSlice.
	DSN string

	// PoolSize bounds the lock sessions (server connections) open at once;
	// an acquisition that needs one more waits for its ctx. With the cohort
	// a key needs at most two (the holder's and the next front's). The
	// default is 16.
	PoolSize int

	// TTL is how long the server keeps a lock whose holder went silent (a
	// paused or partitioned process): it is the lock session's wait_timeout,
	// so it is rounded up to whole seconds. A crashed process loses its
	// locks at once (its connection closes). The default is 10s.
	TTL time.Duration

	// KeepAlive is how often a held lock's session is checked (the check
	// also resets wait_timeout); Done closes when a check fails, does not
	// answer within KeepAlive, or finds another session or server. At most
	// TTL/2; the default is TTL/3.
	KeepAlive time.Duration

	// WaitSlice bounds one server-side wait (the GET_LOCK timeout,
	// innodb_lock_wait_timeout), in whole seconds, rounded up; a longer
	// Acquire issues several. The exact deadline or cancellation is a KILL
	// QUERY; the slice bounds how long a wait can outlive its caller when
	// that KILL cannot reach the server. The default is 5s.
	WaitSlice time.Duration

	// Handoffs bounds in-memory passes per server hold (cohort.Config.Handoffs):
	// 0 means DefaultHandoffs (32), a negative value disables passing
	// (every acquisition goes to the server), values above 65535 are
	// capped.
	Handoffs int

	// CleanupTimeout bounds every release (also under a caller's ctx
	// without deadline: an unconfirmed release drops the session), the
	// token mint, and the KILL QUERY of a cancelled wait. The default is
	// 3s.
	CleanupTimeout time.Duration

	// Logger receives lost-lock warnings and debug detail. The default is
	// slog.Default().
	Logger *slog.Logger
}

// resolved is a validated Config with its defaults applied.
type resolved struct {
	Config
	dsn       *mysql.Config
	ttlSecs   int
	sliceSecs int
}

// resolve validates cfg and fills in defaults. Every error names the field.
func resolve(cfg Config) (resolved, error) {
	r := resolved{Config: cfg}
	if cfg.DSN == "" {
		return r, errors.New("mysqllock: Config.DSN: empty")
	}
	dsn, err := mysql.ParseDSN(cfg.DSN)
	if err != nil {
		return r, fmt.Errorf("mysqllock: Config.DSN: %w", err)
	}
	if dsn.DBName == "" {
		return r, errors.New("mysqllock: Config.DSN: no database name (…/dbname)")
	}
	r.dsn = dsn
	switch {
	case cfg.PoolSize < 0:
		return r, fmt.Errorf("mysqllock: Config.PoolSize: %d is negative", cfg.PoolSize)
	case cfg.PoolSize == 0:
		r.PoolSize = DefaultPoolSize
	}
	switch {
	case cfg.TTL < 0:
		return r, fmt.Errorf("mysqllock: Config.TTL: %v is negative", cfg.TTL)
	case cfg.TTL == 0:
		r.TTL = DefaultTTL
	}
	r.ttlSecs = ceilSeconds(r.TTL)
	r.TTL = time.Duration(r.ttlSecs) * time.Second
	switch {
	case cfg.KeepAlive < 0:
		return r, fmt.Errorf("mysqllock: Config.KeepAlive: %v is negative", cfg.KeepAlive)
	case cfg.KeepAlive == 0:
		r.KeepAlive = r.TTL / 3
	case cfg.KeepAlive > r.TTL/2:
		return r, fmt.Errorf("mysqllock: Config.KeepAlive: %v is above TTL/2 (%v): a silent holder's Done would close after the server freed its lock", cfg.KeepAlive, r.TTL/2)
	}
	switch {
	case cfg.WaitSlice < 0:
		return r, fmt.Errorf("mysqllock: Config.WaitSlice: %v is negative", cfg.WaitSlice)
	case cfg.WaitSlice == 0:
		r.WaitSlice = DefaultWaitSlice
	}
	r.sliceSecs = ceilSeconds(r.WaitSlice)
	r.WaitSlice = time.Duration(r.sliceSecs) * time.Second
	if dsn.ReadTimeout != 0 && dsn.ReadTimeout <= r.WaitSlice {
		return r, fmt.Errorf("mysqllock: Config.DSN: readTimeout %v must exceed Config.WaitSlice %v (a wait would read-time-out)", dsn.ReadTimeout, r.WaitSlice)
	}
	switch {
	case cfg.CleanupTimeout < 0:
		return r, fmt.Errorf("mysqllock: Config.CleanupTimeout: %v is negative", cfg.CleanupTimeout)
	case cfg.CleanupTimeout == 0:
		r.CleanupTimeout = DefaultCleanupTimeout
	}
	if cfg.Handoffs == 0 {
		r.Handoffs = DefaultHandoffs
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	return r, nil
}

// ceilSeconds rounds d up to whole seconds, at least 1.
func ceilSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// sessionDSN is the connector config for lock sessions. wait_timeout is
// the lease: the server closes a session idle for TTL, which frees its
// named locks and rolls back its transaction.
func (r resolved) sessionDSN(row bool) *mysql.Config {
	c := r.dsn.Clone()
	c.InterpolateParams = true
	c.Logger = driverLog{r.Logger}
	if c.Timeout == 0 {
		c.Timeout = r.CleanupTimeout
	}
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["wait_timeout"] = strconv.Itoa(r.ttlSecs)
	// GET_LOCK sessions mint their tokens: each mint must commit on its own.
	c.Params["autocommit"] = "1"
	if row {
		// Every statement opens a transaction, so the locking read needs
		// no BEGIN round trip; the lock session mints nothing (a rollback
		// would undo the token), the control pool does.
		c.Params["autocommit"] = "0"
		c.Params["innodb_lock_wait_timeout"] = strconv.Itoa(r.sliceSecs)
	}
	return c
}

// controlDSN is the connector config for schema, KILL QUERY, diagnostics
// and the row lock's token mints: ordinary autocommit sessions.
func (r resolved) controlDSN() *mysql.Config {
	c := r.dsn.Clone()
	c.InterpolateParams = true
	c.Logger = driverLog{r.Logger}
	if c.Timeout == 0 {
		c.Timeout = r.CleanupTimeout
	}
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["autocommit"] = "1" // whatever the DSN says: mints must commit
	return c
}

// MaxNameLen is MySQL's limit on a GET_LOCK name, in characters.
const MaxNameLen = 64

// LockName is the server-side name of key: the key itself when it fits
// MaxNameLen bytes, else "sha256:" and the first 57 hex digits of its
// SHA-256 (228 bits). The same name keys the token counter and the row
// lock. The tables compare names byte for byte (VARBINARY); GET_LOCK did
// too on MariaDB 10.11 here, though its manual calls names case
// insensitive. A server that folds case makes keys differing only in case
// share one GET_LOCK: more exclusion, never less, and each key keeps its
// own counter, so tokens still grow per key.
func LockName(key string) string {
	if len(key) <= MaxNameLen {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])[:MaxNameLen-len("sha256:")]
}

// driverLog sends the driver's messages ("unexpected EOF" when a session
// is killed or the server restarts) to slog at debug level: the lease's
// Done and errors report what matters.
type driverLog struct{ log *slog.Logger }

func (d driverLog) Print(v ...any) { d.log.Debug("mysql driver: " + fmt.Sprint(v...)) }
