package redissonlock

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// maxWait caps one sleep of a queue head. Release messages are the
	// wake-up; the cap only bounds the damage of one lost in a pub/sub
	// reconnect, or of a key with no TTL.
	maxWait = time.Second

	// subscribeTimeout bounds one SUBSCRIBE/UNSUBSCRIBE write.
	subscribeTimeout = 5 * time.Second

	// healthInterval is how long the pub/sub connection may stay quiet
	// before a PING checks it (go-redis's Channel uses 3s too).
	healthInterval = 3 * time.Second

	// reconnectBackoff spaces reads on a broken pub/sub connection.
	reconnectBackoff = 100 * time.Millisecond
)

// queue is the local FIFO of goroutines waiting for one key. Only its head
// runs the acquire script; everyone else waits for their turn, so a release
// costs one attempt per process instead of one per goroutine.
type queue struct {
	key     string
	names   *keyNames
	waiters []*waiter     // guarded by Locker.mu; waiters[0] is the head
	notify  chan struct{} // cap 1: a release (or a resubscription) since the head last looked
	expires time.Time     // guarded by Locker.mu: best-known expiry of the current holder
	// holdBack, guarded by Locker.mu, is set while this Locker yields the
	// lock to other processes: until then (or until another process's
	// release message clears it) the head does not run the acquire script.
	holdBack time.Time
	// timer is the head's sleep, created by the first head and reused by
	// each next one (only the head touches it; it is stopped before the
	// turn passes on), so a run of heads does not allocate a timer each.
	timer *time.Timer

	readyOnce sync.Once
	ready     chan struct{} // closed when SUBSCRIBE is confirmed or failed
	subErr    error         // set before ready closes
}

// waiter is one goroutine in a queue.
type waiter struct {
	turn   chan struct{} // closed when the waiter becomes head
	handed chan *Lease   // cap 1: a lease handed over by a local Release
	state  int           // guarded by Locker.mu: waitIdle, waitTrying, …
}

// subOp is a SUBSCRIBE (q set) or an UNSUBSCRIBE (key set) to send.
type subOp struct {
	q   *queue
	key string
}

func (q *queue) markReady(err error) {
	q.readyOnce.Do(func() {
		q.subErr = err
		close(q.ready)
	})
}

