package etcdsess

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"seckill/internal/backoff"
)

// Sweep timing. An orphan is retried with a backoff from sweepMinBackoff
// doubling to sweepMaxBackoff, each attempt bounded by sweepAttempt; when it
// is still there one session TTL after it was abandoned, its session is
// ended instead (see Sweeper).
const (
	sweepMinBackoff = 100 * time.Millisecond
	sweepMaxBackoff = time.Second
	sweepAttempt    = 2 * time.Second
	// finalEndBound bounds ending a session from Close's last round.
	finalEndBound = time.Second
	// minLate is the shortest time an in-doubt key is deleted again after
	// a delete went through (see Sweeper.late): above etcd's default
	// request timeout (7s), past which a request it received and has not
	// proposed yet is dropped.
	minLate = 10 * time.Second
)

// Key is one key on a session, tracked from the moment its put is sent
// until it is confirmed gone. rev is its create revision, 0 while unknown
// (the put's reply never came); keys must be unique per put, so a delete by
// name can only hit our own key.
type Key struct {
	key  string
	sess *concurrency.Session

	// guarded by Sweeper.mu
	rev       int64
	abandoned time.Time // zero while an acquisition or a lease owns the key
	next      time.Time // next attempt
	retry     backoff.Backoff
	deleted   bool // a delete by name went through (rev 0 only)
}

// Sweeper removes the keys on this process's sessions that a borrower (the
// lock: an acquisition or a release) could not confirm removed (a timeout, a reset, a lost reply). The write may or may
// not have been applied, and the session usually lives on — a network blip
// shorter than the TTL ends with keep-alives resuming — so a leftover key
// would keep the smallest create revision under its prefix forever and
// every contender, this process's included, would queue behind it. The
// Sweeper retries the guarded delete until it is confirmed, or the session
// is over (its keys went with the lease); when that takes longer than one
// session TTL it ends the session itself rather than leave a live orphan.
// Track before you send: Sent before the put, Created once it is
// confirmed, Abandon when nobody owns the key any more and its removal was
// not confirmed.
type Sweeper struct {
	cli   *clientv3.Client
	ender *Manager
	bound time.Duration // give up deleting, end the session, after this
	// late: how long after its abandonment a key whose put was never
	// confirmed (rev 0) is deleted again, even once a delete went through.
	// The put may still be in flight when the delete is sent (the caller's
	// ctx ended with the request sent: a client gone, a deadline), and etcd
	// can apply it AFTER that delete: the delete finds nothing, and the
	// key, created a moment later on a session that lives on, would head
	// its queue for good. A late put is applied within moments of the
	// delete in practice; late is max(2*TTL, minLate).
	late time.Duration
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex
	keys    map[*Key]struct{} // abandoned keys only
	started bool              // the goroutine runs (from the first abandon)
	stopped bool              // close has begun: abandon sweeps inline
	// finalCtx bounds the attempts made once Close has begun (set by
	// Close): the borrower's whole Close shares one deadline.
	finalCtx context.Context
	wake     chan struct{} // buffered(1)
	stop     chan struct{}
	done     chan struct{}
}

