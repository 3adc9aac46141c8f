package mysqllock

import (
	"sync"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
	"seckill/internal/lock/locktest"
)

// The contract for both backends against a real MariaDB. Every Locker is a
// "process" of its own, behind its own proxy: Crash freezes the proxy (the
// holder goes silent with its connection open, so the server frees the
// lock only after wait_timeout = TTL), Steal is an operator's KILL
// CONNECTION of the holder's session.
func TestConformance(t *testing.T) {
	srv := newServer(t)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			var proxies sync.Map // *Locker → *proxy
			locktest.Run(t, locktest.Env{
				Exclusive: true,
				Processes: true,
				Expiry:    true,
				TTL:       time.Second, // wait_timeout has whole seconds
				New: func(t *testing.T, opts lock.Options) lock.Locker {
					p := newProxy(t, srv.proc.Addr())
					lk := newLocker(t, backend, dsnVia(p.addr()), Config{TTL: opts.TTL})
					proxies.Store(lk, p)
					return lk
				},
				Crash: func(t *testing.T, lk lock.Locker) {
					p, ok := proxies.Load(lk)
					if !ok {
						t.Fatalf("no proxy for %T", lk)
					}
					p.(*proxy).freeze()
				},
				Steal: func(t *testing.T, l lock.Lease) {
					srv.exec(t, "KILL CONNECTION ?", sessionOf(t, l))
				},
			})
		})
	}
}

// The cohort contract with another process queued at the server (in
// GET_LOCK, or in a row-lock wait): the bound, FIFO order, the token
// layout, and nothing left at the server once idle.
func TestCohort(t *testing.T) {
	srv := newServer(t)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			locktest.RunCohort(t, locktest.Cohort{
				New: func(t *testing.T, k int) lock.Locker {
					if k == 0 {
						// RunCohort's "Default" is the cohort's 8; this
						// package's own default (32) is TestDefaultHandoffs'.
						k = cohort.DefaultHandoffs
					}
					return newLocker(t, backend, srv.dsn, Config{Handoffs: k})
				},
				ServerQueued: func(t *testing.T, key string, n int) {
					eventually(t, "a waiter queued at the server", func() bool { return srv.queued(t, backend, key) >= n })
				},
				Settled: func(t *testing.T, key string) {
					eventually(t, "the lock free and nobody waiting", func() bool {
						return srv.waiters(t, backend, key) == 0 && srv.free(t, backend, key)
					})
				},
			})
		})
	}
}

// The default pass bound is DefaultHandoffs (32), not the cohort's 8: with
// more local waiters than that and another process queued at the server,
// exactly 33 local leases (tokens base<<16 | 0..32) go by before the other
// process gets the lock, with a higher base.
func TestDefaultHandoffs(t *testing.T) {
	srv := newServer(t)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			a := newLocker(t, backend, srv.dsn, Config{})
			b := newLocker(t, backend, srv.dsn, Config{})
			if got := a.Handoffs(); got != DefaultHandoffs {
				t.Fatalf("Handoffs() = %d with Config{}, want %d", got, DefaultHandoffs)
			}
			if got := newLocker(t, backend, srv.dsn, Config{Handoffs: -1}).Handoffs(); got != 0 {
				t.Fatalf("Handoffs() = %d with Config{Handoffs: -1}, want 0 (passing off)", got)
			}
			key := locktest.Key(t)
			first, err := a.Acquire(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			const local = DefaultHandoffs + 4
			type got struct {
				who   string
				token uint64
			}
			var (
				mu    sync.Mutex
				order = []got{{"a", first.Token()}}
				wg    sync.WaitGroup
			)
			hold := func(who string, lk *Locker) {
				l, err := lk.Acquire(t.Context(), key)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock() // inside the critical section: lock order
				order = append(order, got{who, l.Token()})
				mu.Unlock()
				if err := l.Release(t.Context()); err != nil {
					t.Error(err)
				}
			}
			for range local {
				wg.Go(func() { hold("a", a) })
			}
			if err := a.WaitQueued(t.Context(), key, local); err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { hold("b", b) })
			eventually(t, "b queued at the server", func() bool { return srv.queued(t, backend, key) >= 1 })
			if err := first.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			base := first.Token() >> 16
			for i, g := range order[:DefaultHandoffs+1] {
				if g.who != "a" || g.token != base<<16|uint64(i) {
					t.Fatalf("lease %d: %s with token %#x, want a with %#x (a's hold passed %d times)", i, g.who, g.token, base<<16|uint64(i), DefaultHandoffs)
				}
			}
			if g := order[DefaultHandoffs+1]; g.who != "b" || g.token>>16 <= base {
				t.Fatalf("lease %d: %s with token %#x, want b with a base above %#x", DefaultHandoffs+1, g.who, g.token, base)
			}
		})
	}
}
