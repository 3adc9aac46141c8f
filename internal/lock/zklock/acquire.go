package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
	"seckill/internal/zksess"
)

const (
	// lockName follows the creation GUID in a lock node's name
	// (zksess.ProtectedPrefix + GUID + "-" + lockName + sequence).
	lockName = "lock-"
	// lockMarker separates the GUID from ZooKeeper's 10-digit sequence.
	lockMarker = "-" + lockName
)

// errRestart: our node vanished while we queued (session expired, node
// deleted by an operator); queue again with a new node.
var errRestart = errors.New("zklock: lock node vanished while waiting")

// Acquire blocks until the lock for key is held or ctx is done.
//
// The key becomes a path below Root ("a/b" → Root/a/b); empty segments are
// rejected. Goroutines of this Locker wait for a key in FIFO order; the one
// at the front queues the process's node in ZooKeeper (see the package
// documentation). If ctx ends first the error wraps lock.ErrNotObtained and
// ctx.Err(); a node nobody waits for any more is deleted in the background.
// Without an established session (a disconnect, an expiry, a server
// restart) the front waits, within ctx, for go-zookeeper's next session and
// queues a new node in it; if ctx ends while there is still no session, the
// error also wraps lock.ErrUnavailable. A request that fails for another
// reason wraps lock.ErrUnavailable at once. After Close it wraps
// lock.ErrClosed.
func (l *Locker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	ls, err := l.co.Acquire(ctx, key)
	if err != nil && ctx.Err() != nil && !errors.Is(err, lock.ErrUnavailable) && !errors.Is(err, lock.ErrClosed) {
		// Queued behind a front that was waiting for a session: the
		// deadline passed because ZooKeeper was away, not because the
		// lock was busy, and the caller should be told so.
		if rerr := l.ready(); rerr != nil && !errors.Is(rerr, lock.ErrClosed) {
			err = fmt.Errorf("%w: %w: %w", err, lock.ErrUnavailable, rerr)
		}
	}
	return ls, err
}

// server is the Locker's ZooKeeper side, as the cohort sees it.
type server struct{ l *Locker }

// Acquire queues a node for key and waits until it is the lowest. When the
// node vanishes (expiry, deleted by an operator) or the connection drops
// while it queues, it waits for the next session, within ctx, and queues a
// new node: a disconnect costs the caller its place in ZooKeeper's queue,
// never its request. A node given up (ctx done, a failure) is deleted.
func (s server) Acquire(ctx context.Context, key string) (cohort.Hold, error) {
	l := s.l
	dir := l.root + "/" + key
	for retries := 0; ; retries++ {
		if err := l.awaitSession(ctx, retries); err != nil {
			return nil, err
		}
		n, err := l.create(ctx, dir)
		if err != nil {
			if l.retryable(ctx, err) {
				l.log.Debug("create failed on a dropped connection; waiting for a session", "key", key, "err", err)
				continue
			}
			return nil, err
		}
		err = l.wait(ctx, n)
		if err == nil {
			return n, nil
		}
		l.mu.Lock()
		l.dropNodeLocked(n) // normally gone already on a restart
		l.unlock()
		if !errors.Is(err, errRestart) && !l.retryable(ctx, err) {
			return nil, err
		}
		l.log.Debug("queueing again", "key", key, "node", n.path, "err", err)
	}
}

// retryBackoff bounds how fast a front retries when a session is
// established again at once: a request that keeps failing with a
// connection error while the state says "connected" must not spin.
const retryBackoff = 200 * time.Millisecond

// awaitSession waits, within ctx, until the Locker may send requests:
// a session is established. Before a retry that follows a retry it also
// backs off (at most retryBackoff), the fallback for a state that flaps.
// Errors wrap lock.ErrClosed, or zksess.ErrUnavailable (with ctx's error
// when ctx ended first).
func (l *Locker) awaitSession(ctx context.Context, retries int) error {
	if retries > 1 {
		t := time.NewTimer(min(time.Duration(retries-1)*20*time.Millisecond, retryBackoff))
		select {
		case <-t.C:
		case <-l.closing:
		case <-ctx.Done():
		}
		t.Stop()
	}
	select {
	case <-l.closing:
		return lock.ErrClosed
	default:
	}
	// ctx also ends when the Locker closes (the cohort's doing), so the
	// wait never outlives Close although the session does.
	return l.sess.Await(ctx)
}

// retryable reports whether err means the connection or session went away
// under a request (or the state check found no session), so that the
// request is worth making again in the next session, and ctx still allows
// it. A closed Session is not retryable: Await reports it.
func (l *Locker) retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || l.isClosing() {
		return false
	}
	switch {
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrSessionExpired),
		errors.Is(err, zk.ErrSessionMoved), errors.Is(err, zk.ErrNoServer):
		return true
	case errors.Is(err, zksess.ErrUnavailable):
		return l.sess.State() != zk.StateHasSession // not "session closed"
	}
	return false
}

func validKey(key string) error {
	if key == "" || slices.Contains(strings.Split(key, "/"), "") {
		return fmt.Errorf("zklock: invalid key %q: empty path segment", key)
	}
	return nil
}

func (l *Locker) isClosing() bool {
	select {
	case <-l.closing:
		return true
	default:
		return false
	}
}

