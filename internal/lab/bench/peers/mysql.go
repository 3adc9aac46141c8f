package peers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// GetLock is MySQL's named lock as a user writes it with database/sql: one
// pinned connection per contender (a *sql.Conn, since a named lock
// belongs to its session), SELECT GET_LOCK(key, 10) until it returns 1,
// the work, SELECT RELEASE_LOCK(key). No local queue, no passing, no
// token, no keep-alive: every acquisition is a server round trip and
// every release wakes the next waiting session.
type GetLock struct {
	conn   *sql.Conn
	key    string
	gaveUp *GaveUp
}

// getLockTimeout is the user's GET_LOCK timeout in seconds; a 0 answer
// (timed out) is retried and counted in GaveUp.
const getLockTimeout = 10

// NewGetLock pins a connection of db for one contender on key.
func NewGetLock(ctx context.Context, db *sql.DB, key string, gaveUp *GaveUp) (*GetLock, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("get_lock: %w", err)
	}
	return &GetLock{conn: conn, key: key, gaveUp: gaveUp}, nil
}

// Lock blocks in GET_LOCK until the lock is held or ctx is done (the
// driver then drops the connection, which ends the wait at the server
// only when it next writes — a user's loop does no better).
func (g *GetLock) Lock(ctx context.Context) (Unlock, error) {
	for {
		var got sql.NullInt64
		if err := g.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", g.key, getLockTimeout).Scan(&got); err != nil {
			return nil, fmt.Errorf("get_lock: %w", err)
		}
		if got.Valid && got.Int64 == 1 {
			return g.unlock, nil
		}
		if !got.Valid {
			return nil, errors.New("get_lock: GET_LOCK returned NULL")
		}
		g.gaveUp.Add(1)
	}
}

func (g *GetLock) unlock(ctx context.Context) error {
	var r sql.NullInt64
	if err := g.conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", g.key).Scan(&r); err != nil {
		return fmt.Errorf("get_lock: release: %w", err)
	}
	if !r.Valid || r.Int64 != 1 {
		return fmt.Errorf("get_lock: RELEASE_LOCK = %v, want 1", r)
	}
	return nil
}

// Close returns the contender's connection.
func (g *GetLock) Close() error { return g.conn.Close() }

// ForUpdate is the textbook pessimistic database lock as a user writes it:
// BEGIN, SELECT … FROM lock_table WHERE name = ? FOR UPDATE, the work,
// COMMIT, on database/sql's pool (BeginTx pins a connection for the
// transaction). innodb_lock_wait_timeout is the server's default (50s);
// a timed-out wait is retried and counted in GaveUp.
type ForUpdate struct {
	db     *sql.DB
	table  string
	key    string
	gaveUp *GaveUp
}

// NewForUpdate locks key's row of table (a table with a name primary key;
// the row must exist).
func NewForUpdate(db *sql.DB, table, key string, gaveUp *GaveUp) *ForUpdate {
	return &ForUpdate{db: db, table: table, key: key, gaveUp: gaveUp}
}

// Lock blocks until the row lock is held or ctx is done.
func (f *ForUpdate) Lock(ctx context.Context) (Unlock, error) {
	for {
		// Not BeginTx(ctx): database/sql rolls a transaction back when its
		// ctx ends, which here would unlock the row in the middle of the
		// critical section as soon as the wait's ctx is cancelled (the
		// benchmark cancels it when the stock runs out, and a second holder
		// walked in: a real pitfall of the textbook lock in Go). ctx bounds
		// the wait only, through the locking read.
		tx, err := f.db.BeginTx(context.WithoutCancel(ctx), nil)
		if err != nil {
			return nil, fmt.Errorf("for update: begin: %w", err)
		}
		var name []byte
		err = tx.QueryRowContext(ctx, "SELECT name FROM "+f.table+" WHERE name = ? FOR UPDATE", f.key).Scan(&name)
		if err == nil {
			return func(context.Context) error {
				if err := tx.Commit(); err != nil {
					return fmt.Errorf("for update: commit: %w", err)
				}
				return nil
			}, nil
		}
		_ = tx.Rollback()
		if ctx.Err() != nil || !isLockWaitTimeout(err) {
			return nil, fmt.Errorf("for update: %w", err)
		}
		f.gaveUp.Add(1)
	}
}

// isLockWaitTimeout: innodb_lock_wait_timeout elapsed (error 1205).
func isLockWaitTimeout(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1205
}
