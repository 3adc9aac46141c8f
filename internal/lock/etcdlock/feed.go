package etcdlock

import (
	"context"
	"errors"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// errFeedEnded: the name's watch stopped (leader lost, Locker closing,
// client closed) before it could tell whether we hold the lock; the caller
// falls back to reading etcd.
var errFeedEnded = errors.New("prefix watch ended")

// feed is the one watch a Locker keeps on a lock name's prefix while the
// name is contended in this process (started when a local goroutine queues
// behind the holder or an enqueue finds keys ahead; stopped when the name
// goes idle: see cohort.KeyObserver). Every etcd acquisition of the name is
// tracked from its enqueue Txn on, so that
//
//   - a waiter learns it is the oldest key from the delete events alone,
//     with no read after each wake-up and no watch per acquisition;
//   - the holder learns whether its own key was deleted, without a
//     catch-up read.
//
// The watch is created once, at the server's current revision, so it is in
// etcd's "synced" group and events arrive as they are committed (a watch
// created per waiter from an older revision may be served by a catch-up
// loop that sleeps 100 ms). The cost is that every process contending for
// a name receives every put and delete under its prefix: with one key per
// process at a time that is a few events per hand-off, and no requests.
type feed struct {
	stop  context.CancelFunc
	ready chan struct{} // closed once the watch is created, or the feed ended

	mu        sync.Mutex
	readyOnce sync.Once
	ended     bool
	cur       *tracker // the name's current etcd acquisition, if tracked
}

// tracker is what the feed knows about one etcd acquisition. Its fields are
// guarded by feed.mu.
type tracker struct {
	f   *feed
	key string

	// settled is false from track until the first read (the enqueue Txn, or
	// a re-read) tells the state as of base; events meanwhile are kept in
	// pending and replayed by settle.
	settled bool
	pending []*clientv3.Event
	base    int64 // the state below is as of this revision plus later events

	ahead  map[string]struct{} // keys created before ours, still there
	behind bool                // a key was created after ours
	gone   bool                // our key was deleted
	ended  bool                // the feed stopped: nothing more is known
	wake   chan struct{}       // buffered(1): the state above changed
	onGone func()              // called once, when gone becomes true
}

func newFeed(stop context.CancelFunc) *feed {
	return &feed{stop: stop, ready: make(chan struct{})}
}

func (f *feed) markReady() { f.readyOnce.Do(func() { close(f.ready) }) }

// dead reports whether the feed has stopped; a new one may replace it.
func (f *feed) dead() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended
}

// end marks the feed stopped and tells the tracked acquisition.
func (f *feed) end() {
	f.mu.Lock()
	f.ended = true
	if t := f.cur; t != nil {
		t.ended = true
		t.notify()
	}
	f.mu.Unlock()
	f.markReady()
}

// track makes key's acquisition the one the feed reports to, once the watch
// is created (so that every event after the caller's next request is
// seen). It returns nil if the feed ended or ctx or the session ended
// first; the caller then does without.
func (f *feed) track(ctx context.Context, sess *concurrency.Session, key string, onGone func()) *tracker {
	select {
	case <-f.ready:
	case <-ctx.Done():
		return nil
	case <-sess.Done():
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return nil
	}
	t := &tracker{f: f, key: key, wake: make(chan struct{}, 1), onGone: onGone}
	f.cur = t
	return t
}

// untrack stops reporting to t (its key was released or abandoned).
func (t *tracker) untrack() {
	t.f.mu.Lock()
	if t.f.cur == t {
		t.f.cur = nil
	}
	t.f.mu.Unlock()
}

// unsettle starts buffering events again before a re-read.
func (t *tracker) unsettle() {
	t.f.mu.Lock()
	t.settled = false
	t.f.mu.Unlock()
}

// settle records what a read at revision base said, then applies the
// events after base that arrived meanwhile.
func (t *tracker) settle(base int64, ahead []*mvccpb.KeyValue, behind bool) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.settled, t.base, t.behind = true, base, behind
	t.ahead = make(map[string]struct{}, len(ahead))
	for _, kv := range ahead {
		t.ahead[string(kv.Key)] = struct{}{}
	}
	for _, ev := range t.pending {
		t.apply(ev)
	}
	t.pending = nil
	t.notify()
}

// dispatch hands a watch response's events (in revision order) to the
// tracked acquisition.
func (f *feed) dispatch(evs []*clientv3.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.cur
	if t == nil || len(evs) == 0 {
		return
	}
	if !t.settled {
		t.pending = append(t.pending, evs...)
		return
	}
	for _, ev := range evs {
		t.apply(ev)
	}
	t.notify()
}

// apply updates the state with one event; f.mu is held. Our keys are never
// overwritten, so a put that is not a create is ignored.
func (t *tracker) apply(ev *clientv3.Event) {
	if ev.Kv.ModRevision <= t.base {
		return // already in the read that settled us
	}
	k := string(ev.Kv.Key)
	switch {
	case ev.Type == mvccpb.DELETE && k == t.key:
		if !t.gone {
			t.gone = true
			t.onGone()
		}
	case ev.Type == mvccpb.DELETE:
		delete(t.ahead, k)
	case ev.IsCreate() && k != t.key:
		t.behind = true
	}
}

func (t *tracker) notify() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// await blocks until our key is the oldest under the prefix (nil), our key
// was deleted or the session ended (errSessionExpired), the feed ended
// (errFeedEnded), or ctx is done. Because the watch delivers the prefix's
// events in revision order without gaps, "no key ahead and ours not
// deleted" after applying the events up to revision X means our key was
// the oldest at X: what a re-read would have said, without the read.
func (t *tracker) await(ctx context.Context, sess *concurrency.Session) error {
	for {
		t.f.mu.Lock()
		gone, ended, head := t.gone, t.ended, t.settled && len(t.ahead) == 0
		t.f.mu.Unlock()
		switch {
		case gone:
			return errSessionExpired
		case head:
			return nil
		case ended:
			return errFeedEnded
		}
		select {
		case <-t.wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-sess.Done():
			return errSessionExpired
		}
	}
}

// runFeed reads the prefix watch until its ctx ends or etcd cancels it.
func (l *Locker) runFeed(ctx context.Context, f *feed, pfx string) {
	defer f.end()
	wch := l.m.Client().Watch(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	for wr := range wch {
		if wr.Err() != nil || wr.Canceled {
			f.end()
			f.stop()
			continue // drain until the channel closes
		}
		if wr.Created {
			f.markReady()
		}
		f.dispatch(wr.Events)
	}
}

// feedLocked returns name's live feed, starting one if start is set and
// there is none (or it ended). l.mu is held.
func (l *Locker) feedLocked(name string, start bool) *feed {
	if f := l.feeds[name]; f != nil && !f.dead() {
		return f
	}
	if !start || l.closed {
		return nil
	}
	ctx, stop := context.WithCancel(clientv3.WithRequireLeader(l.life))
	f := newFeed(stop)
	l.feeds[name] = f
	l.bg.Go(func() { l.runFeed(ctx, f, l.KeyPrefix(name)) })
	return f
}

// feed is feedLocked taking l.mu.
func (l *Locker) feed(name string, start bool) *feed {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.feedLocked(name, start)
}
