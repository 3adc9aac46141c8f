package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"seckill/internal/lock"
)

// errSessionExpired: the session lease ended while we waited in the queue,
// so our key is gone and we must not be told we hold the lock.
var errSessionExpired = errors.New("etcd session expired while queued")

// maxHandovers keeps the hand-over count within the token's low 16 bits.
const maxHandovers = 1<<16 - 1

// ownership is this process's hold on one lock in etcd: its key is the
// oldest under the prefix. It outlives a single Lease when the lock is
// handed over in memory.
type ownership struct {
	sess *concurrency.Session
	key  string
	rev  int64  // create revision of key
	seq  uint64 // in-memory hand-overs so far; guarded by Locker.mu

	// remote is set by the holder watch when another process queues (or
	// when the watch can no longer tell): from then on, release via etcd.
	remote atomic.Bool
	// synced is set once the holder watch runs and has caught up: only
	// then does remote mean "nobody else waits". The watch starts lazily,
	// when a local goroutine queues behind the holder, so a process with
	// one contender per lock pays nothing for it.
	synced    atomic.Bool
	watchOnce sync.Once
	watching  atomic.Bool   // the holder watch was started
	ready     chan struct{} // closed once the watch caught up or ended
	readyOnce sync.Once
	pfx       string
	ctx       context.Context // the holder watch's; ended by stop
	// lost is closed when the holder watch sees our key deleted while the
	// session lives on (someone deleted it by hand).
	lost     chan struct{}
	lostOnce sync.Once
	stop     context.CancelFunc // ends the holder watch
	closed   func() bool        // the Locker is closed
}

func (o *ownership) token() uint64 { return uint64(o.rev)<<16 | o.seq }

func (o *ownership) markLost() { o.lostOnce.Do(func() { close(o.lost) }) }

func (o *ownership) markReady() { o.readyOnce.Do(func() { close(o.ready) }) }

// awaitWatch waits until the holder watch, if started, can tell whether
// other processes wait: one read is cheaper than releasing in etcd and
// queueing again (two writes) when a local goroutine is next.
func (o *ownership) awaitWatch(ctx context.Context) {
	if !o.watching.Load() {
		return
	}
	select {
	case <-o.ready:
	case <-ctx.Done():
	case <-o.sess.Done():
	}
}

// reusable reports whether the next local waiter may take the lock over
// without a round trip: nobody else is queued, the key and session live.
func (o *ownership) reusable() bool {
	if !o.synced.Load() || o.remote.Load() || o.seq >= maxHandovers || o.closed() {
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

// lockEtcd queues this process's key for name and waits until it is the
// oldest, then starts the holder watch.
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

	// Enqueue in one round trip: put our key and fetch the newest key
	// created before it — our predecessor, or none: we own the lock.
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpGet(pfx, clientv3.WithLastCreate()...),
			clientv3.OpPut(key, "", clientv3.WithLease(sess.Lease()))).
		Commit()
	if err != nil {
		// The put may have been applied before ctx cut the reply off.
		l.cleanup(key, 0)
		return nil, err
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("enqueue: key %s already exists", key)
	}
	myRev := resp.Header.Revision // the put is the Txn's only write
	preds := resp.Responses[0].GetResponseRange().Kvs
	rev := resp.Header.Revision
	behind := false // others queued after us, as of the last read

	for len(preds) > 0 {
		if err := waitDelete(ctx, cli, sess, string(preds[0].Key), rev+1); err != nil {
			l.cleanup(key, myRev)
			return nil, err
		}
		// Look again in one read: a predecessor that gave up is not the
		// holder, so the one before it may still be there; and our own key
		// must still exist (the session may have expired meanwhile).
		// The third get counts those queued behind us, so that a lock
		// won after a wait is not handed over in memory while they wait.
		g, err := cli.Txn(ctx).Then(
			clientv3.OpGet(pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(myRev-1))...),
			clientv3.OpGet(key, clientv3.WithKeysOnly()),
			clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithMinCreateRev(myRev+1), clientv3.WithKeysOnly(), clientv3.WithLimit(1))).Commit()
		if err != nil {
			l.cleanup(key, myRev)
			return nil, err
		}
		if len(g.Responses[1].GetResponseRange().Kvs) == 0 {
			return nil, errSessionExpired
		}
		preds, rev = g.Responses[0].GetResponseRange().Kvs, g.Header.Revision
		behind = len(g.Responses[2].GetResponseRange().Kvs) > 0
	}
	// The wait can end in the same instant the session does: never report
	// a lock whose lease is already gone.
	select {
	case <-sess.Done():
		l.cleanup(key, myRev)
		return nil, errSessionExpired
	default:
	}
	own := &ownership{sess: sess, key: key, rev: myRev, pfx: pfx, lost: make(chan struct{}), ready: make(chan struct{}), closed: l.isClosed}
	own.ctx, own.stop = context.WithCancel(clientv3.WithRequireLeader(l.life))
	own.remote.Store(behind)
	return own, nil
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

