package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"seckill/internal/lock/cohort"
)

// The tables, created idempotently by New and NewRow. Names are VARBINARY:
// compared byte for byte like GET_LOCK names, whatever the server's
// collation.
const (
	tokenTable = "seckill_lock_tokens"
	rowTable   = "seckill_locks"
)

var schema = []string{
	// One counter per lock name, for both backends. InnoDB and committed
	// before the lease is handed out, so a token survives a restart.
	`CREATE TABLE IF NOT EXISTS ` + tokenTable + ` (
		name  VARBINARY(64)   NOT NULL PRIMARY KEY,
		token BIGINT UNSIGNED NOT NULL
	) ENGINE=InnoDB`,
	// One row per lock name for mysql-row: the row whose X lock is the lock.
	`CREATE TABLE IF NOT EXISTS ` + rowTable + ` (
		name VARBINARY(64) NOT NULL PRIMARY KEY
	) ENGINE=InnoDB`,
}

func createSchema(ctx context.Context, db *sql.DB) error {
	for _, stmt := range schema {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	return nil
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// mintSQL increments name's counter and returns the new value through
// LAST_INSERT_ID(expr), which the OK packet carries: one round trip, no
// SELECT. The first mint inserts 1.
const mintSQL = `INSERT INTO ` + tokenTable + ` (name, token) VALUES (?, LAST_INSERT_ID(1))
	ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)`

// mint returns the next token base for name. It must run in autocommit
// mode while name's lock is held: the row lock on the counter orders mints,
// the lock orders holders, and the commit makes the value durable before
// anyone can act on it. A mint whose reply is lost only skips a value.
func mint(ctx context.Context, db execer, name string) (uint64, error) {
	res, err := db.ExecContext(ctx, mintSQL, name)
	if err != nil {
		return 0, fmt.Errorf("mint token: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("mint token: %w", err)
	}
	if id <= 0 || uint64(id) > cohort.MaxBase {
		return 0, fmt.Errorf("mint token: counter %d out of range (1..2^48-1)", id)
	}
	return uint64(id), nil
}

// advance moves name's counter to at least floor; counters never go back.
func advance(ctx context.Context, db execer, name string, floor uint64) error {
	if floor > cohort.MaxBase {
		return errors.New("advance: floor above 2^48-1")
	}
	_, err := db.ExecContext(ctx, `INSERT INTO `+tokenTable+` (name, token) VALUES (?, ?)
		ON DUPLICATE KEY UPDATE token = GREATEST(token, ?)`, name, floor, floor)
	return err
}

// ensureRow makes sure name's row exists in seckill_locks, once per
// Locker and name. A plain (non-locking, MVCC) read comes first: INSERT
// IGNORE on an existing row takes a shared lock on it, so it would queue
// behind the holder's FOR UPDATE.
func (l *Locker) ensureRow(ctx context.Context, name string) error {
	if _, ok := l.rows.Load(name); ok {
		return nil
	}
	var one int
	err := l.control.QueryRowContext(ctx, "SELECT 1 FROM "+rowTable+" WHERE name = ?", name).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		_, err = l.control.ExecContext(ctx, "INSERT IGNORE INTO "+rowTable+" (name) VALUES (?)", name)
	}
	if err != nil {
		return fmt.Errorf("lock row: %w", err)
	}
	l.rows.Store(name, struct{}{})
	return nil
}
