package etcdlock

import (
	"testing"
	"time"
)

// ValidUntil is how long le's session lease is known alive in etcd.
func ValidUntil(le *Lease) time.Time { return le.own.validUntil() }

// WaitQueued waits until n goroutines of l are queued locally behind the
// holder of name (they cannot be observed in etcd: only the head of the
// local queue puts a key). It polls the queue under the Locker's mutex
// until the condition holds, and fails the test after 10s.
func WaitQueued(t testing.TB, l *Locker, name string, n int) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		got := 0
		if s := l.slots[name]; s != nil {
			got = len(s.waiters)
		}
		l.mu.Unlock()
		if got == n {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d goroutines queued locally for %q after 10s, want %d", got, name, n)
		}
	}
}

// CleanupTimeout bounds one background attempt at removing a key.
const CleanupTimeout = cleanupTimeout