// watchHolder watches the whole prefix while we hold the lock: a PUT of
// another key means another process queued (stop handing over in memory);
// a DELETE of our key means the lock is gone.
//
// The watch starts at the server's current revision rather than at
// myRev+1: etcd serves a watch that starts in the past from its "unsynced"
// group, caught up by a loop that may sleep 100ms — long enough for
// thousands of in-memory hand-overs while another process waits. What
// happened between myRev and the watch's start is read once instead.
func (l *Locker) watchHolder(own *ownership) {
	own.watchOnce.Do(func() {
		own.watching.Store(true)
		l.spawn(func() { l.runHolderWatch(own) })
	})
}

func (l *Locker) runHolderWatch(own *ownership) {
	defer own.markReady()
	defer own.remote.Store(true) // once blind, assume others wait
	wch := l.m.Client().Watch(own.ctx, own.pfx, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	for wr := range wch {
		if wr.Err() != nil || wr.Canceled {
			own.remote.Store(true)
			own.stop()
			continue // drain until the channel closes
		}
		if wr.Created {
			l.catchUp(own.ctx, own, own.pfx, own.rev)
		}
		for _, ev := range wr.Events {
			switch k := string(ev.Kv.Key); {
			case k == own.key && ev.Type == mvccpb.DELETE:
				own.markLost()
			case k != own.key && ev.Type == mvccpb.PUT:
				own.remote.Store(true)
			}
		}
	}
}

// catchUp covers the revisions before the holder watch started: keys
// created after ours (other processes queued) and our own key's survival.
func (l *Locker) catchUp(ctx context.Context, own *ownership, pfx string, myRev int64) {
	resp, err := l.m.Client().Txn(ctx).Then(
		clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithMinCreateRev(myRev+1), clientv3.WithKeysOnly(), clientv3.WithLimit(1)),
		clientv3.OpGet(own.key, clientv3.WithCountOnly())).Commit()
	if err != nil {
		own.remote.Store(true) // cannot tell: be fair rather than fast
		own.markReady()
		return
	}
	// (Not WithCountOnly: etcd reports the count before the revision
	// filter, which would always include our own key.)
	if len(resp.Responses[0].GetResponseRange().Kvs) > 0 {
		own.remote.Store(true)
	}
	if resp.Responses[1].GetResponseRange().Count == 0 {
		own.markLost()
	}
	own.synced.Store(true)
	own.markReady()
}

// releaseEtcd deletes our key if it is still the one we created, and stops
// the holder watch. It wraps lock.ErrNotHeld when the key was already gone
// (session expired, deleted) — never deleting a newer holder's key — and
// lock.ErrUnavailable when etcd did not answer.
func (l *Locker) releaseEtcd(ctx context.Context, own *ownership) error {
	defer own.stop()
	resp, err := l.m.Client().Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(own.key), "=", own.rev)).
		Then(clientv3.OpDelete(own.key)).Commit()
	if err != nil {
		// Try once more in the background, guarded by the revision; if
		// that fails too the key goes when the session lease ends.
		l.cleanup(own.key, own.rev)
		return fmt.Errorf("etcdlock: release %s: %w: %w", own.key, lock.ErrUnavailable, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcdlock: release %s: %w: key gone (session expired or deleted)", own.key, lock.ErrNotHeld)
	}
	return nil
}

// cleanup removes key in the background after an abandoned acquisition;
// rev 0 removes it whatever its revision (we never learned it). It runs
// detached from the caller's ctx so Acquire returns at its deadline even
// when etcd does not answer.
func (l *Locker) cleanup(key string, rev int64) {
	l.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		txn := l.m.Client().Txn(ctx)
		if rev != 0 {
			txn = txn.If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev))
		}
		if _, err := txn.Then(clientv3.OpDelete(key)).Commit(); err != nil {
			l.log.Warn("could not remove abandoned lock key; it expires with the session", "key", key, "err", err)
		}
	})
}

// bound derives a ctx that also ends when the Locker closes.
func (l *Locker) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.life, cancel)
	return ctx, func() { stop(); cancel() }
}
