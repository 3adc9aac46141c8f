package zksess

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"
)

// Protected creates, as Curator's protected mode does them, with one
// difference: the node is tracked from the moment its create is sent, and
// any create whose outcome the caller did not receive is swept by the
// Session itself, not searched once by the caller.
//
// The failure this prevents: a create reaches the server, the connection
// drops before the reply, and the session survives the blip. The node then
// exists, owned by our live session, but nobody knows its name: in a lock
// or election queue it is a ghost that blocks every later node forever.

// ProtectedPrefix starts the name of every node made by CreateProtected; a
// GUID and "-" follow it (Curator and go-zookeeper use the same prefix).
const ProtectedPrefix = "_c_"

// maxSweepFailures is how many sweeps in a row may fail with the session
// established before the Session gives up and closes itself: a live orphan
// would block its queue for as long as the session lives, a closed session
// frees every node at once.
const maxSweepFailures = 3

// Incarnation names one ZooKeeper session as this process saw it: its id
// and how many expiries the Session had observed before the session was
// used. Compare it with Session.Alive.
type Incarnation struct {
	SessionID int64
	expiries  uint64
}

// Created is a node made by CreateProtected.
type Created struct {
	// Path is the node's full path, sequence suffix included.
	Path string
	// Incarnation is the session the node belongs to: the node exists (or
	// was deleted by someone) for as long as Alive(Incarnation) holds.
	Incarnation Incarnation
}

// protected is one create whose node may exist without its creator knowing
// its name. Guarded by Session.mu.
type protected struct {
	dir    string
	prefix string // child-name prefix: ProtectedPrefix + GUID + "-"

	abandoned bool // the caller stopped waiting: a late success is swept too
	settled   bool // the create has an outcome; the sweeper may look
}

// CreateProtected creates the ephemeral-sequential node
// dir/_c_<guid>-<name><sequence> and returns it with the session it belongs
// to. The create is tracked before it is sent: if its reply is lost
// (connection dropped), if ctx ends first, or on any other error that does
// not prove the node was never made, the Session's sweeper deletes every
// child of dir carrying the GUID once the session is established again,
// until it has confirmed them gone or the session expires. If it cannot, it
// closes the Session rather than leave a live orphan. The caller owns only
// a node this method returned.
//
// Errors are go-zookeeper's (zk.ErrNoNode when dir is missing, …), ctx's, or
// wrap ErrUnavailable when the Session is closed.
func (s *Session) CreateProtected(ctx context.Context, dir, name string, data []byte, acl []zk.ACL) (Created, error) {
	p := &protected{dir: dir, prefix: ProtectedPrefix + uuid.NewString() + "-"}
	path := dir + "/" + p.prefix + name
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Created{}, fmt.Errorf("%w: session closed", ErrUnavailable)
	}
	expiries := s.expiries
	s.tracked[p] = struct{}{} // tracked before the request exists
	s.wg.Add(1)
	s.mu.Unlock()

	type result struct {
		path string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		defer s.wg.Done()
		got, err := s.conn.Create(path, data, zk.FlagEphemeral|zk.FlagSequence, acl)
		s.mu.Lock()
		defer s.mu.Unlock()
		if p.abandoned {
			s.settleLocked(p, err)
			return
		}
		ch <- result{got, err}
	}()

	select {
	case r := <-ch:
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.err != nil {
			s.settleLocked(p, r.err)
			return Created{}, r.err
		}
		s.untrackLocked(p) // the caller owns it now
		return Created{Path: r.path, Incarnation: Incarnation{SessionID: s.conn.SessionID(), expiries: expiries}}, nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		select {
		case r := <-ch: // answered just now; nobody will take the node
			s.settleLocked(p, r.err)
		default:
			p.abandoned = true
		}
		return Created{}, ctx.Err()
	}
}

