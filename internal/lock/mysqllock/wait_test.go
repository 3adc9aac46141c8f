package mysqllock

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
)

// A wait that ends by cancellation or deadline returns at once and leaves
// nothing at the server: no session still waiting in GET_LOCK or in a row
// lock wait, and so, when the holder releases, nobody gets the lock. The
// slice is 30s, so a server-side wait that outlived its caller would
// still be there; only the KILL QUERY ends it in time. For mysql-row this
// is also "innodb_lock_wait_timeout (30s) is bounded by the request".
func TestCancelledAcquireLeavesNoLock(t *testing.T) {
	// The slice is what a wait the KILL missed would last: long, so that
	// one cannot pass for a slow machine. Nothing waits for it when the
	// KILL lands.
	const slice = 30 * time.Second
	srv := newServer(t)
	for _, backend := range backends {
		for _, how := range []string{"cancel", "deadline"} {
			t.Run(backend+"/"+how, func(t *testing.T) {
				cfg := Config{WaitSlice: slice}
				holder := newLocker(t, backend, srv.dsn, cfg)
				waiter := newLocker(t, backend, srv.dsn, cfg)
				key := locktest.Key(t)
				held := locktest.MustAcquire(t, holder, key)

				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				want := context.Canceled
				if how == "deadline" {
					ctx, cancel = context.WithTimeout(t.Context(), 500*time.Millisecond)
					defer cancel()
					want = context.DeadlineExceeded
				}
				type result struct {
					err     error
					elapsed time.Duration
				}
				res := make(chan result, 1)
				start := time.Now()
				go func() {
					l, err := waiter.Acquire(ctx, key)
					if err == nil {
						_ = l.Release(context.Background())
					}
					res <- result{err, time.Since(start)}
				}()
				eventually(t, "the waiter queued at the server", func() bool { return srv.queued(t, backend, key) == 1 })
				if how == "cancel" {
					cancel()
				}
				r := <-res
				if !errors.Is(r.err, lock.ErrNotObtained) || !errors.Is(r.err, want) {
					t.Fatalf("Acquire = %v, want ErrNotObtained wrapping %v", r.err, want)
				}
				if r.elapsed >= slice {
					t.Fatalf("Acquire returned after %v: at the end of its server-side wait (slice %v), not at the %s", r.elapsed, slice, how)
				}
				// The server may show the statement for a moment after its
				// reply; a wait that lived on would stay until its slice
				// ended, a slice after it began (after start).
				eventually(t, "no session waiting at the server", func() bool { return srv.waiters(t, backend, key) == 0 })
				if since := time.Since(start); since >= slice {
					t.Fatalf("a session waited at the server %v after Acquire began: until its slice (%v) ended, not ended with the Acquire", since, slice)
				}
				if err := held.Release(t.Context()); err != nil {
					t.Fatal(err)
				}
				if !srv.free(t, backend, key) {
					t.Fatal("lock taken right after the holder's release: the cancelled wait lived on at the server")
				}
			})
		}
	}
}

// With the server out of reach (the waiter's link frozen mid-wait, so its
// KILL QUERY cannot arrive either), Acquire still returns about at its
// deadline: killGrace after it, the connection is dropped, instead of
// waiting out the KILL's own CleanupTimeout (3s here). Close then returns
// within about CleanupTimeout, the KILL's bound. CleanupTimeout is not
// raised to widen the first contrast: Close waits for it by design.
func TestUnreachableAcquireReturnsAtDeadline(t *testing.T) {
	srv := newServer(t)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			holder := newLocker(t, backend, srv.dsn, Config{})
			p := newProxy(t, srv.proc.Addr())
			cfg := Config{DSN: dsnVia(p.addr()), WaitSlice: 10 * time.Second, CleanupTimeout: 3 * time.Second}
			open := New
			if backend == BackendRow {
				open = NewRow
			}
			waiter, err := open(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			key := locktest.Key(t)
			held := locktest.MustAcquire(t, holder, key)
			defer held.Release(context.Background())

			const deadline = time.Second
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			res := make(chan error, 1)
			start := time.Now()
			go func() {
				l, err := waiter.Acquire(ctx, key)
				if err == nil {
					_ = l.Release(context.Background())
				}
				res <- err
			}()
			eventually(t, "the waiter queued at the server", func() bool { return srv.queued(t, backend, key) == 1 })
			p.freeze()
			err = <-res
			elapsed := time.Since(start)
			if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Acquire = %v, want ErrNotObtained wrapping DeadlineExceeded", err)
			}
			// Measured against the KILL's CleanupTimeout, the wait this
			// drop cuts short: killGrace (0.5s) after the deadline when
			// it works, CleanupTimeout (3s) after it when it does not.
			if late := elapsed - deadline; late >= cfg.CleanupTimeout {
				t.Fatalf("Acquire returned %v after its %v deadline: it waited out the KILL's CleanupTimeout (%v), not killGrace (%v)", late, deadline, cfg.CleanupTimeout, killGrace)
			}
			t.Logf("Acquire returned %v after its deadline (killGrace %v)", (elapsed - deadline).Round(time.Millisecond), killGrace)
			// Close waits for the KILL still on its way, which nothing but
			// its CleanupTimeout ends: a Close without that bound would
			// hang the test binary. How long it took is noted.
			start = time.Now()
			_ = waiter.Close()
			took := time.Since(start)
			note := ""
			if took > 5*time.Second {
				note = " (SLOW)"
			}
			t.Logf("Close took %v with the server unreachable (CleanupTimeout %v)%s", took.Round(time.Millisecond), cfg.CleanupTimeout, note)
		})
	}
}
