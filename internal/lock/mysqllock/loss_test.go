package mysqllock

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
	"seckill/internal/testwait"
)

// An operator's KILL CONNECTION of the holder's session frees the lock at
// once; the lease's Done closes within the keep-alive, Err says ErrLost,
// and Release then says ErrNotHeld.
func TestKilledConnectionClosesDone(t *testing.T) {
	// Far longer than the keep-alive: what frees the lock and closes Done
	// must be the kill, and the checks below compare with it.
	const ttl = 30 * time.Second
	srv := newServer(t)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			a := newLocker(t, backend, srv.dsn, Config{TTL: ttl, KeepAlive: 100 * time.Millisecond})
			b := newLocker(t, backend, srv.dsn, Config{})
			key := locktest.Key(t)
			l := locktest.MustAcquire(t, a, key)
			srv.exec(t, "KILL CONNECTION ?", sessionOf(t, l))

			// Free for others at once, before the holder even notices.
			start := time.Now()
			lb := locktest.MustAcquire(t, b, key)
			if took := time.Since(start); took >= ttl {
				t.Fatalf("the other locker got the lock %v after the kill: it waited for the TTL (%v), not the kill", took, ttl)
			}
			// Measured against the TTL, not a number a busy machine can
			// outrun: a keep-alive that did not notice leaves Done open
			// until the lease would end.
			select {
			case <-l.Done():
			case <-testwait.Until(t).Done():
			}
			if took := time.Since(start); took >= ttl {
				t.Fatalf("Done closed %v after the session was killed (keep-alive 100ms): not before the TTL (%v)", took, ttl)
			}
			if err := l.Err(); !errors.Is(err, lock.ErrLost) {
				t.Fatalf("Err() = %v, want ErrLost", err)
			}
			if err := l.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Release of the killed lease = %v, want ErrNotHeld", err)
			}
			if lb.Token() <= l.Token() {
				t.Fatalf("token after the kill %#x, want above the killed holder's %#x", lb.Token(), l.Token())
			}
			if err := lb.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			// The Locker recovers: its next acquisition uses a new session.
			l2 := locktest.MustAcquire(t, a, key)
			if err := l2.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A server restart ends every session: held leases' Done close with