// settleLocked records the outcome of p's create, which nobody took: unless
// err proves no node exists, the sweeper looks for it.
func (s *Session) settleLocked(p *protected, err error) {
	if err != nil && notCreated(err) {
		s.untrackLocked(p)
		return
	}
	p.settled = true
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// notCreated reports whether a create's error proves there is no node:
// the server refused it, it was never sent, or its session is over.
func notCreated(err error) bool {
	for _, e := range []error{
		zk.ErrNoNode, zk.ErrNodeExists, zk.ErrNoAuth, zk.ErrBadArguments,
		zk.ErrInvalidACL, zk.ErrNoChildrenForEphemerals, zk.ErrAPIError,
		zk.ErrInvalidPath, zk.ErrInvalidFlags,
		zk.ErrNoServer, zk.ErrSessionExpired, zk.ErrClosing,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Alive reports whether inc is the current session: the same session id,
// no expiry observed since it was taken, and established now. A node
// created in a session that is not alive may be gone.
func (s *Session) Alive(inc Incarnation) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return inc.SessionID != 0 && s.expiries == inc.expiries &&
		s.conn.SessionID() == inc.SessionID && s.state() == zk.StateHasSession
}

// Swept waits until no protected create under dir can have left a node
// this process does not know: each is taken by its caller, confirmed gone,
// or its session is over. A recipe calls it before queueing anew, so its new
// node is not queued behind an orphan of its own. Errors are ctx's, or wrap
// ErrUnavailable once the Session is closed.
func (s *Session) Swept(ctx context.Context, dir string) error {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return fmt.Errorf("%w: session closed", ErrUnavailable)
		}
		pending := false
		for p := range s.tracked {
			if p.dir == dir {
				pending = true
				break
			}
		}
		changed := s.untracked
		s.mu.Unlock()
		if !pending {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// untrackLocked forgets p and wakes Swept.
func (s *Session) untrackLocked(p *protected) {
	delete(s.tracked, p)
	close(s.untracked)
	s.untracked = make(chan struct{})
}

// sweeper deletes the nodes of settled protected creates whenever the
// session is established: on every HasSession event, when a create
// settles, and after a failed sweep with a bounded backoff. It ends when
// the Session closes (events is closed).
func (s *Session) sweeper(events <-chan zk.Event) {
	defer s.wg.Done()
	failures := 0
	var retry <-chan time.Time
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-s.kick:
		case <-retry:
		}
		retry = nil
		if s.State() != zk.StateHasSession {
			continue // the next HasSession event brings us back
		}
		err := s.sweep()
		if err == nil {
			failures = 0
			continue
		}
		if s.State() != zk.StateHasSession {
			s.log.Debug("protected-node sweep interrupted; retried on reconnect", "err", err)
			continue
		}
		failures++
		if failures >= maxSweepFailures {
			s.log.Error("cannot delete protected nodes of lost creates; closing the session so they go with it",
				"failures", failures, "err", err)
			go s.Close() // Close waits for this goroutine
			return
		}
		s.log.Warn("protected-node sweep failed; retrying", "failures", failures, "err", err)
		retry = time.After(time.Duration(failures) * s.cleanupTimeout() / 4)
	}
}

// sweep lists the directory of every settled protected create, deletes the
// children carrying its GUID and forgets the creates confirmed gone. Each
// request is bounded by the session timeout.
func (s *Session) sweep() error {
	s.mu.Lock()
	byDir := make(map[string][]*protected)
	for p := range s.tracked {
		if p.settled {
			byDir[p.dir] = append(byDir[p.dir], p)
		}
	}
	s.mu.Unlock()

	var errs []error
	for dir, ps := range byDir {
		children, err := bounded(s, func() ([]string, error) {
			c, _, err := s.conn.Children(dir)
			return c, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			children, err = nil, nil // the directory, and our nodes, are gone
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", dir, err))
			continue
		}
	nextCreate:
		for _, p := range ps {
			for _, c := range children {
				if !strings.HasPrefix(c, p.prefix) {
					continue
				}
				path := dir + "/" + c
				_, err := bounded(s, func() (struct{}, error) { return struct{}{}, s.conn.Delete(path, -1) })
				if err != nil && !errors.Is(err, zk.ErrNoNode) {
					errs = append(errs, fmt.Errorf("delete %s: %w", path, err))
					continue nextCreate
				}
				s.log.Info("deleted a protected node whose create outcome was lost", "path", path)
			}
			s.mu.Lock()
			s.untrackLocked(p)
			s.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// Do runs req, a blocking go-zookeeper request, on a goroutine the Session
// waits for at Close, and waits for it or ctx, whichever comes first: the
// library's requests cannot be cancelled and, against a silent server, only
// time out after 2/3 of the session timeout. If ctx wins, the request keeps
// running and late (if non-nil) receives its result, so a create that
// succeeds after its caller gave up can still be undone. Once the Session
// is closed it runs nothing and returns an error wrapping ErrUnavailable.
func Do[T any](ctx context.Context, s *Session, req func() (T, error), late func(T, error)) (T, error) {
	var zero T
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return zero, fmt.Errorf("%w: session closed", ErrUnavailable)
	}
	s.wg.Add(1)
	s.mu.Unlock()
	type result struct {
		v   T
		err error
	}
	var (
		ch     = make(chan result, 1)
		mu     sync.Mutex
		gaveUp bool // the caller returned: the result goes to late
	)
	go func() {
		defer s.wg.Done()
		v, err := req()
		mu.Lock()
		defer mu.Unlock()
		if !gaveUp {
			ch <- result{v, err}
		} else if late != nil {
			late(v, err)
		}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case r := <-ch: // it answered as ctx ended: the caller still gets it
		return r.v, r.err
	default:
	}
	gaveUp = true
	return zero, ctx.Err()
}

// bounded is Do for a cleanup: it waits at most the session timeout, since
// a cleanup must not hang on an unresponsive server.
func bounded[T any](s *Session, req func() (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cleanupTimeout())
	defer cancel()
	return Do(ctx, s, req, nil)
}

// cleanupTimeout bounds each cleanup request: the session timeout, by which
// a live server answers or the library has given the connection up.
func (s *Session) cleanupTimeout() time.Duration {
	if s.timeout <= 0 {
		return 10 * time.Second
	}
	return s.timeout
}