// NewSweeper returns a Sweeper for keys on m's sessions: one that is not
// confirmed gone one session TTL after it was abandoned has its session
// ended (Manager.End). log receives the retries and the endings.
func (m *Manager) NewSweeper(log *slog.Logger) *Sweeper {
	sw := &Sweeper{
		cli: m.cli, ender: m, bound: m.TTL(), late: max(2*m.TTL(), minLate), log: log, now: time.Now,
		keys: make(map[*Key]struct{}),
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	return sw
}

// Sent registers key, on sess, before the request that puts it is sent.
func (sw *Sweeper) Sent(key string, sess *concurrency.Session) *Key {
	return &Key{key: key, sess: sess}
}

// Created records the key's create revision once the put is confirmed:
// from then on the Sweeper deletes it only at that revision.
func (sw *Sweeper) Created(k *Key, rev int64) {
	sw.mu.Lock()
	k.rev = rev
	sw.mu.Unlock()
}

// Abandon hands k to the background: nobody owns it any more and its
// removal was not confirmed.
func (sw *Sweeper) Abandon(k *Key) {
	sw.mu.Lock()
	if sw.stopped {
		// A borrower's call that outlived Close: nobody sweeps any more, so
		// make the final attempt here.
		rev := k.rev
		k.abandoned = sw.now()
		sw.mu.Unlock()
		sw.sweep(k, rev, true)
		return
	}
	if k.abandoned.IsZero() {
		k.abandoned = sw.now()
		k.next = k.abandoned
		k.retry = backoff.Backoff{Initial: sweepMinBackoff, Max: sweepMaxBackoff}
		sw.keys[k] = struct{}{}
	}
	if !sw.started {
		sw.started = true
		go sw.run()
	}
	sw.mu.Unlock()
	select {
	case sw.wake <- struct{}{}:
	default:
	}
}

// Close (the borrower's Close, once) makes one last round, bounded by ctx,
// ends the sessions of the keys still left, and stops the goroutine.
func (sw *Sweeper) Close(ctx context.Context) {
	sw.mu.Lock()
	sw.stopped = true
	sw.finalCtx = ctx
	started := sw.started
	sw.mu.Unlock()
	if started {
		close(sw.stop)
		<-sw.done
	}
}

func (sw *Sweeper) run() {
	defer close(sw.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := sw.round(false)
		timer.Reset(wait)
		select {
		case <-sw.stop:
			sw.round(true)
			return
		case <-sw.wake:
		case <-timer.C:
		}
	}
}

// round tries every due key once, concurrently, and returns how long until
// the next one is due. final (Close): every key is due, and a key still not
// confirmed gone has its session ended.
func (sw *Sweeper) round(final bool) time.Duration {
	now := sw.now()
	sw.mu.Lock()
	var due []*Key
	var revs []int64
	for k := range sw.keys {
		if final || !k.next.After(now) {
			due = append(due, k)
			revs = append(revs, k.rev)
		}
	}
	sw.mu.Unlock()

	var wg sync.WaitGroup
	for i, k := range due {
		wg.Go(func() { sw.sweep(k, revs[i], final) })
	}
	wg.Wait()

	sw.mu.Lock()
	defer sw.mu.Unlock()
	wait := time.Hour
	now = sw.now()
	for k := range sw.keys {
		wait = min(wait, max(k.next.Sub(now), 0))
	}
	return wait
}

// sweep makes one attempt at removing k.
func (sw *Sweeper) sweep(k *Key, rev int64, final bool) {
	over := false
	select {
	case <-k.sess.Done():
		// The session is over: nobody keeps its lease alive, so the key
		// goes with it within one TTL. But a keep-alive the client gave
		// up on (an error it took as final, during a blip) ends the
		// session with the lease still alive in etcd, and the key would
		// head its queue for that whole TTL (seen: 56 s of a 60 s TTL):
		// the delete is still tried, and given up on at the bound, with
		// no session left to end. Closing, the sessions were revoked.
		if final {
			sw.forget(k)
			return
		}
		over = true
	default:
	}
	base := context.Background()
	sw.mu.Lock()
	if final && sw.finalCtx != nil {
		base = sw.finalCtx
	}
	sw.mu.Unlock()
	ctx, cancel := context.WithTimeout(base, sweepAttempt)
	defer cancel()
	txn := sw.cli.Txn(ctx)
	if rev != 0 {
		txn = txn.If(clientv3.Compare(clientv3.CreateRevision(k.key), "=", rev))
	}
	resp, err := txn.Then(clientv3.OpDelete(k.key)).Commit()
	// A key this delete removed was put: nothing more can land (a put is
	// applied at most once).
	removed := err == nil && resp.Succeeded && len(resp.Responses) == 1 &&
		resp.Responses[0].GetResponseDeleteRange().GetDeleted() > 0
	sw.mu.Lock()
	age := sw.now().Sub(k.abandoned)
	switch {
	case err == nil && (rev != 0 || removed || final || age >= sw.late):
		// Deleted, or (guarded) already gone: either way not ours any more.
		// By name (rev 0), only once the put can no longer land after it.
		sw.mu.Unlock()
		sw.forget(k)
		return
	case err == nil:
		// Gone now, but the put whose reply never came may still be
		// applied after this delete: look again until late has passed.
		k.deleted = true
	case k.deleted && age >= sw.late:
		// Deleted once, and nothing can land any more.
		sw.mu.Unlock()
		sw.forget(k)
		return
	}
	overdue := err != nil && !k.deleted && (final || age >= sw.bound)
	if overdue && over {
		// Nothing to end: the lease expires, and the key with it.
		sw.mu.Unlock()
		sw.forget(k)
		return
	}
	if !overdue {
		k.next = sw.now().Add(k.retry.Next())
	}
	sw.mu.Unlock()
	if !overdue {
		if err != nil {
			sw.log.Debug("lock key not removed yet; retrying", "key", k.key, "err", err)
		}
		return
	}
	// Ending the session stops its keep-alive at once, so the lease and all
	// its keys expire within one TTL even if the revoke does not get through.
	// Its own deadline, short when closing: ending the session is what
	// matters, and it stops the keep-alive even if the revoke is lost.
	endBound := sweepAttempt
	if final {
		endBound = finalEndBound
	}
	ectx, ecancel := context.WithTimeout(context.Background(), endBound)
	defer ecancel()
	eerr := sw.ender.End(ectx, k.sess)
	sw.log.Warn("could not remove an abandoned lock key; ended its session so the key cannot outlive it",
		"key", k.key, "lease", fmt.Sprintf("%x", int64(k.sess.Lease())), "err", err, "revoke_err", eerr)
	sw.forget(k)
}

func (sw *Sweeper) forget(k *Key) {
	sw.mu.Lock()
	delete(sw.keys, k)
	sw.mu.Unlock()
}
