package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
)

// hold is one server acquisition (a GET_LOCK or a row lock) on its
// session, lent by the cohort to one or more leases in a row. Its
// keep-alive checks the session every KeepAlive: the check resets the
// session's wait_timeout (the lease) and proves the lock is still ours on
// the same server incarnation.
type hold struct {
	l    *Locker
	s    *session
	name string
	base uint64
	sig  *lock.Signal

	check func(ctx context.Context) error // nil: the session still holds the lock
	free  func(ctx context.Context) error // releases on s; wraps lock.ErrNotHeld if it was not ours

	confirmed atomic.Int64 // UnixNano at which the last successful check was sent
	stop      chan struct{}
	stopped   chan struct{}
}

var _ cohort.Hold = (*hold)(nil)

func (l *Locker) newHold(s *session, name string, base uint64, check, free func(context.Context) error) *hold {
	h := &hold{l: l, s: s, name: name, base: base, sig: lock.NewSignal(), check: check, free: free,
		stop: make(chan struct{}), stopped: make(chan struct{})}
	h.confirmed.Store(time.Now().UnixNano())
	// Ended by Release, which the cohort calls once per hold. A Locker
	// already closing runs none: its hold is given back at once.
	if !l.bg.Go(h.keepAlive) {
		close(h.stopped)
	}
	return h
}

func (h *hold) Base() uint64          { return h.base }
func (h *hold) Done() <-chan struct{} { return h.sig.Done() }
func (h *hold) Err() error            { return h.sig.Err() }

// AfterFunc runs f once Done closes (the cohort's loss watch).
func (h *hold) AfterFunc(f func()) func() bool { return h.sig.AfterFunc(f) }

// Passable: not lost, and the last check confirmed the lock recently
// enough that the next check is still due, not overdue.
func (h *hold) Passable() bool {
	if h.sig.Err() != nil {
		return false
	}
	return time.Since(time.Unix(0, h.confirmed.Load())) < 2*h.l.cfg.KeepAlive
}

// keepAlive closes Done when a check fails or does not answer within
// KeepAlive. A timed-out check makes the driver close the connection, so a
// lock that "may be lost" is then lost for sure: the server frees it when
// it sees the close, or after wait_timeout if the network is gone.
func (h *hold) keepAlive() {
	defer close(h.stopped)
	t := time.NewTicker(h.l.cfg.KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), h.l.cfg.KeepAlive)
		err := h.check(ctx)
		cancel()
		if err != nil {
			h.sig.Close(fmt.Errorf("%w: %s session %d check: %w", lock.ErrLost, h.l.backend, h.s.id, err))
			return
		}
		h.confirmed.Store(sent.UnixNano())
	}
}

// Release gives the lock back on its session and the session to the
// pool, within CleanupTimeout at most. After a loss, or when the release
// cannot be confirmed, the session is closed instead: ending the session
// is what frees a MySQL lock for sure.
func (h *hold) Release(ctx context.Context) error {
	// Bounded whatever the caller's ctx: a release that cannot be
	// confirmed in time drops the session, which frees the lock as surely.
	ctx, cancel := context.WithTimeout(ctx, h.l.cfg.CleanupTimeout)
	defer cancel()
	close(h.stop)
	<-h.stopped
	if lost := h.sig.Err(); lost != nil {
		h.l.pool.discard(h.s)
		return fmt.Errorf("%w: %w", lock.ErrNotHeld, lost)
	}
	err := h.free(ctx)
	switch {
	case err == nil:
		h.sig.Close(lock.ErrReleased)
		h.l.pool.put(h.s)
		return nil
	case errors.Is(err, lock.ErrNotHeld):
		h.sig.Close(fmt.Errorf("%w: %w", lock.ErrLost, err))
		h.l.pool.put(h.s)
		return err
	}
	h.sig.Close(fmt.Errorf("%w: release: %w", lock.ErrLost, err))
	h.l.pool.discard(h.s)
	// The session is closed now; whether the server still counts it
	// decides between "gone already" and "freed within TTL".
	if alive, cerr := h.l.sessionAlive(ctx, h.s.id); cerr == nil && !alive {
		return fmt.Errorf("%w: session %d is gone: %w", lock.ErrNotHeld, h.s.id, err)
	}
	return fmt.Errorf("%w: release not confirmed (the server frees it within TTL %v): %w", lock.ErrUnavailable, h.l.cfg.TTL, err)
}

// sessionAlive asks the server whether connection id is still there.
// Connection ids restart with the server, so after a restart "alive" may
// be a stranger: callers only use it to report, never to kill.
func (l *Locker) sessionAlive(ctx context.Context, id uint64) (bool, error) {
	var n int
	err := l.control.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n)
	return n > 0, err
}

// queryInt runs a one-value query on s; a NULL answer is !Valid.
func queryInt(ctx context.Context, s *session, q string, args ...any) (sql.NullInt64, error) {
	var v sql.NullInt64
	err := s.conn.QueryRowContext(ctx, q, args...).Scan(&v)
	return v, err
}
