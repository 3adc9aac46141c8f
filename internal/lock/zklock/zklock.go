// Package zklock is the "zookeeper" lock backend: Apache Curator's
// InterProcessMutex recipe on go-zookeeper, borrowing the process's shared
// zksess.Session, with a bounded cohort hand-off inside each process.
//
// # ZooKeeper queue
//
// A process queues a protected ephemeral-sequential node
// Root/<key>/_c_<guid>-lock-<seq>. The lowest sequence holds the lock; every
// other node's owner watches only its predecessor, so a release wakes exactly
// one process (no herd). The create is zksess.Session.CreateProtected: the
// node is tracked by its GUID from the moment the request is sent, and if
// the reply is lost in a disconnect (or the caller gives up first) the
// Session sweeps it on reconnection, so no ghost stays queued behind a
// session that survived the blip. An uncontended acquisition costs two requests, as raw zk.Lock's
// does: the create and one getChildren, which both tells us we are lowest
// and leaves a child watch that doubles as the watch on our own node (when
// it fires while we hold, one exists-watch on our node re-arms it).
//
// # Cohort: one node per process, bounded local hand-off
//
// The local half is the cohort package: goroutines of one Locker queue
// locally per key, in FIFO order, behind one "front" goroutine; only the
// front queues a node in ZooKeeper. When a lease is released and another
// local goroutine is waiting, the lock is passed to it in memory, with no
// ZooKeeper request, up to Options.LocalHandoffs times in a row, even if
// other processes are queued; then the node is deleted so the next process
// proceeds, and our next waiter queues a new node behind it. A node is
// passed only while the session that created it is the current one and
// established, and the node was not lost. A front that gives up deletes its
// node; the next local waiter queues a new one.
//
// An earlier version queued one node per goroutine, arguing that a waiting
// goroutine's create is then already done when its turn comes, so a
// hand-off costs one delete and one notification. Under contention that is
// still two fsynced writes (a create and a delete, ~4-5 ms each here) and
// four to five requests per acquisition, all on the critical path's server.
// With the cohort a node serves up to K+1 acquisitions (K = LocalHandoffs):
// writes per acquisition drop from 2 to 2/(K+1), requests from ~4.3 to about
// 5/(K+1), and the in-memory hand-offs take microseconds; the next process's
// node is already queued while we hold, so a hand-off between processes still
// costs one delete and one notification.
//
// Fairness trade-off: ZooKeeper's FIFO now orders processes at batch
// granularity (each process gets up to K+1 consecutive acquisitions per turn,
// then goes to the back of the queue); within a process the order is FIFO.
// A goroutine may therefore wait behind up to K+1 holders of each process
// queued ahead of it, instead of behind one holder per queued goroutine.
// LocalHandoffs < 0 turns passing off (a node per acquisition, processes
// alternate acquisition by acquisition).
//
// # Fencing token
//
// A lease's token is pzxid<<16 | n (the cohort's layout): pzxid is the key
// node's "last child change" zxid, read in the getChildren reply that found
// our node lowest, and n counts the passes on that node (0 for the lease
// ZooKeeper granted). The zxid
// is global to the ensemble and only grows; the listing that made an earlier
// holder lowest was read before that holder's node was deleted, and ours
// after (its node had a lower sequence, or the key node was re-created), so
// our pzxid is strictly greater. It also keeps growing when the key node is
// deleted and re-created, unlike the sequence suffix. Reading the czxid of
// our own node instead would cost the extra request an uncontended
// acquisition used to make.
//
// # Session
//
// Session handling follows Curator's connection states, more conservatively:
// a lease's Done closes on expiry (LOST) and also on a mere disconnect
// (SUSPENDED), because while disconnected the holder cannot know whether the
// server still counts its session; guarded writes must not proceed. Curator
// instead lets the holder wait for RECONNECTED; that keeps the lock across a
// short blip but leaves the decision to every caller. Here the caller simply
// acquires again. The node of a lease lost by a disconnect is deleted as soon
// as the session is back, so it does not block the queue. A lost lease also
// gives up its place at the front of the local queue, so local waiters queue
// a fresh node instead of waiting for its Release.
package zklock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"seckill/internal/lock"
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
}

// Locker hands out ZooKeeper-backed leases. It borrows a zksess.Session and
// never closes it. Safe for concurrent use.
type Locker struct {
	co   *cohort.Locker
	sess *zksess.Session
	conn *zk.Conn
	root string
	acl  []zk.ACL
	log  *slog.Logger

	closing   chan struct{} // closed by Close; wakes waiters
	cancelSub func()

	mu      sync.Mutex
	closed  bool
	held    map[*node]struct{}  // nodes that hold their key, not lost
	nodes   map[string]struct{} // every lock node we created and have not deleted
	orphans map[string]struct{} // nodes to delete as soon as the session allows
	pending []string            // nodes to delete once mu is released (see unlock)
	wg      sync.WaitGroup      // goroutines started through spawn
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
		sess:    s,
		conn:    s.Conn(),
		root:    root,
		acl:     zk.WorldACL(zk.PermAll),
		log:     slog.Default().With("component", "zklock"),
		closing: make(chan struct{}),
		held:    make(map[*node]struct{}),
		nodes:   make(map[string]struct{}),
		orphans: make(map[string]struct{}),
	}
	l.co = cohort.New(server{l}, cohort.Config{Name: "zklock", Handoffs: opts.LocalHandoffs, Log: l.log})
	events, cancel := s.Subscribe()
	l.cancelSub = cancel
	l.spawn(func() { l.watchSession(events) })
	return l
}

// Describe names the backend for logs, metrics and the fence.
func (l *Locker) Describe() lock.Info { return lock.Info{Name: "zookeeper", Safe: true} }

// Ping reports whether the session is established; otherwise it returns an
// error wrapping lock.ErrUnavailable. It sends nothing: go-zookeeper's own
// heartbeats keep the state current.
func (l *Locker) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if st := l.sess.State(); st != zk.StateHasSession {
		return fmt.Errorf("zklock: %w: %w: state %v", lock.ErrUnavailable, zksess.ErrUnavailable, st)
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
	l.wg.Wait()
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

// spawn runs f on a goroutine Close waits for. It reports false (and does
// not run f) once the Locker is closed.
func (l *Locker) spawn(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.wg.Go(f)
	return true
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
	if !l.spawn(del) {
		del()
	}
}

// do runs a blocking go-zookeeper request and waits for it or ctx, whichever
// comes first: the library's requests cannot be cancelled and, against a
// silent server, only time out after 2/3 of the session timeout. If ctx wins,
// the request keeps running and late (if non-nil) receives its result, so a
// create that succeeds after its caller gave up can still be undone.
func do[T any](ctx context.Context, l *Locker, req func() (T, error), late func(T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	var zero T
	if !l.spawn(func() { v, err := req(); ch <- result{v, err} }) {
		return zero, lock.ErrClosed
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		if late != nil && !l.spawn(func() { r := <-ch; late(r.v, r.err) }) {
			r := <-ch
			late(r.v, r.err)
		}
		return zero, ctx.Err()
	}
}

// WaitQueued returns once at least n goroutines of this Locker wait locally
// for key behind the one holding it or acquiring it from the server, or
// with ctx's error. It is for tests and tools that must know a waiter has
// queued (locktest.Queuer).
func (l *Locker) WaitQueued(ctx context.Context, key string, n int) error {
	return l.co.WaitQueued(ctx, key, n)
}