// nudge wakes the head, or leaves a note for whoever is head next.
func (q *queue) nudge() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// wait queues the caller for key and, once at the head, alternates between
// the acquire script and sleeping until a release message or the holder's
// TTL: Redisson's semaphore-latch loop, with one latch per process.
//
// names, when not nil, were built by the caller's first attempt; a new
// queue adopts them. owner is minted before the first attempt when empty.
func (lk *Locker) wait(ctx context.Context, key string, names *keyNames, owner string) (*Lease, error) {
	w := &waiter{turn: make(chan struct{}), handed: make(chan *Lease, 1)}
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		return nil, closedErr(key)
	}
	q := lk.queues[key]
	created := q == nil
	if created {
		if names == nil {
			names = newKeyNames(key)
		}
		q = &queue{key: key, names: names, notify: make(chan struct{}, 1), ready: make(chan struct{})}
		lk.queues[key] = q
		lk.pushOpLocked(subOp{q: q})
		close(w.turn)
	}
	q.waiters = append(q.waiters, w)
	lk.mu.Unlock()

	acquired := false
	defer func() { lk.leave(q, w, acquired) }()
	// A local Release may hand this waiter the lock at any point while it
	// is idle; each way out below first checks for that under Locker.mu.
	handed := func(l *Lease) (*Lease, error) {
		acquired = true
		return l, nil
	}
	gaveUp := func(err error) (*Lease, error) {
		// Handed over just as ctx ended: the lock is ours, so return it
		// rather than leave it held. After Close it is lost anyway.
		if l := lk.takeHanded(w, waitLeft); l != nil && lk.ctx.Err() == nil {
			return handed(l)
		}
		return nil, err
	}

	for _, ch := range []<-chan struct{}{w.turn, q.ready} {
		select {
		case <-ch:
		case l := <-w.handed:
			return handed(l)
		case <-ctx.Done():
			return gaveUp(notObtained(ctx, key))
		case <-lk.ctx.Done():
			return gaveUp(closedErr(key))
		}
	}
	if q.subErr != nil {
		return gaveUp(unavailable("subscribe", key, q.subErr))
	}

	// Runs before leave passes the turn on (defers run last-in first-out).
	defer func() {
		if q.timer != nil {
			q.timer.Stop()
		}
	}()
	// The creator's first attempt happened before the subscription, so a
	// release may have slipped by unseen: try again now that it is live.
	// A promoted head first waits, since its predecessor most likely holds
	// the lock now and will publish when it lets go.
	skipWait := created
	for {
		if !skipWait {
			lk.mu.Lock()
			d := min(max(time.Until(q.expires), 0), maxWait)
			if hb := time.Until(q.holdBack); hb > 0 {
				d = hb
			}
			lk.mu.Unlock()
			if q.timer == nil {
				q.timer = time.NewTimer(d)
			} else {
				q.timer.Reset(d)
			}
			select {
			case <-q.notify:
			case <-q.timer.C:
			case l := <-w.handed:
				return handed(l)
			case <-ctx.Done():
				return gaveUp(notObtained(ctx, key))
			case <-lk.ctx.Done():
				return gaveUp(closedErr(key))
			}
		}
		skipWait = false
		lk.mu.Lock()
		hold := time.Now().Before(q.holdBack)
		lk.mu.Unlock()
		if hold {
			continue // this Locker yielded: wait for the others' release
		}
		if l := lk.takeHanded(w, waitTrying); l != nil {
			return handed(l)
		}
		if owner == "" {
			owner = lk.newOwner()
		}
		sent := time.Now()
		l, pttl, err := lk.try(ctx, q.names, owner)
		if err != nil {
			return nil, err
		}
		lk.mu.Lock()
		if l == nil {
			w.state = waitIdle
		}
		if l != nil {
			q.expires = sent.Add(lk.ttl)
		} else if pttl >= 0 {
			q.expires = sent.Add(pttl)
		} else {
			q.expires = sent.Add(maxWait)
		}
		lk.mu.Unlock()
		if l != nil {
			// A note left now announces a release from before we took the
			// lock; it would only cost the next head a futile attempt.
			select {
			case <-q.notify:
			default:
			}
			acquired = true
			return l, nil
		}
	}
}

// leave removes w from q and hands the turn to the next waiter. A head that
// leaves without the lock may have swallowed a release note, so it passes
// one on; the last waiter out unsubscribes.
func (lk *Locker) leave(q *queue, w *waiter, acquired bool) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	i := slices.Index(q.waiters, w)
	if i < 0 {
		return
	}
	q.waiters = slices.Delete(q.waiters, i, i+1)
	if len(q.waiters) == 0 {
		if lk.queues[q.key] == q {
			delete(lk.queues, q.key)
		}
		lk.pushOpLocked(subOp{key: q.key})
		return
	}
	if i == 0 {
		close(q.waiters[0].turn)
		if !acquired {
			q.nudge()
		}
	}
}

// pushOpLocked schedules a (un)subscription. Ops go through one goroutine
// so they reach Redis in the order the queues changed, and no caller blocks
// on a network write while holding mu.
func (lk *Locker) pushOpLocked(op subOp) {
	if lk.closed {
		return
	}
	if lk.ps == nil {
		// No channels yet: go-redis connects when the first SUBSCRIBE goes out.
		lk.ps = lk.rdb.Subscribe(context.Background())
		ps := lk.ps
		lk.wg.Go(func() { lk.receive(ps) })
		lk.wg.Go(lk.subscriber)
	}
	lk.ops = append(lk.ops, op)
	select {
	case lk.opsSig <- struct{}{}:
	default:
	}
}