// ErrLost, and after the restart the same Lockers acquire again with
// tokens above every token from before (the counter is an InnoDB row,
// committed before the lease was handed out).
func TestServerRestart(t *testing.T) {
	srv := newServer(t)
	cfg := Config{TTL: 3 * time.Second, KeepAlive: 100 * time.Millisecond}
	lockers := map[string]*Locker{}
	leases := map[string]lock.Lease{}
	key := locktest.Key(t)
	for _, backend := range backends {
		lockers[backend] = newLocker(t, backend, srv.dsn, cfg)
		// Some history, so the counter is well above its first value.
		for range 3 {
			l := locktest.MustAcquire(t, lockers[backend], key)
			if err := l.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		leases[backend] = locktest.MustAcquire(t, lockers[backend], key)
	}
	if err := srv.proc.Restart(testwait.Until(t)); err != nil {
		t.Fatal(err)
	}
	until := testwait.Until(t)
	for _, backend := range backends {
		l := leases[backend]
		select {
		case <-l.Done():
		case <-until.Done():
			t.Fatalf("%s: Done not closed after the server restarted", backend)
		}
		if err := l.Err(); !errors.Is(err, lock.ErrLost) {
			t.Fatalf("%s: Err() = %v, want ErrLost", backend, err)
		}
		after := locktest.MustAcquire(t, lockers[backend], key)
		if after.Token() <= l.Token() {
			t.Fatalf("%s: token after the restart %#x, want above %#x from before", backend, after.Token(), l.Token())
		}
		if err := after.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// A server that stops answering (SIGSTOP: its sockets stay open, like a
// partition) closes the holder's Done within about two keep-alive
// intervals, long before wait_timeout; once it runs again the lock is
// free, because the failed check dropped the session.
func TestSilentServerClosesDone(t *testing.T) {
	// A keep-alive that did not notice leaves Done open until the lease
	// would end, a TTL on: long, so that this cannot pass for a slow
	// machine. Nothing waits for it when the keep-alive notices.
	const ttl = 30 * time.Second
	srv := newServer(t)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			lk := newLocker(t, backend, srv.dsn, Config{TTL: ttl, KeepAlive: 200 * time.Millisecond})
			key := locktest.Key(t)
			l := locktest.MustAcquire(t, lk, key)
			if err := srv.proc.Pause(); err != nil {
				t.Fatal(err)
			}
			paused := time.Now()
			select {
			case <-l.Done():
			case <-testwait.Until(t).Done():
			}
			waited := time.Since(paused)
			if err := srv.proc.Resume(); err != nil {
				t.Fatal(err)
			}
			// How soon is the check: within about two keep-alives, long
			// before wait_timeout (the TTL), which is what it is measured
			// against.
			if waited >= ttl {
				t.Fatalf("Done closed %v into a server pause (keep-alive 200ms): at the end of the lease (TTL %v), not by the keep-alive", waited, ttl)
			}
			if err := l.Err(); !errors.Is(err, lock.ErrLost) {
				t.Fatalf("Err() = %v, want ErrLost", err)
			}
			t.Logf("Done closed %v after the server paused", waited.Round(time.Millisecond))
			other := newLocker(t, backend, srv.dsn, Config{})
			l2 := locktest.MustAcquire(t, other, key)
			if l2.Token() <= l.Token() {
				t.Fatalf("token %#x after the pause, want above %#x", l2.Token(), l.Token())
			}
			_ = l2.Release(t.Context())
			if err := l.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Release of the lost lease = %v, want ErrNotHeld", err)
			}
		})
	}
}

// Release is bounded by CleanupTimeout even with the caller's ctx
// unbounded and the server unreachable: the release is then reported as
// not confirmed (ErrUnavailable), the lease as lost, and the session is
// dropped, which frees the lock once the server sees it (or after TTL).
func TestReleaseBoundedWhenUnreachable(t *testing.T) {
	// The other event that would end a Release the CleanupTimeout did not
	// bound is the keep-alive giving the lease up (its check gets no
	// answer within KeepAlive), which the error check accepts: long, so
	// that a Release that waited for it cannot pass for a slow machine.
	const ttl, keepAlive = 30 * time.Second, 10 * time.Second
	srv := newServer(t)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			p := newProxy(t, srv.proc.Addr())
			lk := newLocker(t, backend, dsnVia(p.addr()), Config{TTL: ttl, KeepAlive: keepAlive, CleanupTimeout: time.Second})
			l := locktest.MustAcquire(t, lk, locktest.Key(t))
			p.freeze()
			res := make(chan error, 1)
			start := time.Now()
			go func() { res <- l.Release(context.Background()) }()
			var err error
			select {
			case err = <-res:
			case <-testwait.Until(t).Done():
				t.Fatalf("Release still running %v after the server became unreachable (CleanupTimeout 1s)", time.Since(start).Round(time.Second))
			}
			took := time.Since(start)
			if took >= keepAlive {
				t.Fatalf("Release took %v: it ended with the keep-alive giving the lease up (every %v), not at CleanupTimeout (1s)", took, keepAlive)
			}
			t.Logf("Release returned %v after the server became unreachable (CleanupTimeout 1s)", took.Round(time.Millisecond))
			if !errors.Is(err, lock.ErrUnavailable) && !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Release = %v, want ErrUnavailable (not confirmed) or ErrNotHeld", err)
			}
			if lerr := l.Err(); !errors.Is(lerr, lock.ErrLost) {
				t.Fatalf("Err() = %v, want ErrLost", lerr)
			}
		})
	}
}
