package etcdlock

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
	"seckill/internal/testwait"
)

func ownershipOf(le lock.Lease) *ownership {
	h, ok := cohort.HoldOf(le)
	if !ok {
		panic("not an etcdlock lease")
	}
	return h.(*ownership)
}

// ValidUntil is how long le's session lease is known alive in etcd.
func ValidUntil(le lock.Lease) time.Time { return ownershipOf(le).validUntil() }

// EtcdKey is the etcd key that holds the lock for le.
func EtcdKey(le lock.Lease) string { return ownershipOf(le).key }

// LeaseID is the etcd lease le's key is attached to: the session's.
func LeaseID(le lock.Lease) clientv3.LeaseID { return ownershipOf(le).sess.Lease() }

// WaitQueued waits until n goroutines of l are queued locally behind the
// holder of name (they cannot be observed in etcd: only the front of the
// local queue puts a key), and fails the test at its deadline.
func WaitQueued(t testing.TB, l *Locker, name string, n int) {
	t.Helper()
	if err := l.co.WaitQueued(testwait.Until(t), name, n); err != nil {
		t.Fatalf("%d goroutines queued locally for %q, want %d: %v", l.co.Waiting(name), name, n, err)
	}
}

// CleanupTimeout bounds one background attempt at removing a key.
const CleanupTimeout = cleanupTimeout
