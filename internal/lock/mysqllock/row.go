package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"seckill/internal/lock/cohort"
)

// rowServer is the cohort's server side for "mysql-row": the textbook
// database lock, a transaction holding the X lock of the key's row in
// seckill_locks from SELECT … FOR UPDATE until ROLLBACK.
type rowServer struct{ l *Locker }

const forUpdateSQL = "SELECT name FROM " + rowTable + " WHERE name = ? FOR UPDATE"

// Acquire waits for the row lock in innodb_lock_wait_timeout slices, then
// mints the token on a control session: the lock session's transaction
// ends in a rollback, which would undo a mint made inside it.
func (rs rowServer) Acquire(ctx context.Context, key string) (cohort.Hold, error) {
	l := rs.l
	name := LockName(key)
	if err := l.ensureRow(ctx, name); err != nil {
		return nil, l.acquireErr(ctx, "FOR UPDATE", err)
	}
	s, err := l.pool.take(ctx)
	if err != nil {
		return nil, l.acquireErr(ctx, "lock session", err)
	}
	for first := true; ; first = false {
		var got []byte
		err := l.interruptible(ctx, s, func(qctx context.Context) error {
			return s.conn.QueryRowContext(qctx, forUpdateSQL, name).Scan(&got)
		})
		if err != nil && first && s.reused && connLost(err) && ctx.Err() == nil {
			if s, err = l.pool.fresh(ctx, s); err != nil {
				return nil, l.acquireErr(ctx, "lock session", err)
			}
			continue
		}
		var me *mysql.MySQLError
		switch {
		case err == nil:
			if ctx.Err() != nil { // granted as we gave up
				l.rollback(s)
				return nil, l.acquireErr(ctx, "FOR UPDATE", ctx.Err())
			}
			return l.grantRow(ctx, s, name)
		case errors.As(err, &me) && me.Number == errLockWaitTimeout && ctx.Err() == nil:
			// One slice elapsed. Only the statement was rolled back
			// (innodb_rollback_on_timeout is off by default); wait again.
			continue
		case errors.Is(err, sql.ErrNoRows) && ctx.Err() == nil:
			// The row was deleted under us (an operator): make it again.
			l.rows.Delete(name)
			if err = l.ensureRow(ctx, name); err == nil {
				continue
			}
		}
		if connLost(err) {
			l.pool.discard(s)
		} else {
			l.rollback(s)
		}
		return nil, l.acquireErr(ctx, "FOR UPDATE", err)
	}
}

// grantRow mints the token and starts the hold.
func (l *Locker) grantRow(ctx context.Context, s *session, name string) (cohort.Hold, error) {
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.CleanupTimeout)
	base, err := mint(mctx, l.control, name)
	cancel()
	if err != nil || ctx.Err() != nil {
		l.rollback(s)
		if err == nil {
			err = ctx.Err()
		}
		return nil, l.acquireErr(ctx, "FOR UPDATE", err)
	}
	check := func(ctx context.Context) error {
		var id uint64
		if err := s.conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			return err
		}
		if id != s.id {
			return fmt.Errorf("the session answers as connection %d: a new server or backend", id)
		}
		return nil
	}
	free := func(ctx context.Context) error {
		_, err := s.conn.ExecContext(ctx, "ROLLBACK")
		return err
	}
	return l.newHold(s, name, base, check, free), nil
}

// rollback ends s's transaction (and any row lock in it) and gives s back,
// or closes it when that is not confirmed.
func (l *Locker) rollback(s *session) {
	ctx, cancel := l.cleanupCtx()
	defer cancel()
	if _, err := s.conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		l.pool.discard(s)
		return
	}
	l.pool.put(s)
}