// subscriber sends queued ops until Close.
func (lk *Locker) subscriber() {
	for {
		select {
		case <-lk.opsSig:
		case <-lk.ctx.Done():
			return
		}
		lk.mu.Lock()
		ops, ps := lk.ops, lk.ps
		lk.ops = nil
		lk.mu.Unlock()
		for _, op := range ops {
			ctx, cancel := context.WithTimeout(lk.ctx, subscribeTimeout)
			if op.q == nil {
				if err := ps.Unsubscribe(ctx, channelOf(op.key)); err != nil && lk.ctx.Err() == nil {
					slog.Warn("redisson: unsubscribe failed", "key", op.key, "err", err)
				}
			} else {
				lk.subscribe(ctx, ps, op.q)
			}
			cancel()
		}
	}
}

// subscribe sends SUBSCRIBE for q. q is registered as pending first: the
// confirmation can arrive before Subscribe returns.
func (lk *Locker) subscribe(ctx context.Context, ps *redis.PubSub, q *queue) {
	ch := channelOf(q.key)
	lk.mu.Lock()
	lk.pending[ch] = append(lk.pending[ch], q)
	lk.mu.Unlock()
	err := ps.Subscribe(ctx, ch)
	if err == nil {
		return
	}
	lk.mu.Lock()
	if p := lk.pending[ch]; len(p) > 0 && p[len(p)-1] == q {
		lk.pending[ch] = p[:len(p)-1]
		if len(p) == 1 {
			delete(lk.pending, ch)
		}
	}
	lk.mu.Unlock()
	q.markReady(err)
}

// receive reads the pub/sub connection until Close and dispatches each
// message from this goroutine. go-redis's Channel would add a goroutine hop
// per release to the wake-up path, which is the critical path of a sale.
func (lk *Locker) receive(ps *redis.PubSub) {
	pinged := false
	for {
		m, err := ps.ReceiveTimeout(lk.ctx, healthInterval)
		if lk.ctx.Err() != nil {
			return
		}
		var ne net.Error
		switch {
		case err == nil:
			pinged = false
			lk.dispatch(m)
		case errors.As(err, &ne) && ne.Timeout() && !pinged:
			// Quiet is fine, silence is not: a PING's reply proves the
			// connection alive, and a failed write makes go-redis reconnect.
			pinged = true
			_ = ps.Ping(lk.ctx)
		default:
			// Broken connection: go-redis redials and resubscribes on the
			// next call, and the resubscription nudges the heads. Back off
			// so a dead server does not spin this loop.
			pinged = false
			select {
			case <-lk.ctx.Done():
				return
			case <-time.After(reconnectBackoff):
			}
		}
	}
}

// dispatch routes one pub/sub message: a release nudges the key's queue
// head; a subscribe confirmation readies the oldest pending queue of that
// channel or, when none is pending, means go-redis resubscribed after a
// reconnect, so the head retries in case a release was missed meanwhile.
func (lk *Locker) dispatch(m any) {
	var ch string
	switch m := m.(type) {
	case *redis.Message:
		if m.Payload == lk.yieldMsg {
			return // our own yield: our waiters let the others go first
		}
		ch = m.Channel
	case *redis.Subscription:
		if m.Kind != "subscribe" {
			return
		}
		ch = m.Channel
		lk.mu.Lock()
		if p := lk.pending[ch]; len(p) > 0 {
			if len(p) == 1 {
				delete(lk.pending, ch)
			} else {
				lk.pending[ch] = p[1:]
			}
			lk.mu.Unlock()
			p[0].markReady(nil)
			return
		}
		lk.mu.Unlock()
	default: // *redis.Pong
		return
	}
	key, ok := keyOfChannel(ch)
	if !ok {
		return
	}
	lk.mu.Lock()
	q := lk.queues[key]
	if q != nil {
		q.holdBack = time.Time{}
	}
	lk.mu.Unlock()
	if q != nil {
		lk.wakeups.Add(1)
		q.nudge()
	}
}
