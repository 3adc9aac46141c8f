// Package etcdsess keeps one etcd session (a kept-alive lease) per process and
// replaces it when it expires.
//
// It follows the design of etcd's concurrency package: the lifetime (a
// *concurrency.Session) lives apart from the things that borrow it — the
// distributed lock (etcdlock) and the leader election. Every key they write is
// attached to the session's lease, so when the process dies, stalls or loses
// etcd for longer than the TTL, the lease expires and etcd deletes those keys:
// the locks are freed and leadership moves on.
//
// A session that expired is never revived (its keys are gone, and with them
// the locks and leadership that were built on it). Borrowers watch
// Session.Done to learn that, and the next call to Manager.Session grants a
// fresh lease.
//
// A borrower's put or delete whose reply was lost may or may not have been
// applied, and the session usually lives on: the Sweeper (NewSweeper)
// removes such keys, or ends their session, as zksess does for ZooKeeper's
// protected nodes.
package etcdsess

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// DefaultTTL is the session TTL used when New is given zero or less.
const DefaultTTL = 10 * time.Second

var (
	// ErrUnavailable: etcd could not be reached (or refused the request) while
	// granting a session lease. The error also wraps the underlying cause,
	// e.g. context.DeadlineExceeded when the server never answered.
	ErrUnavailable = errors.New("etcdsess: etcd unavailable")

	// ErrClosed: the Manager was closed.
	ErrClosed = errors.New("etcdsess: manager closed")
)

// Manager hands out the process's current etcd session, creating a new one
// when there is none or the previous one is done. It is safe for concurrent
// use. The Manager borrows the client: Close ends the session, not the client.
type Manager struct {
	cli *clientv3.Client
	ttl int // seconds, as etcd leases count them

	// life bounds every session's keep-alive; cancelled by Close after the
	// current lease has been revoked (Session.Close revokes under this ctx).
	life   context.Context
	cancel context.CancelFunc
	// pings bounds the validity pingers (validity.go). Close ends them
	// first: a keep-alive to an unreachable etcd retries until its context
	// ends, and a shutdown must not wait for it after the revoke.
	pings     context.Context
	stopPings context.CancelFunc
	log       *slog.Logger

	valid   sync.Map       // *concurrency.Session → *validity, while it pings
	pingers sync.WaitGroup // one per session; Close waits for them

	mu       sync.Mutex
	cur      *concurrency.Session
	creating chan struct{} // non-nil while one caller grants a new lease
	closed   bool
}

// New returns a Manager for cli whose sessions use ttl. Zero or less means
// DefaultTTL (10s). etcd leases count whole seconds, so ttl is rounded up to
// the next second (300ms becomes 1s): a session never lives shorter than asked.
func New(cli *clientv3.Client, ttl time.Duration) *Manager {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	secs := int((ttl + time.Second - 1) / time.Second)
	life, cancel := context.WithCancel(context.Background())
	pings, stopPings := context.WithCancel(context.Background())
	return &Manager{
		cli:       cli,
		ttl:       secs,
		life:      life,
		cancel:    cancel,
		pings:     pings,
		stopPings: stopPings,
		log:       slog.Default().With("component", "etcdsess"),
	}
}

// Client returns the etcd client sessions are created on.
func (m *Manager) Client() *clientv3.Client { return m.cli }

// TTL returns the session TTL after rounding to whole seconds.
func (m *Manager) TTL() time.Duration { return time.Duration(m.ttl) * time.Second }

// Session returns the live session, granting a new lease if there is none or
// the previous session is done (lease expired, revoked, or keep-alive lost).
// Concurrent callers share one grant. ctx bounds only the wait for the grant;
// the session itself lives until it expires or the Manager is closed.
//
// Errors wrap ErrUnavailable (etcd unreachable or failing, including a ctx
// that ended while the grant was in flight) or ErrClosed.
func (m *Manager) Session(ctx context.Context) (*concurrency.Session, error) {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, ErrClosed
		}
		if s := m.cur; s != nil && !isDone(s) {
			m.mu.Unlock()
			return s, nil
		}
		if wait := m.creating; wait != nil {
			m.mu.Unlock()
			// Another caller is granting; its result (or failure) is what
			// we wait for, then look again.
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: waiting for a session: %w", ErrUnavailable, ctx.Err())
			}
		}
		done := make(chan struct{})
		m.creating = done
		m.mu.Unlock()

		s, err := m.grant(ctx)

		m.mu.Lock()
		m.creating = nil
		close(done)
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		if m.closed {
			// Close ran while we were granting: nobody will ever close
			// this session, so revoke it now rather than leak the lease.
			m.mu.Unlock()
			_ = m.closeSession(s)
			return nil, ErrClosed
		}
		m.cur = s
		m.mu.Unlock()
		m.log.Debug("etcd session started", "lease", fmt.Sprintf("%x", int64(s.Lease())), "ttl_s", m.ttl)
		return s, nil
	}
}

