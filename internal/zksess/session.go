// Package zksess owns the one ZooKeeper connection of a seckill process and
// shares it between the users that borrow it: the zookeeper lock backend
// (internal/lock/zklock) and the leader election. It plays the role etcd's
// concurrency.Session plays for etcdlock: the lifetime lives here, the
// recipes only borrow it.
//
// go-zookeeper reports session state changes on a single channel returned by
// zk.Connect, which it silently drops events into when nobody reads fast
// enough. A Session instead takes every event through the library's event
// callback and fans the session-state ones out to any number of subscribers
// (see Subscribe), without ever blocking the library's connection goroutine.
//
// State vocabulary, as in Curator: StateHasSession is CONNECTED; a
// StateDisconnected while the session may still be alive on the server is
// SUSPENDED (ephemeral nodes still exist, but nobody can tell for how long);
// StateExpired is LOST (the server has deleted every ephemeral node of the old
// session; go-zookeeper then opens a new session by itself, with a new
// SessionID).
package zksess

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// ErrUnavailable is returned when no ZooKeeper session could be established
// (or the Session was closed). zklock wraps it together with
// lock.ErrUnavailable.
var ErrUnavailable = errors.New("zksess: zookeeper unavailable")

// Session is one ZooKeeper connection and its session, shared by every
// recipe of a process. It is safe for concurrent use.
type Session struct {
	conn    *zk.Conn
	timeout time.Duration
	log     *slog.Logger
	state   func() zk.State // the connection's state; a seam for tests

	mu        sync.Mutex
	subs      map[*subscriber]struct{}
	closed    bool
	expiries  uint64                  // StateExpired events seen
	tracked   map[*protected]struct{} // protected creates whose node may be unowned (protected.go)
	untracked chan struct{}           // closed (and replaced) when one leaves tracked

	kick chan struct{}  // wakes the sweeper when a protected create settles
	wg   sync.WaitGroup // the sweeper and request goroutines; Close waits

	last    zk.State    // previous state, for logging; only onEvent touches it
	closing atomic.Bool // Close has begun: the coming disconnect is expected

	closeOnce sync.Once
	loopDone  chan struct{} // closed when go-zookeeper's connection goroutine has exited
}

// Dial connects to the ZooKeeper ensemble and waits, bounded by ctx, until a
// session is established (zk.StateHasSession). sessionTimeout is what the
// client asks for; the server clamps it to its own min/max bounds (with the
// test servers' tickTime of 200ms: 400ms to 60s).
//
// The library's own logging is routed to slog.Default at Debug level (it
// logs every reconnection attempt); the Session logs state transitions at
// Info and Warn. If ctx ends first, the half-open connection is closed and
// the error wraps both ErrUnavailable and ctx.Err().
func Dial(ctx context.Context, servers []string, sessionTimeout time.Duration) (*Session, error) {
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: no servers given", ErrUnavailable)
	}
	s := &Session{
		timeout:   sessionTimeout,
		log:       slog.Default().With("component", "zookeeper"),
		subs:      make(map[*subscriber]struct{}),
		tracked:   make(map[*protected]struct{}),
		untracked: make(chan struct{}),
		kick:      make(chan struct{}, 1),
		loopDone:  make(chan struct{}),
	}
	// Subscribe before Connect so the first HasSession cannot be missed.
	events, cancel := s.subscribe(func() zk.State { return zk.StateDisconnected })
	defer cancel()

	conn, libEvents, err := zk.Connect(servers, sessionTimeout,
		zk.WithLogger(slogPrintf{s.log}),
		zk.WithLogInfo(false),
		zk.WithEventCallback(s.onEvent),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	s.conn = conn
	s.state = conn.State
	// The library closes its own event channel when its connection goroutine
	// exits; draining it keeps it from filling and tells Close when the
	// library is really finished. Events themselves arrive via onEvent.
	go func() {
		for range libEvents {
		}
		close(s.loopDone)
	}()

	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				sweeps, _ := s.Subscribe()
				s.mu.Lock()
				if !s.closed {
					s.wg.Add(1)
					go s.sweeper(sweeps)
				}
				s.mu.Unlock()
				return s, nil
			}
		case <-ctx.Done():
			s.Close()
			return nil, fmt.Errorf("%w: no session with %v: %w", ErrUnavailable, servers, ctx.Err())
		}
	}
}

// Conn is the underlying connection, for recipes that issue their own
// requests. Do not Close it; close the Session.
func (s *Session) Conn() *zk.Conn { return s.conn }

// State is the connection's current state. zk.StateHasSession means
// requests can be served; anything else means the session is suspended,
// lost or closed.
func (s *Session) State() zk.State { return s.state() }

// SessionID is the id of the current ZooKeeper session, 0 while none is
// established. It changes after an expiry: go-zookeeper silently opens a new
// session, and ephemeral nodes of the old one are gone.
func (s *Session) SessionID() int64 { return s.conn.SessionID() }

// Timeout is the session timeout asked for in Dial.
func (s *Session) Timeout() time.Duration { return s.timeout }

// Close ends the session gracefully: the server deletes its ephemeral nodes
// at once (so locks and leadership are free immediately, without waiting for
// the session timeout), the library's goroutines and the Session's sweeper
// stop and every subscriber's channel is closed. Close is idempotent. It waits for the library's
// connection goroutine, which is bounded by the library's own timeouts
// (about 2/3 of the session timeout when the server does not answer).
func (s *Session) Close() {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		s.conn.Close()
		<-s.loopDone
		s.mu.Lock()
		s.closed = true
		close(s.untracked) // Swept waiters see closed
		s.untracked = make(chan struct{})
		for sub := range s.subs {
			close(sub.ch)
			delete(s.subs, sub)
		}
		s.mu.Unlock()
		s.wg.Wait() // the sweeper ends with its subscription, requests with the conn
		s.log.Debug("zookeeper session closed")
	})
}

// slogPrintf adapts slog to go-zookeeper's Printf-style Logger. The library
// logs every failed reconnection attempt, so its lines go to Debug; the
// Session's own state-transition logs carry the operator-facing news.
type slogPrintf struct{ log *slog.Logger }

func (l slogPrintf) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "source", "go-zookeeper")
}
