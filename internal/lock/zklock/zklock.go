package zklock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"seckill/internal/lock"
	"seckill/internal/lock/backend"
	"seckill/internal/lock/cohort"
	"seckill/internal/zksess"
)

// DefaultRoot is where lock nodes live unless Options.Root says otherwise.
const DefaultRoot = "/seckill/locks"

// Options configure a Locker.
type Options struct {
	// Root is the parent path of all lock nodes; each key becomes a child
	// (container) node under it. The default is "/seckill/locks".
	Root string
	// LocalHandoffs is how many times in a row a released lock may be passed
	// in memory to another goroutine of this Locker waiting for the same
	// key, before the node is given up to the next process in ZooKeeper's
	// queue: cohort.Config.Handoffs (the default, 0, is 8; a negative value
	// disables passing; values above 65535 are capped).
	LocalHandoffs int
	// LossWatchDelay is how long a node is held before it is watched for
	// deletion underneath us (see "ZooKeeper queue" in the package doc):
	// 0 means DefaultLossWatchDelay (5ms); a negative value watches at once.
	LossWatchDelay time.Duration
}

// Locker hands out ZooKeeper-backed leases. It borrows a zksess.Session and
// never closes it. Safe for concurrent use.
type Locker struct {
	co   *cohort.Locker
	sess *zksess.Session
	conn *zk.Conn
	root string
	acl  []zk.ACL
	// watchAfter is Options.LossWatchDelay resolved.
	watchAfter time.Duration
	log        *slog.Logger

	closing   chan struct{} // closed by Close; wakes waiters
	cancelSub func()
	g         lock.Group // session watcher, monitors, background deletes

	mu      sync.Mutex
	closed  bool
	held    map[*node]struct{}  // nodes that hold their key, not lost
	nodes   map[string]struct{} // every lock node we created and have not deleted
	orphans map[string]struct{} // nodes to delete as soon as the session allows
	pending []string            // nodes to delete once mu is released (see unlock)
}

var (
	_ lock.Locker    = (*Locker)(nil)
	_ lock.Closer    = (*Locker)(nil)
	_ lock.Pinger    = (*Locker)(nil)
	_ lock.Describer = (*Locker)(nil)
)

// New returns a Locker that keeps its nodes under opts.Root on s.
func New(s *zksess.Session, opts Options) *Locker {
	root := strings.TrimRight(opts.Root, "/")
	if root == "" {
		root = DefaultRoot
	}
	l := &Locker{
		sess:       s,
		conn:       s.Conn(),
		root:       root,
		acl:        zk.WorldACL(zk.PermAll),
		watchAfter: max(cmp.Or(opts.LossWatchDelay, DefaultLossWatchDelay), 0),
		log:        slog.Default().With("component", "zklock"),
		closing:    make(chan struct{}),
		held:       make(map[*node]struct{}),
		nodes:      make(map[string]struct{}),
		orphans:    make(map[string]struct{}),
	}
	l.co = cohort.New(server{l}, cohort.Config{Name: "zklock", Handoffs: opts.LocalHandoffs, Log: l.log})
	events, cancel := s.Subscribe()
	l.cancelSub = cancel
	l.g.Go(func() { l.watchSession(events) })
	return l
}

// Describe names the backend for logs, metrics and the fence.
func (l *Locker) Describe() lock.Info { return lock.Info{Name: backend.ZooKeeper, Safe: true} }

// Ping reports whether the session is established; otherwise it returns an
// error wrapping lock.ErrUnavailable. It sends nothing: go-zookeeper's own
// heartbeats keep the state current.
func (l *Locker) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if st := l.sess.State(); st != zk.StateHasSession {
		return lock.Unavailable("zklock", "ping", fmt.Errorf("%w: state %v", zksess.ErrUnavailable, st))
	}
	return nil
}

// Close stops the Locker: waiting Acquires return ErrClosed, held leases
// become lost (Err wraps ErrLost and ErrClosed), and every node this Locker
// created is deleted, so other processes need not wait for a session
// timeout. The Session stays open. Close waits for the Locker's goroutines;
// a request in flight is bounded by go-zookeeper's own timeouts.
func (l *Locker) Close() error {
	_ = l.co.Close() // ends waiters and leases, deletes the held nodes
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.closing)
	lost := fmt.Errorf("%w: %w", lock.ErrLost, lock.ErrClosed)
	for n := range l.held {
		l.loseNodeLocked(n, lost)
	}
	l.pending = nil // all of l.nodes is deleted below
	paths := make([]string, 0, len(l.nodes))
	for p := range l.nodes {
		paths = append(paths, p)
	}
	l.mu.Unlock()

	l.cancelSub()
	l.deleteAll(paths)
	l.g.Close()
	return nil
}

// deleteAll deletes paths concurrently (requests pipeline on the one
// connection) and forgets those that are gone.
func (l *Locker) deleteAll(paths []string) {
	var wg sync.WaitGroup
	for _, p := range paths {
		wg.Go(func() {
			err := l.conn.Delete(p, -1)
			if err == nil || errors.Is(err, zk.ErrNoNode) {
				l.forget(p)
			}
		})
	}
	wg.Wait()
}

// watchSession turns session-state changes into lease loss and orphan
// cleanup.
func (l *Locker) watchSession(events <-chan zk.Event) {
	for ev := range events {
		switch ev.State {
		case zk.StateHasSession:
			l.mu.Lock()
			orphans := make([]string, 0, len(l.orphans))
			for p := range l.orphans {
				orphans = append(orphans, p)
			}
			l.mu.Unlock()
			if len(orphans) > 0 {
				l.log.Info("deleting lock nodes of leases lost during a disconnect", "nodes", len(orphans))
				l.deleteAll(orphans)
			}
		case zk.StateDisconnected, zk.StateExpired, zk.StateAuthFailed:
			reason := "connection lost (session suspended)"
			if ev.State == zk.StateExpired {
				reason = "session expired"
			} else if ev.State == zk.StateAuthFailed {
				reason = "authentication failed"
			}
			l.mu.Lock()
			for n := range l.held {
				l.orphans[n.path] = struct{}{}
				l.loseNodeLocked(n, fmt.Errorf("%w: zookeeper %s", lock.ErrLost, reason))
			}
			l.unlock()
		}
	}
}

// forget drops a deleted node from the bookkeeping.
func (l *Locker) forget(path string) {
	l.mu.Lock()
	delete(l.nodes, path)
	delete(l.orphans, path)
	l.mu.Unlock()
}

// orphan marks a node whose delete failed for deletion once the session is
// back (a node of an expired session is gone anyway: the delete then finds
// nothing).
func (l *Locker) orphan(path string) {
	l.mu.Lock()
	if _, ok := l.nodes[path]; ok {
		l.orphans[path] = struct{}{}
	}
	l.mu.Unlock()
}

// deleteNode deletes path in the background, orphaning it on failure.
// After Close it deletes inline (Close owns the cleanup then).
func (l *Locker) deleteNode(path string) {
	del := func() {
		err := l.conn.Delete(path, -1)
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			l.forget(path)
			return
		}
		l.log.Debug("lock node delete failed; retried after reconnect", "path", path, "err", err)
		l.orphan(path)
	}
	if !l.g.Go(del) {
		del()
	}
}

// WaitQueued returns once at least n goroutines of this Locker wait locally
// for key behind the one holding it or acquiring it from the server, or
// with ctx's error. It is for tests and tools that must know a waiter has
// queued (locktest.Queuer).
func (l *Locker) WaitQueued(ctx context.Context, key string, n int) error {
	return l.co.WaitQueued(ctx, key, n)
}