// grant creates the lease under the caller's ctx, then attaches the
// keep-alive to the Manager's lifetime. concurrency.NewSession alone would
// tie both to one context: the caller's (the session would die with the
// request that happened to create it) or the Manager's (the grant could not
// be cancelled by the caller).
func (m *Manager) grant(ctx context.Context) (*concurrency.Session, error) {
	sent := time.Now()
	resp, err := m.cli.Grant(ctx, int64(m.ttl))
	if err != nil {
		return nil, fmt.Errorf("%w: grant lease: %w", ErrUnavailable, err)
	}
	s, err := concurrency.NewSession(m.cli,
		concurrency.WithLease(resp.ID),
		concurrency.WithTTL(m.ttl),
		concurrency.WithContext(m.life))
	if err != nil {
		// The lease exists but nobody keeps it alive; it expires by itself.
		return nil, fmt.Errorf("%w: keep lease alive: %w", ErrUnavailable, err)
	}
	// etcd may grant more than asked (its minimum lease TTL), never less.
	m.track(s, sent, time.Duration(resp.TTL)*time.Second)
	return s, nil
}

// Close closes the current session — revoking its lease, so the locks and
// leadership held through it are freed at once instead of after the TTL —
// and stops all keep-alives. Later calls to Session return ErrClosed. Close
// waits for the revoke at most 1s (etcd unreachable: the lease then expires
// on its own within one TTL). It returns the revoke's error, wrapping
// ErrUnavailable.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	s := m.cur
	m.cur = nil
	m.mu.Unlock()

	m.stopPings()
	var err error
	if s != nil && !isDone(s) {
		err = m.closeSession(s)
	}
	m.cancel()
	m.pingers.Wait()
	return err
}

// End ends s at once, for a borrower that cannot otherwise make sure a key
// it wrote on s goes away (etcd did not confirm the delete): s's keep-alive
// stops — so its lease, and every key on it, expires within one TTL even
// if etcd cannot be reached — and the lease is revoked under ctx, which
// frees the keys at once when etcd answers. Every lock and leadership held
// through s is lost (s.Done closes); the next call to Session grants a new
// lease. The error wraps ErrUnavailable when the revoke did not get
// through; s is over either way.
func (m *Manager) End(ctx context.Context, s *concurrency.Session) error {
	m.mu.Lock()
	if m.cur == s {
		m.cur = nil
	}
	m.mu.Unlock()
	s.Orphan() // stops the keep-alive and waits for it: s.Done is closed
	if _, err := m.cli.Revoke(ctx, s.Lease()); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("%w: revoke lease %x: %w", ErrUnavailable, int64(s.Lease()), err)
	}
	m.log.Warn("etcd session ended by a borrower", "lease", fmt.Sprintf("%x", int64(s.Lease())))
	return nil
}

// Gone records that etcd refused a request on s because its lease no
// longer exists (rpctypes.ErrLeaseNotFound: it expired while this process
// was paused or cut off, or it was revoked), which s's own keep-alive may
// take up to TTL/3 more to notice. s ends now: its keep-alive stops and
// s.Done closes, so every hold on it is lost at once, and the next call to
// Session grants a new lease instead of handing out the dead one again (a
// borrower waiting for its turn would otherwise fail on it in a loop). A
// session that is not the current one, or over already, is left as is
// apart from stopping its keep-alive.
func (m *Manager) Gone(s *concurrency.Session) {
	m.mu.Lock()
	if m.cur == s {
		m.cur = nil
	}
	m.mu.Unlock()
	if !isDone(s) {
		m.log.Warn("etcd session lease gone; a new one is granted on next use", "lease", leaseHex(s.Lease()))
	}
	s.Orphan() // closes s.Done; the lease is gone in etcd already
}

// closeTimeout bounds the revoke in Close: a courtesy that frees the locks
// at once instead of after the TTL, which must never hold a process's exit
// up for a whole (default 10s) TTL when etcd is unreachable.
const closeTimeout = time.Second

func (m *Manager) closeSession(s *concurrency.Session) error {
	// Not Session.Close: that revokes under a TTL-long deadline.
	s.Orphan() // stops the keep-alive: the lease expires within one TTL anyway
	ctx, cancel := context.WithTimeout(context.Background(), min(closeTimeout, m.TTL()))
	defer cancel()
	if _, err := m.cli.Revoke(ctx, s.Lease()); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("%w: revoke lease %x: %w", ErrUnavailable, int64(s.Lease()), err)
	}
	return nil
}

func isDone(s *concurrency.Session) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}
