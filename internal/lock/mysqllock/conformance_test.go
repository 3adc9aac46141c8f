package mysqllock

import (
	"sync"
	"testing"
	"time"

	"seckill/internal/lock"
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
					return newLocker(t, backend, srv.dsn, Config{Handoffs: k})
				},
				ServerQueued: func(t *testing.T, key string, n int) {
					eventually(t, "a waiter at the server", func() bool { return srv.waiters(t, backend, key) >= n })
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
