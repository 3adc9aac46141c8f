package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"

	"seckill/internal/lock"
	"seckill/internal/zksess"
)

const (
	// protectedPrefix marks a node name carrying a creation GUID (Curator
	// and go-zookeeper use the same prefix).
	protectedPrefix = "_c_"
	// lockMarker separates the GUID from ZooKeeper's 10-digit sequence.
	lockMarker = "-lock-"
)

// errRestart: our node vanished while we queued (session expired, node
// deleted by an operator); queue again with a new node.
var errRestart = errors.New("zklock: lock node vanished while waiting")

// Acquire blocks until the lock for key is held or ctx is done.
//
// The key becomes a path below Root ("a/b" → Root/a/b); empty segments are
// rejected. If ctx ends first the error wraps lock.ErrNotObtained and
// ctx.Err(), and the waiting node is deleted in the background. Without an
// established session, or when a request fails, the error wraps
// lock.ErrUnavailable. After Close it wraps lock.ErrClosed.
func (l *Locker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	dir := l.root + "/" + key
	for {
		if err := l.ready(); err != nil {
			return nil, l.fail(ctx, key, err)
		}
		node, own, czxid, err := l.create(ctx, dir)
		if err != nil {
			return nil, l.fail(ctx, key, err)
		}
		ls, err := l.wait(ctx, key, dir, node, own, czxid)
		if errors.Is(err, errRestart) {
			l.deleteNode(node) // normally gone already; this clears the bookkeeping
			l.log.Debug("queueing again", "key", key, "node", node)
			continue
		}
		if err != nil {
			l.deleteNode(node)
			return nil, l.fail(ctx, key, err)
		}
		return ls, nil
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

// fail maps an acquisition error onto the lock package's sentinels.
func (l *Locker) fail(ctx context.Context, key string, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("zklock: acquire %q: %w: %w", key, lock.ErrNotObtained, ctx.Err())
	case errors.Is(err, lock.ErrClosed):
		return fmt.Errorf("zklock: acquire %q: %w", key, lock.ErrClosed)
	default:
		return fmt.Errorf("zklock: acquire %q: %w: %w", key, lock.ErrUnavailable, err)
	}
}

// create makes our protected ephemeral-sequential node under dir, creating
// dir's ancestors as container nodes when missing (the server removes an
// empty container later, so keys do not accumulate). It also sets the watch
// on our own node, which stays armed for the node's whole life, and returns
// the node's czxid, the fencing token.
func (l *Locker) create(ctx context.Context, dir string) (node string, own <-chan zk.Event, czxid int64, err error) {
	prefix := dir + "/" + protectedPrefix + uuid.NewString() + lockMarker
	for attempt := 0; ; attempt++ {
		node, err = do(ctx, l, func() (string, error) {
			return l.conn.Create(prefix, nil, zk.FlagEphemeral|zk.FlagSequence, l.acl)
		}, func(p string, err error) { l.undoCreate(dir, prefix, p, err) })
		if errors.Is(err, zk.ErrConnectionClosed) {
			// The reply was lost, not necessarily the create: look for our
			// GUID before trying again, so no ghost node stays queued.
			node, err = l.findProtected(ctx, dir, prefix)
		}
		if errors.Is(err, zk.ErrNoNode) && attempt == 0 {
			if err = l.ensurePath(ctx, dir); err != nil {
				return "", nil, 0, err
			}
			continue
		}
		if err != nil {
			return "", nil, 0, err
		}
		break
	}
	l.mu.Lock()
	l.nodes[node] = struct{}{}
	l.mu.Unlock()

	type existsW struct {
		ok   bool
		stat *zk.Stat
		ch   <-chan zk.Event
	}
	r, err := do(ctx, l, func() (existsW, error) {
		ok, stat, ch, err := l.conn.ExistsW(node)
		return existsW{ok, stat, ch}, err
	}, nil)
	switch {
	case err != nil:
		l.deleteNode(node)
		return "", nil, 0, err
	case !r.ok:
		l.forget(node)
		return "", nil, 0, fmt.Errorf("%w: lock node %s gone right after its create", zksess.ErrUnavailable, node)
	}
	return node, r.ch, r.stat.Czxid, nil
}

// findProtected returns the node under dir created with prefix's GUID, or
// zk.ErrConnectionClosed so the caller fails (and may retry later).
func (l *Locker) findProtected(ctx context.Context, dir, prefix string) (string, error) {
	children, err := do(ctx, l, func() ([]string, error) {
		c, _, err := l.conn.Children(dir)
		return c, err
	}, nil)
	if err != nil {
		return "", err
	}
	name := prefix[len(dir)+1:]
	for _, c := range children {
		if strings.HasPrefix(c, name) {
			return dir + "/" + c, nil
		}
	}
	return "", zk.ErrConnectionClosed
}

// undoCreate removes a node whose create completed after Acquire gave up.
func (l *Locker) undoCreate(dir, prefix, node string, err error) {
	if errors.Is(err, zk.ErrConnectionClosed) {
		node, err = l.findProtected(context.Background(), dir, prefix)
	}
	if err != nil {
		return // never created, or gone with its session
	}
	l.mu.Lock()
	l.nodes[node] = struct{}{}
	l.mu.Unlock()
	l.deleteNode(node)
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

// wait queues behind our predecessor until our node is the lowest.
func (l *Locker) wait(ctx context.Context, key, dir, node string, own <-chan zk.Event, czxid int64) (*lease, error) {
	name := node[len(dir)+1:]
	for {
		children, err := do(ctx, l, func() ([]string, error) {
			c, _, err := l.conn.Children(dir)
			return c, err
		}, nil)
		if err != nil {
			return nil, err
		}
		queue := sortBySequence(children)
		i := slices.Index(queue, name)
		if i < 0 {
			return nil, l.restartOrFail()
		}
		if i == 0 {
			return l.grant(key, node, own, czxid)
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
			return nil, err
		}
		select {
		case ev := <-predW:
			// The predecessor was the head at our last look: nothing lower
			// can appear (sequence numbers only grow, and the parent cannot
			// be replaced while our node is in it), so we are the head now
			// without another listing.
			if ev.Type == zk.EventNodeDeleted && i == 1 {
				return l.grant(key, node, own, czxid)
			}
		case <-own:
			return nil, l.restartOrFail()
		case <-l.closing:
			return nil, lock.ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
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

// grant registers the lease, unless the session was interrupted since we
// looked: then the node may be gone (expired) or uncertain (suspended).
func (l *Locker) grant(key, node string, own <-chan zk.Event, czxid int64) (*lease, error) {
	select {
	case <-own: // deleted, or the watch was invalidated by an expiry
		return nil, l.restartOrFail()
	default:
	}
	ls := &lease{l: l, key: key, path: node, token: uint64(czxid), own: own, sig: lock.NewSignal()}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, lock.ErrClosed
	}
	if st := l.sess.State(); st != zk.StateHasSession {
		return nil, fmt.Errorf("%w: state %v", zksess.ErrUnavailable, st)
	}
	l.held[ls] = struct{}{}
	l.wg.Go(ls.monitor)
	return ls, nil
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
