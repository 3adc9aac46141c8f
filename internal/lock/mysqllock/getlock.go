package mysqllock

import (
	"context"
	"database/sql"
	"fmt"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
)

// getLockServer is the cohort's server side for "mysql": a named lock on a
// session of its own.
type getLockServer struct{ l *Locker }

// Acquire waits in GET_LOCK slices until the lock is this session's, then
// mints the token on the same session while holding it.
func (g getLockServer) Acquire(ctx context.Context, key string) (cohort.Hold, error) {
	l := g.l
	name := LockName(key)
	s, err := l.pool.take(ctx)
	if err != nil {
		return nil, l.acquireErr(ctx, "lock session", err)
	}
	for first := true; ; first = false {
		got, err := queryIntWait(ctx, l, s, "SELECT GET_LOCK(?, ?)", name, l.cfg.sliceSecs)
		if err != nil && first && s.reused && connLost(err) && ctx.Err() == nil {
			// Its server side died while it was idle (a restart, a
			// KILL): nothing ran; start over on a new session.
			if s, err = l.pool.fresh(ctx, s); err != nil {
				return nil, l.acquireErr(ctx, "lock session", err)
			}
			continue
		}
		switch {
		case err == nil && got.Valid && got.Int64 == 1:
			if ctx.Err() != nil { // granted as we gave up
				l.releaseNamed(s, name)
				return nil, l.acquireErr(ctx, "GET_LOCK", ctx.Err())
			}
			return l.grantNamed(ctx, s, name)
		case err == nil && got.Valid && got.Int64 == 0 && ctx.Err() == nil:
			continue // one slice elapsed
		case err != nil && connLost(err):
			l.pool.discard(s)
		default: // 0 or NULL (interrupted by our KILL), or a statement error
			l.pool.put(s)
		}
		if err == nil {
			err = fmt.Errorf("GET_LOCK returned %v", got)
		}
		return nil, l.acquireErr(ctx, "GET_LOCK", err)
	}
}

// queryIntWait runs a waiting one-value query through interruptible.
func queryIntWait(ctx context.Context, l *Locker, s *session, q string, args ...any) (v sql.NullInt64, err error) {
	err = l.interruptible(ctx, s, func(qctx context.Context) error {
		v, err = queryInt(qctx, s, q, args...)
		return err
	})
	return v, err
}

// grantNamed mints the token while the lock is held and starts the hold.
// The mint runs detached from ctx (bounded by CleanupTimeout): a
// cancellation mid-statement would make the driver drop the connection.
func (l *Locker) grantNamed(ctx context.Context, s *session, name string) (cohort.Hold, error) {
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.CleanupTimeout)
	base, err := mint(mctx, s.conn, name)
	cancel()
	if err != nil || ctx.Err() != nil {
		if err != nil && connLost(err) {
			l.pool.discard(s) // the session, and the lock with it, is gone
		} else {
			l.releaseNamed(s, name)
		}
		if err == nil {
			err = ctx.Err()
		}
		return nil, l.acquireErr(ctx, "GET_LOCK", err)
	}
	check := func(ctx context.Context) error {
		var holder, id sql.NullInt64
		if err := s.conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?), CONNECTION_ID()", name).Scan(&holder, &id); err != nil {
			return err
		}
		if uint64(id.Int64) != s.id {
			return fmt.Errorf("the session answers as connection %d: a new server or backend", id.Int64)
		}
		if !holder.Valid || uint64(holder.Int64) != s.id {
			return fmt.Errorf("IS_USED_LOCK(%q) = %v, not this session", name, holder)
		}
		return nil
	}
	free := func(ctx context.Context) error {
		r, err := queryInt(ctx, s, "SELECT RELEASE_LOCK(?)", name)
		if err != nil {
			return err
		}
		if !r.Valid || r.Int64 != 1 {
			return fmt.Errorf("%w: RELEASE_LOCK(%q) = %v", lock.ErrNotHeld, name, r)
		}
		return nil
	}
	return l.newHold(s, name, base, check, free), nil
}

// releaseNamed gives back a lock nobody will use (granted after its
// caller gave up, or without a token): RELEASE_LOCK, or closing the
// session when that is not confirmed.
func (l *Locker) releaseNamed(s *session, name string) {
	ctx, cancel := l.cleanupCtx()
	defer cancel()
	if r, err := queryInt(ctx, s, "SELECT RELEASE_LOCK(?)", name); err != nil || !r.Valid || r.Int64 != 1 {
		l.pool.discard(s)
		return
	}
	l.pool.put(s)
}
