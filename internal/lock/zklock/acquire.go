package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
// Without an established session, or when a request fails, the error wraps
// lock.ErrUnavailable. After Close it wraps lock.ErrClosed.
func (l *Locker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	// Fail fast without a session: the cohort would queue the caller
	// behind a front that fails the same way.
	if err := l.ready(); err != nil && !errors.Is(err, lock.ErrClosed) && ctx.Err() == nil {
		return nil, fmt.Errorf("zklock: acquire %q: %w: %w", key, lock.ErrUnavailable, err)
	}
	return l.co.Acquire(ctx, key)
}

// server is the Locker's ZooKeeper side, as the cohort sees it.
type server struct{ l *Locker }

// Acquire queues a node for key and waits until it is the lowest, queueing
// again if the node vanishes while the session is back (expiry, deleted by
// an operator). A node given up (ctx done, a failure) is deleted.
func (s server) Acquire(ctx context.Context, key string) (cohort.Hold, error) {
	l := s.l
	dir := l.root + "/" + key
	for {
		if err := l.ready(); err != nil {
			return nil, err
		}
		n, err := l.create(ctx, dir)
		if err != nil {
			return nil, err
		}
		err = l.wait(ctx, n)
		if err == nil {
			return n, nil
		}
		l.mu.Lock()
		l.dropNodeLocked(n) // normally gone already on a restart
		l.unlock()
		if !errors.Is(err, errRestart) {
			return nil, err
		}
		l.log.Debug("queueing again", "key", key, "node", n.path)
	}
}

func validKey(key string) error {
	if key == "" || slices.Contains(strings.Split(key, "/"), "") {
		return fmt.Errorf("zklock: invalid key %q: empty path segment", key)
	}
	return nil
}

// ready fails fast when the Locker is closed or the session is not
// established: requests would only queue behind a reconnection.
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
		lostCh: make(chan struct{}), stop: make(chan struct{})}
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
		_, err := do(ctx, l, func() (string, error) {
			return l.conn.CreateContainer(p, nil, zk.FlagContainer, l.acl)
		}, nil)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// listing is a getChildren reply with its watch.
type listing struct {
	children []string
	stat     *zk.Stat
	watch    <-chan zk.Event
}

// wait queues n behind its predecessor until it is the lowest, then marks it
// held. Each look is one getChildren with a watch: when n is lowest, that
// reply carries the fencing base (the key node's pzxid) and the watch fires
// if n is deleted, so holding costs no further request. When n is not
// lowest, the watch is simply never read.
func (l *Locker) wait(ctx context.Context, n *node) error {
	dir := n.dir
	name := n.path[len(dir)+1:]
	for {
		r, err := do(ctx, l, func() (listing, error) {
			c, st, ch, err := l.conn.ChildrenW(dir)
			return listing{c, st, ch}, err
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
			return l.hold(n, r.stat.Pzxid, r.watch)
		}
		pred := dir + "/" + queue[i-1]
		// GetW rather than ExistsW: on a vanished predecessor it leaves no
		// watch behind for a node that will never come back.
		predW, err := do(ctx, l, func() (<-chan zk.Event, error) {
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

// hold marks n as holding the lock and starts its monitor on watch, the
// child watch of the listing that found it lowest. The grant is valid only
// while the session that created n is the current one: the listing proved
// n lowest in that session, and if it expired since (even if a new session
// is established by now) n died with it, so hold refuses and the caller
// queues again. It also refuses while the session is not established.
func (l *Locker) hold(n *node, pzxid int64, watch <-chan zk.Event) error {
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
	l.wg.Go(func() { l.monitor(n, watch) })
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
