package etcdlock

import (
	"context"
	"fmt"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"

	"seckill/internal/lock"
)

var _ lock.Lease = (*Lease)(nil)

// Lease is one acquisition of an etcd lock. Done closes when the session
// lease expires or is revoked (a crash, pause or partition longer than the
// TTL; the keep-alive notices within about TTL/3 of a revoke). A lock key
// deleted by hand is noticed at once when the name is contended in this
// Locker (the slot's prefix watch tracked the acquisition from its enqueue),
// otherwise at Release.
type Lease struct {
	l     *Locker
	name  string
	s     *slot
	own   *ownership
	token uint64
	sig   *lock.Signal
	ended atomic.Bool // Release or Close has claimed the lease
}

func newLease(l *Locker, name string, s *slot, own *ownership) *Lease {
	le := &Lease{l: l, name: name, s: s, own: own, token: own.token(), sig: lock.NewSignal()}
	go le.watch()
	return le
}

// watch turns the session's and the prefix watch's signals into Done. It
// exits when the lease ends, however it ends.
func (le *Lease) watch() {
	select {
	case <-le.own.sess.Done():
		if le.ended.Load() {
			return // Release or Close decides how this lease ended
		}
		le.sig.Close(fmt.Errorf("etcdlock: %q: %w: etcd session lease %x expired", le.name, lock.ErrLost, int64(le.own.sess.Lease())))
	case <-le.own.lost:
		if le.ended.Load() {
			return // most likely our own Release deleting the key
		}
		le.sig.Close(fmt.Errorf("etcdlock: %q: %w: lock key %s deleted", le.name, lock.ErrLost, le.own.key))
	case <-le.sig.Done():
	}
}

// Key returns the lock name given to Acquire.
func (le *Lease) Key() string { return le.name }

// Token returns the fencing token: the etcd create revision of the lock key
// shifted left 16 bits, plus the number of in-memory hand-overs since that
// key won (see the package documentation for why it only grows).
func (le *Lease) Token() uint64 { return le.token }

// Done is closed when the lock is lost or released.
func (le *Lease) Done() <-chan struct{} { return le.sig.Done() }

// Err is nil while held, lock.ErrReleased after Release, otherwise an error
// wrapping lock.ErrLost.
func (le *Lease) Err() error { return le.sig.Err() }

// EtcdKey returns the etcd key that holds the lock for this lease.
func (le *Lease) EtcdKey() string { return le.own.key }

// LeaseID returns the etcd lease the lock key is attached to: the session's.
// Revoking it frees the lock (and every other lock of that session).
func (le *Lease) LeaseID() clientv3.LeaseID { return le.own.sess.Lease() }

// Release gives the lock up: to the next goroutine of this Locker waiting
// for it, in memory, while the batch allows (Options.LocalHandoffs),
// otherwise by deleting the key — only if it is still the key this lease created, so a
// lease whose session expired can never delete a newer holder's key. Errors
// wrap lock.ErrNotHeld (second call, or the lock was already lost) or
// lock.ErrUnavailable (etcd did not answer; the key then goes with the
// session or a background retry).
func (le *Lease) Release(ctx context.Context) error {
	if !le.ended.CompareAndSwap(false, true) {
		return fmt.Errorf("etcdlock: release %q: %w", le.name, lock.ErrNotHeld)
	}
	le.forget()
	select {
	case <-le.sig.Done():
		// Lost already: free the local queue; releaseEtcd's guarded delete
		// finds nothing of ours (or removes our own expired key) and can
		// never touch a newer holder's key.
		_ = le.l.pass(ctx, le.name, le.s, le.own)
		return fmt.Errorf("etcdlock: release %q: %w: %w", le.name, lock.ErrNotHeld, le.sig.Err())
	default:
	}
	err := le.l.pass(ctx, le.name, le.s, le.own)
	if err != nil {
		le.sig.Close(fmt.Errorf("etcdlock: %q: %w: %w", le.name, lock.ErrLost, err))
		return err
	}
	le.sig.Close(lock.ErrReleased)
	return nil
}

// drop ends the lease without releasing it (Close does the release). It
// reports whether this call ended it.
func (le *Lease) drop(reason error) bool {
	if !le.ended.CompareAndSwap(false, true) {
		return false
	}
	le.sig.Close(reason)
	return true
}

func (le *Lease) forget() {
	le.l.mu.Lock()
	delete(le.l.leases, le)
	le.l.mu.Unlock()
}
