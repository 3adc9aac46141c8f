package redissonlock

import (
	"errors"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
)

// The watchdog keeps a lock far past its TTL.
func TestWatchdogKeepsLock(t *testing.T) {
	// Long enough that a busy machine delays a renewal (every watchdog/3)
	// without letting the lease lapse: the lease runs against the clock,
	// and a 300ms one lapsed under load.
	const watchdog = 2 * time.Second
	addr := startRedis(t)
	rdb := newClient(t, addr)
	holder := newLocker(t, addr, Options{Watchdog: watchdog})
	other := newLocker(t, addr, Options{Watchdog: watchdog})
	key := locktest.Key(t)

	l := mustAcquire(t, holder, key)
	mustNotAcquire(t, other, key, 3*watchdog) // holding 3× the TTL is the point
	pttl, err := rdb.PTTL(t.Context(), key).Result()
	if err != nil || pttl <= 0 || pttl > watchdog {
		t.Fatalf("PTTL after 3×watchdog = %v, %v; want in (0, %v]", pttl, err, watchdog)
	}
	if !isOpen(l) {
		t.Fatalf("Done closed while the watchdog renewed: %v", l.Err())
	}
	if got := holder.Stats().Renewals; got < 2 {
		t.Fatalf("Renewals = %d over 3×watchdog, want ≥ 2", got)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	renewals := holder.Stats().Renewals
	// The watchdog stops with the final release: no renewal re-creates the key
	// and the counter stays put over another renewal period.
	mustAcquireAtOnce(t, other, key).Release(t.Context())
	if got := holder.Stats().Renewals; got != renewals {
		t.Fatalf("Renewals went %d → %d after Release, want the watchdog stopped", renewals, got)
	}
}

// With an explicit LeaseTime nothing renews: the lock expires and Done
// closes at that moment.
func TestLeaseTimeExpires(t *testing.T) {
	const lease = 400 * time.Millisecond
	addr := startRedis(t)
	rdb := newClient(t, addr)
	holder := newLocker(t, addr, Options{Watchdog: 100 * time.Millisecond, LeaseTime: lease})
	other := newLocker(t, addr, Options{})
	key := locktest.Key(t)

	start := time.Now()
	l := mustAcquire(t, holder, key)
	// The server's TTL is the lease time, neither the watchdog nor longer:
	// the key expires on the server when the lease does.
	if pttl, err := rdb.PTTL(t.Context(), key).Result(); err != nil || pttl <= 100*time.Millisecond || pttl > lease {
		t.Fatalf("PTTL = %v, %v; want the lease time %v, not the watchdog or longer", pttl, err, lease)
	}
	waitDone(t, l)
	if held := time.Since(start); held < lease-50*time.Millisecond {
		t.Fatalf("Done closed after %v, want about the lease time %v", held, lease)
	}
	if err := l.Err(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Err() = %v, want ErrLost", err)
	}
	if got := holder.Stats().Renewals; got != 0 {
		t.Fatalf("Renewals = %d, want 0 with a LeaseTime", got)
	}
	// Expired on the server too (its TTL was the lease's, checked above,
	// and nothing renewed it): another locker takes it, within the slack
	// of one round trip, which is noted. The key may outlive Done by that
	// slack, so its first acquire script may find it still there.
	doneAt := time.Now()
	l2 := mustAcquire(t, other, key)
	defer l2.Release(t.Context())
	took := time.Since(doneAt)
	note := ""
	if took > time.Second {
		note = " (SLOW)"
	}
	t.Logf("another locker took the expired lock %v after Done closed%s", took.Round(time.Millisecond), note)
	if err := l.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release after expiry = %v, want ErrNotHeld", err)
	}
	if n, _ := rdb.Exists(t.Context(), key).Result(); n != 1 {
		t.Fatalf("EXISTS = %d, want 1: a stale Release must not free the new holder's lock", n)
	}
}

// A re-entry with a LeaseTime restarts the lease, locally and on the server.
func TestLeaseTimeReentryExtends(t *testing.T) {
	const lease = 400 * time.Millisecond
	addr := startRedis(t)
	holder := newLocker(t, addr, Options{LeaseTime: lease})
	key := locktest.Key(t)

	l := mustAcquire(t, holder, key)
	time.Sleep(lease / 2) // let half the lease pass before re-entering; nothing to wait for
	extended := time.Now()
	if err := l.Reacquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitDone(t, l)
	if since := time.Since(extended); since < lease-50*time.Millisecond {
		t.Fatalf("Done closed %v after the re-entry, want about %v", since, lease)
	}
}