// ready reports whether requests can be sent now: the Locker is open and
// the session established. A front that finds it not ready waits for the
// session (awaitSession) rather than fail.
func (l *Locker) ready() error {
	select {
	case <-l.closing:
		return lock.ErrClosed
	default:
	}
	if st := l.sess.State(); st != zk.StateHasSession {
		return fmt.Errorf("%w: state %v", zksess.ErrUnavailable, st)
	}
	return nil
}

// create makes our protected ephemeral-sequential node under dir,
// creating dir's ancestors as container nodes
// when missing (the server removes an empty container later, so keys do not
// accumulate). The create goes through zksess.Session.CreateProtected: the
// node is tracked from the moment the request is sent, and if its reply is
// lost (or ctx ends first) the Session sweeps it once the session is back,
// so no node we cannot name stays queued.
func (l *Locker) create(ctx context.Context, dir string) (*node, error) {
	// Never queue behind an orphan of our own: wait until the Session has
	// swept the nodes of lost creates under dir (normally none).
	if err := l.sess.Swept(ctx, dir); err != nil {
		return nil, err
	}
	var created zksess.Created
	var err error
	for attempt := 0; ; attempt++ {
		created, err = l.sess.CreateProtected(ctx, dir, lockName, nil, l.acl)
		if errors.Is(err, zk.ErrNoNode) && attempt == 0 {
			if err = l.ensurePath(ctx, dir); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		break
	}
	n := &node{l: l, dir: dir, path: created.Path, inc: created.Incarnation,
		loss: lock.NewSignal(), stop: make(chan struct{})}
	l.mu.Lock()
	l.nodes[n.path] = struct{}{}
	l.mu.Unlock()
	return n, nil
}

// ensurePath creates every missing ancestor of dir as a container node.
func (l *Locker) ensurePath(ctx context.Context, dir string) error {
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		p := dir[:i]
		_, err := zksess.Do(ctx, l.sess, func() (string, error) {
			return l.conn.CreateContainer(p, nil, zk.FlagContainer, l.acl)
		}, nil)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// listing is a getChildren reply.
type listing struct {
	children []string
	stat     *zk.Stat
}

// wait queues n behind its predecessor until it is the lowest, then marks it
// held. Each look is one getChildren, without a watch: when n is lowest, its
// reply carries the fencing base (the key node's pzxid), so a hold shorter
// than Options.LossWatchDelay costs no further request.
func (l *Locker) wait(ctx context.Context, n *node) error {
	dir := n.dir
	name := n.path[len(dir)+1:]
	for {
		r, err := zksess.Do(ctx, l.sess, func() (listing, error) {
			c, st, err := l.conn.Children(dir)
			return listing{c, st}, err
		}, nil)
		if errors.Is(err, zk.ErrNoNode) {
			return l.restartOrFail() // the key node went, and our node with it
		}
		if err != nil {
			return err
		}
		queue := sortBySequence(r.children)
		i := slices.Index(queue, name)
		if i < 0 {
			return l.restartOrFail()
		}
		if i == 0 {
			return l.hold(n, r.stat.Pzxid)
		}
		pred := dir + "/" + queue[i-1]
		// GetW rather than ExistsW: on a vanished predecessor it leaves no
		// watch behind for a node that will never come back.
		predW, err := zksess.Do(ctx, l.sess, func() (<-chan zk.Event, error) {
			_, _, ch, err := l.conn.GetW(pred)
			return ch, err
		}, nil)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		select {
		case <-predW:
			// Look again even when the predecessor was the head: the new
			// listing is what gives us the token and our node's watch.
		case <-l.closing:
			return lock.ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// restartOrFail decides what a vanished own node means: with the session
// back (a new one after expiry), queue again; otherwise report it.
func (l *Locker) restartOrFail() error {
	if err := l.ready(); err != nil {
		return err
	}
	return errRestart
}

// hold marks n as holding the lock and arms its loss watch (watchNode, after
// Options.LossWatchDelay). The grant is valid only
// while the session that created n is the current one: the listing proved
// n lowest in that session, and if it expired since (even if a new session
// is established by now) n died with it, so hold refuses and the caller
// queues again. It also refuses while the session is not established.
func (l *Locker) hold(n *node, pzxid int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return lock.ErrClosed
	}
	if st := l.sess.State(); st != zk.StateHasSession {
		return fmt.Errorf("%w: state %v", zksess.ErrUnavailable, st)
	}
	if n.done || !l.sess.Alive(n.inc) {
		return errRestart
	}
	n.held = true
	n.base = uint64(pzxid)
	l.held[n] = struct{}{}
	n.arm = time.AfterFunc(l.watchAfter, func() { l.watchNode(n) })
	return nil
}

// sortBySequence returns the lock nodes among children ordered by their
// sequence suffix (the GUID prefix makes names unordered), ignoring
// anything else, such as the directory of a nested key.
func sortBySequence(children []string) []string {
	type entry struct {
		name string
		seq  uint64
	}
	entries := make([]entry, 0, len(children))
	for _, c := range children {
		i := strings.LastIndex(c, lockMarker)
		if i < 0 {
			continue
		}
		seq, err := strconv.ParseUint(c[i+len(lockMarker):], 10, 64)
		if err != nil {
			continue
		}
		entries = append(entries, entry{c, seq})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.name
	}
	return names
}
