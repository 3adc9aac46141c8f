package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"seckill/internal/etcdsess"
	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
)

// errSessionExpired: the session lease ended (or someone deleted our key)
// while we waited in the queue, so our key is gone and we must not be told
// we hold the lock.
var errSessionExpired = errors.New("etcd session expired (or lock key deleted) while queued")

// errLeaseGone: the session's lease is over (expired during a pause or a
// partition, or revoked), so its keys are gone; unlike a key deleted by
// hand, this is worth queueing again on a new session.
var errLeaseGone = errors.New("etcd session lease gone")

// ownership is this process's hold on one lock in etcd: its key is the
// oldest under the prefix. It is the cohort.Hold of the etcd backend, so it
// outlives a single lease when the lock is handed over in memory.
type ownership struct {
	l    *Locker
	sess *concurrency.Session
	key  string
	ref  *etcdsess.Key // the sweeper's handle on key
	rev  int64         // create revision of key

	// tr is the name feed's view of this acquisition (nil if it was not
	// tracked): whether our key was deleted.
	tr *tracker
	// lost is closed when the session ends or the feed sees our key
	// deleted while the session lives on (someone deleted it by hand).
	lost     *lock.Signal  // closed with the reason the hold was lost
	stop     chan struct{} // closed by Release: ends watchSession
	stopOnce sync.Once
	// validUntil is how long sess's lease is known to be alive in etcd,
	// timed from when the proving request was sent (etcdsess.ValidUntil):
	// sess.Done closes only some time after that.
	validUntil func() time.Time
}

var _ cohort.Hold = (*ownership)(nil)

// markLost closes lost with err, once.
func (o *ownership) markLost(err error) {
	o.lost.Close(err)
}

func (o *ownership) stopWatch() { o.stopOnce.Do(func() { close(o.stop) }) }

// untrack detaches the ownership from the name's feed.
func (o *ownership) untrack() {
	if o.tr != nil {
		o.tr.untrack()
	}
}

// passable reports whether a hold whose lease is known alive until
// validUntil may be passed on at now: only with more than margin left, so
// that the next holder has time to work before the lease can have expired.
// sess.Done is no substitute: it closes up to TTL/3 + 0.5s after etcd
// expired the lease (see etcdsess.Manager.ValidUntil).
func passable(now, validUntil time.Time, margin time.Duration) bool {
	return validUntil.Sub(now) > margin
}

// lockEtcd queues this process's key for name and waits until it is the
// oldest. With a live feed on the name (contended here), the
// wait costs no request beyond the enqueue Txn: the feed's delete events
// say when every key ahead of ours is gone.
func (l *Locker) lockEtcd(ctx context.Context, name string) (*ownership, error) {
	ctx, stop := l.bound(ctx)
	defer stop()
	sess, err := l.m.Session(ctx)
	if err != nil {
		return nil, err
	}
	cli := l.m.Client()
	pfx := l.KeyPrefix(name)
	// A fresh key per acquisition: a key abandoned by a failed wait or
	// release can then be removed later without any risk of hitting a
	// newer acquisition's key, and every acquisition gets a new revision.
	key := fmt.Sprintf("%s%x-%d-%d", pfx, int64(sess.Lease()), l.id, l.seq.Add(1))
	// Tracked before the put is sent: if the reply is lost, the key may
	// exist, and the sweeper removes it by name.
	own := &ownership{l: l, sess: sess, key: key, ref: l.sw.Sent(key, sess),
		lost: lock.NewSignal(), stop: make(chan struct{}),
		validUntil: func() time.Time { return l.m.ValidUntil(sess) }}
	gone := func() { own.markLost(fmt.Errorf("%w: lock key %s deleted", lock.ErrLost, key)) }
	if f := l.feed(name, false); f != nil {
		// Before the Txn, so that every event after it is seen.
		own.tr = f.track(ctx, sess, key, gone)
	}

	// Enqueue in one round trip: put our key and fetch the keys created
	// before it (newest first; usually one per process queued) — none: we
	// own the lock.
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)),
			clientv3.OpPut(key, "", clientv3.WithLease(sess.Lease()))).
		Commit()
	if err != nil {
		// The put may have been applied before ctx cut the reply off.
		own.untrack()
		l.sw.Abandon(own.ref)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			// The lease expired or was revoked before our keep-alive
			// noticed: end the session now, so that holds on it are lost
			// and the next attempt gets a new one.
			l.m.Gone(sess)
			return nil, fmt.Errorf("%w: %w", errLeaseGone, err)
		}
		return nil, err
	}
	if !resp.Succeeded {
		own.untrack()
		l.sw.Abandon(own.ref) // by name: the key is ours whoever put it
		return nil, fmt.Errorf("enqueue: key %s already exists", key)
	}
	own.rev = resp.Header.Revision // the put is the Txn's only write
	l.sw.Created(own.ref, own.rev)
	ahead, rev := resp.Responses[0].GetResponseRange().Kvs, own.rev
	if own.tr != nil {
		own.tr.settle(own.rev, ahead, false)
	} else if len(ahead) > 0 {
		// Contended, and no feed yet: start one (for this wait and the
		// name's later acquisitions) and read once more after it exists.
		if f := l.feed(name, true); f != nil {
			own.tr = f.track(ctx, sess, key, gone)
		}
		if own.tr != nil {
			own.tr.unsettle()
			g, err := l.reread(ctx, pfx, own)
			if err != nil {
				own.untrack()
				l.sw.Abandon(own.ref)
				// Our key can go between the put and this read (a
				// revoked lease): the same question as after a wait.
				if errors.Is(err, errSessionExpired) && l.leaseGone(ctx, sess) {
					return nil, fmt.Errorf("%w: %w", errLeaseGone, err)
				}
				return nil, err
			}
			ahead, rev = g.ahead, g.rev
			own.tr.settle(g.rev, g.ahead, g.behind)
		}
	}
	if err := l.waitHead(ctx, pfx, own, ahead, rev); err != nil {
		own.untrack()
		l.sw.Abandon(own.ref) // guarded: harmless if the key went
		if errors.Is(err, errSessionExpired) && l.leaseGone(ctx, sess) {
			return nil, fmt.Errorf("%w: %w", errLeaseGone, err)
		}
		return nil, err
	}
	// The wait can end in the same instant the session does: never report
	// a lock whose lease is already gone.
	select {
	case <-sess.Done():
		own.untrack()
		l.sw.Abandon(own.ref)
		return nil, fmt.Errorf("%w: %w", errLeaseGone, errSessionExpired)
	default:
	}
	return own, nil
}

