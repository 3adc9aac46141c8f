package etcdlock

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
)

// Acquire blocks until the lock name is held or ctx is done. Goroutines of
// this Locker queue locally in FIFO order; the front one acquires in etcd
// (see the package documentation). Errors wrap lock.ErrNotObtained (with
// ctx's error, and lock.ErrUnavailable when etcd stopped answering),
// lock.ErrUnavailable, or lock.ErrClosed.
//
// Done of the returned lease closes when the session lease expires or is
// revoked (a crash, pause or partition longer than the TTL; the keep-alive
// notices within about TTL/3 of a revoke). A lock key deleted by hand is
// noticed at once when the name is contended (its prefix watch tracked the
// acquisition from its enqueue), otherwise at Release. Release deletes the
// key only if it is still the one the acquisition created, so a lease whose
// session expired can never delete a newer holder's key.
func (l *Locker) Acquire(ctx context.Context, name string) (lock.Lease, error) {
	return l.co.Acquire(ctx, name)
}

// server is the Locker's etcd side, as the cohort sees it.
type server struct{ l *Locker }

var (
	_ cohort.Server      = server{}
	_ cohort.KeyObserver = server{}
)

// Acquire queues this process's key for name in etcd and waits until it is
// the oldest.
func (s server) Acquire(ctx context.Context, name string) (cohort.Hold, error) {
	l := s.l
	own, err := l.lockEtcd(ctx, name)
	if err != nil {
		return nil, l.acquireErr(ctx, err)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return own, nil // the cohort gives it back
	}
	l.bg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.bg.Done()
		own.watchSession()
	}()
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
func (o *ownership) Done() <-chan struct{} { return o.lost }

// Err says which of the two happened.
func (o *ownership) Err() error {
	o.lostMu.Lock()
	defer o.lostMu.Unlock()
	return o.lostErr
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
	case <-o.lost:
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
	case <-o.lost:
	case <-o.stop:
	}
}
