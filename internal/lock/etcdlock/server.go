package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"seckill/internal/etcdsess"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
)

// Acquire blocks until the lock name is held or ctx is done. Goroutines of
// this Locker queue locally in FIFO order; the front one acquires in etcd
// (see the package documentation). Errors wrap lock.ErrNotObtained (with
// ctx's error, and lock.ErrUnavailable when etcd stopped answering),
// lock.ErrUnavailable, or lock.ErrClosed. A lost session lease or a brief
// etcd outage does not fail the request: it waits, within ctx, for a new
// session and queues again (see server.Acquire).
//
// Done of the returned lease closes when the session lease expires or is
// revoked (a crash, pause or partition longer than the TTL; the keep-alive
// notices within about TTL/3 of a revoke). A lock key deleted by hand is
// noticed at once when the name is contended (its prefix watch tracked the
// acquisition from its enqueue), otherwise at Release. Release deletes the
// key only if it is still the one the acquisition created, so a lease whose
// session expired can never delete a newer holder's key.
func (l *Locker) Acquire(ctx context.Context, name string) (lock.Lease, error) {
	ls, err := l.co.Acquire(ctx, name)
	if err != nil && ctx.Err() != nil && !errors.Is(err, lock.ErrUnavailable) && !errors.Is(err, lock.ErrClosed) && !l.connected() {
		// Queued behind a front that was waiting for etcd: the deadline
		// passed because etcd was away, not because the lock was busy.
		err = fmt.Errorf("%w: %w (etcd unreachable)", err, lock.ErrUnavailable)
	}
	return ls, err
}

// server is the Locker's etcd side, as the cohort sees it.
type server struct{ l *Locker }

var (
	_ cohort.Server      = server{}
	_ cohort.KeyObserver = server{}
)

// Acquire queues this process's key for name in etcd and waits until it is
// the oldest. When the session's lease goes while it queues (expired during
// a pause or a partition, revoked) or etcd is briefly unreachable
// (restart, leader change), it queues again, on a new session if need be,
// for as long as ctx allows: the request loses its place in etcd's queue,
// not its turn. A lease that is gone is never queued on again (see
// etcdsess.Manager.Gone).
func (s server) Acquire(ctx context.Context, name string) (cohort.Hold, error) {
	l := s.l
	var own *ownership
	for retries := 0; ; retries++ {
		if err := l.backoff(ctx, retries); err != nil {
			return nil, l.acquireErr(ctx, err)
		}
		var err error
		own, err = l.lockEtcd(ctx, name)
		if err == nil {
			break
		}
		if !l.requeue(ctx, err) {
			return nil, l.acquireErr(ctx, err)
		}
		l.log.Debug("queueing again", "key", name, "err", err)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return own, nil // the cohort gives it back
	}
	l.bg.Go(own.watchSession)
	l.mu.Unlock()
	return own, nil
}

// Queued: a local goroutine waits for name, so it is contended here: watch
// its prefix, so that the next etcd acquisition waits without re-reads.
func (s server) Queued(name string) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	s.l.feedLocked(name, true)
}

// Idle: nobody here uses name any more; stop its prefix watch.
func (s server) Idle(name string) {
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.feeds[name]; f != nil {
		delete(l.feeds, name)
		f.stop()
	}
}

// Base is the create revision of the lock key.
func (o *ownership) Base() uint64 { return uint64(o.rev) }

// Done closes when the session ends or the key is seen deleted.
func (o *ownership) Done() <-chan struct{} { return o.lost.Done() }

// AfterFunc runs f once Done closes (the cohort's loss watch).
func (o *ownership) AfterFunc(f func()) func() bool { return o.lost.AfterFunc(f) }

// Err says which of the two happened.
func (o *ownership) Err() error {
	return o.lost.Err()
}

// Passable: the key and session live, and the session's lease is known
// alive for more than the pass margin (see passable).
func (o *ownership) Passable() bool {
	l := o.l
	if l.isClosed() || !passable(time.Now(), o.validUntil(), l.passMargin) {
		return false
	}
	select {
	case <-o.sess.Done():
		return false
	case <-o.lost.Done():
		return false
	default:
		return true
	}
}

// Release deletes the key if it is still ours (see releaseEtcd). During
// Close it is bounded by Close's deadline, and skipped once the session
// is gone (the key went, or goes, with the lease; a delete could only
// hang).
func (o *ownership) Release(ctx context.Context) error {
	defer o.stopWatch()
	l := o.l
	l.mu.Lock()
	closed, by := l.closed, l.closeBy
	l.mu.Unlock()
	if closed {
		select {
		case <-o.sess.Done():
			o.untrack()
			return fmt.Errorf("%w: session gone", lock.ErrNotHeld)
		default:
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, by)
		defer cancel()
	}
	return l.releaseEtcd(ctx, o)
}

// watchSession ends the hold when its session does, until released.
func (o *ownership) watchSession() {
	select {
	case <-o.sess.Done():
		o.markLost(fmt.Errorf("%w: etcd session lease %x expired", lock.ErrLost, int64(o.sess.Lease())))
	case <-o.lost.Done():
	case <-o.stop:
	}
}

// retryBackoff bounds how fast a front queues again when etcd answers at
// once with the same transient failure: a fallback, the waits themselves
// are on the session grant and on the watches.
const retryBackoff = 200 * time.Millisecond

// backoff waits before the retries after the first (which follows a loss
// and goes at once), at most retryBackoff, or until ctx ends or the Locker
// closes.
func (l *Locker) backoff(ctx context.Context, retries int) error {
	if retries < 2 {
		return nil
	}
	t := time.NewTimer(min(time.Duration(retries-1)*20*time.Millisecond, retryBackoff))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-l.life.Done():
		return etcdsess.ErrClosed
	}
}

// requeue reports whether an etcd acquisition that failed with err is
// worth making again while ctx lives: our session's lease went (the next
// attempt gets a new session from the Manager), or etcd was unreachable or
// without a leader for a moment. Anything else (closed, refused, our key
// deleted by hand while the session lives) is reported to the caller.
func (l *Locker) requeue(ctx context.Context, err error) bool {
	if ctx.Err() != nil || l.isClosed() || errors.Is(err, etcdsess.ErrClosed) {
		return false
	}
	switch {
	case errors.Is(err, errLeaseGone), errors.Is(err, rpctypes.ErrLeaseNotFound),
		errors.Is(err, rpctypes.ErrNoLeader), errors.Is(err, rpctypes.ErrLeaderChanged),
		errors.Is(err, rpctypes.ErrTimeout), errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail),
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost):
		return true
	}
	return status.Code(err) == codes.Unavailable
}