// leaseGone tells why our queued key went: the session's lease is over
// (true; etcd's word, or s.Done closed), or it lives and someone deleted
// the key (false). A gone lease is ended at once (Manager.Gone), before
// the keep-alive would notice, so nothing more is queued on it. When etcd
// does not answer, the lease counts as alive: the caller then fails as
// for a deleted key, which is never unsafe.
func (l *Locker) leaseGone(ctx context.Context, s *concurrency.Session) bool {
	select {
	case <-s.Done():
		return true
	default:
	}
	resp, err := l.m.Client().TimeToLive(ctx, s.Lease())
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0) {
		l.m.Gone(s)
		return true
	}
	return false
}

// waitHead waits until own's key is the oldest under the prefix: on the
// feed when tracked, else (or once the feed ends) by watching the
// predecessor and reading again after each delete. ahead is the keys
// created before ours, newest first, as read at revision rev.
func (l *Locker) waitHead(ctx context.Context, pfx string, own *ownership, ahead []*mvccpb.KeyValue, rev int64) error {
	if own.tr != nil {
		err := own.tr.await(ctx, own.sess)
		if !errors.Is(err, errFeedEnded) {
			return err
		}
		own.untrack()
		own.tr = nil
		g, err := l.reread(ctx, pfx, own)
		if err != nil {
			return err
		}
		ahead, rev = g.ahead, g.rev
	}
	for len(ahead) > 0 {
		if err := waitDelete(ctx, l.m.Client(), own.sess, string(ahead[0].Key), rev+1); err != nil {
			return err
		}
		g, err := l.reread(ctx, pfx, own)
		if err != nil {
			return err
		}
		ahead, rev = g.ahead, g.rev
	}
	return nil
}

// view is one re-read of the queue around our key.
type view struct {
	rev    int64
	ahead  []*mvccpb.KeyValue // keys created before ours, newest first
	behind bool               // a key created after ours exists
}

// reread looks at the queue again in one read: the keys still ahead of ours
// (one that gave up is not the holder, so the ones before it may still be
// there), whether others queued behind us, and whether our own key still
// exists (errSessionExpired if not: the session may have expired meanwhile).
func (l *Locker) reread(ctx context.Context, pfx string, own *ownership) (view, error) {
	g, err := l.m.Client().Txn(ctx).Then(
		clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(own.rev-1),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)),
		clientv3.OpGet(own.key, clientv3.WithKeysOnly()),
		clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithMinCreateRev(own.rev+1), clientv3.WithKeysOnly(), clientv3.WithLimit(1))).Commit()
	if err != nil {
		return view{}, err
	}
	if len(g.Responses[1].GetResponseRange().Kvs) == 0 {
		return view{}, errSessionExpired
	}
	return view{
		rev:    g.Header.Revision,
		ahead:  g.Responses[0].GetResponseRange().Kvs,
		behind: len(g.Responses[2].GetResponseRange().Kvs) > 0,
	}, nil
}

// waitDelete returns when key is deleted at or after rev, the session
// expires, or ctx ends. A watch error (compaction, lost leader) returns nil
// too: the caller looks again, which is always safe.
func waitDelete(ctx context.Context, cli *clientv3.Client, sess *concurrency.Session, key string, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := cli.Watch(wctx, key, clientv3.WithRev(rev), clientv3.WithFilterPut())
	for {
		select {
		case <-sess.Done():
			return errSessionExpired
		case <-ctx.Done():
			return ctx.Err()
		case wr, ok := <-wch:
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				return errors.New("watch closed: etcd client closed")
			}
			if wr.Err() != nil || wr.Canceled {
				return nil
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					return nil
				}
			}
		}
	}
}

// releaseEtcd deletes our key if it is still the one we created, and stops
// tracking it in the feed. It wraps lock.ErrNotHeld when the key was already gone
// (session expired, deleted) — never deleting a newer holder's key — and
// lock.ErrUnavailable when etcd did not answer; the sweeper then keeps
// trying (see etcdsess.Sweeper), so the key never outlives the failure for long.
func (l *Locker) releaseEtcd(ctx context.Context, own *ownership) error {
	defer own.untrack()
	resp, err := l.m.Client().Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(own.key), "=", own.rev)).
		Then(clientv3.OpDelete(own.key)).Commit()
	if err != nil {
		// The delete may or may not have been applied: the sweeper retries
		// it, guarded by the revision, until it is confirmed.
		l.sw.Abandon(own.ref)
		return fmt.Errorf("%w: delete %s: %w", lock.ErrUnavailable, own.key, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: key %s gone (session expired or deleted)", lock.ErrNotHeld, own.key)
	}
	return nil
}

// bound derives a ctx that also ends when the Locker closes.
func (l *Locker) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.life, cancel)
	return ctx, func() { stop(); cancel() }
}
