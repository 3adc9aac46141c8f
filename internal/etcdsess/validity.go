package etcdsess

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// A session's validity, timed from the client's side of the wire.
//
// concurrency.Session's keep-alive counts the lease's deadline from when a
// keep-alive reply ARRIVED, and checks it about every 500ms, so Session.Done
// can close up to TTL/3 + 0.5s after etcd has already expired the lease (a
// reply's TTL was granted when the request reached etcd, which may be long
// before it arrived here). A borrower that acts on "the session is alive"
// without a round trip (etcdlock's in-memory hand-over) needs a bound that
// never runs late: the lease lives at least TTL from when etcd received a
// keep-alive, which is after we SENT it. So each session gets a pinger that
// sends its own keep-alive (KeepAliveOnce) every TTL/3 and records the send
// time of the last one whose reply confirmed the lease alive; ValidUntil is
// that send time plus the granted TTL, minus a margin for the two clocks
// running at slightly different rates. The session's own keep-alive goes on
// as before: the pings only add a renewal every TTL/3.

// driftMargin is taken off every validity for clock-rate drift between this
// process and etcd: TTL/100 (1%), at least 10ms.
func driftMargin(ttl time.Duration) time.Duration {
	return max(ttl/100, 10*time.Millisecond)
}

// validUntil is the end of a lease's validity proven by a request sent at
// sent whose reply granted ttl (etcd counts ttl from when it received it).
func validUntil(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - driftMargin(ttl))
}

// validity is one session's proven lifetime.
type validity struct {
	mu    sync.Mutex
	until time.Time
}

func (v *validity) get() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.until
}

// extend moves the validity to t unless it already ends later (a reply to
// an older request can never shorten it).
func (v *validity) extend(t time.Time) {
	v.mu.Lock()
	if t.After(v.until) {
		v.until = t
	}
	v.mu.Unlock()
}

// ValidUntil returns the instant until which s's lease is known to be alive
// in etcd: the send time of the last grant or keep-alive that etcd answered
// with TTL>0, plus that TTL, minus a margin for clock-rate drift. Past it the
// lease may have expired (and the keys on it gone) although s.Done has not
// closed yet. The zero time for a session that is over or was not made by
// this Manager.
func (m *Manager) ValidUntil(s *concurrency.Session) time.Time {
	select {
	case <-s.Done():
		return time.Time{}
	default:
	}
	if v, ok := m.valid.Load(s); ok {
		return v.(*validity).get()
	}
	return time.Time{}
}

// ping keeps s's validity moving: every TTL/3 it sends one keep-alive and,
// when etcd answers that the lease lives, extends the validity from the
// send time. It returns when s is done or the Manager closes; the validity
// is forgotten then (ValidUntil reports the zero time).
func (m *Manager) ping(s *concurrency.Session, v *validity) {
	defer m.pingers.Done()
	defer m.valid.Delete(s)
	every := time.Duration(m.ttl) * time.Second / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-s.Done():
			return
		case <-m.pings.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(m.pings, every)
		sent := time.Now()
		resp, err := m.cli.KeepAliveOnce(ctx, s.Lease())
		cancel()
		switch {
		case err == nil && resp.TTL > 0:
			v.extend(validUntil(sent, time.Duration(resp.TTL)*time.Second))
		case isLeaseGone(err):
			// Expired or revoked: the validity lapses by itself and the
			// session's keep-alive closes s.Done soon.
			m.log.Debug("keep-alive: lease gone", "lease", leaseHex(s.Lease()))
			return
		default:
			m.log.Debug("keep-alive ping failed", "lease", leaseHex(s.Lease()), "err", err, "valid_for", time.Until(v.get()))
		}
	}
}

// track starts timing s's validity from the grant that created its lease.
// After Close it does nothing: s is revoked by Session, and Close's wait
// for the pingers must not race a new one.
func (m *Manager) track(s *concurrency.Session, sent time.Time, granted time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	v := &validity{until: validUntil(sent, granted)}
	m.valid.Store(s, v)
	m.pingers.Add(1)
	go m.ping(s, v)
}

func isLeaseGone(err error) bool { return errors.Is(err, rpctypes.ErrLeaseNotFound) }

func leaseHex(id clientv3.LeaseID) string { return fmt.Sprintf("%x", int64(id)) }
