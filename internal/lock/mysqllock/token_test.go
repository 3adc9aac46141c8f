package mysqllock

import (
	"strings"
	"sync"
	"testing"

	"seckill/internal/lock/locktest"
	"seckill/internal/testwait"
)

// Tokens grow strictly in lock order across two processes (Lockers with
// their own sessions) with several goroutines each, cohort passes and
// server acquisitions mixed, on a key longer than a GET_LOCK name may be.
func TestTokensStrictlyIncreaseAcrossProcesses(t *testing.T) {
	srv := newServer(t)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			procs := []*Locker{
				newLocker(t, backend, srv.dsn, Config{Handoffs: 2}),
				newLocker(t, backend, srv.dsn, Config{Handoffs: 2}),
			}
			key := locktest.Key(t) + "/" + strings.Repeat("k", 100)
			var (
				mu     sync.Mutex
				tokens []uint64
				wg     sync.WaitGroup
			)
			until := testwait.Until(t)
			for g := range 8 {
				wg.Go(func() {
					for range 10 {
						l, err := procs[g%2].Acquire(until, key)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock() // inside the critical section: lock order
						tokens = append(tokens, l.Token())
						mu.Unlock()
						if err := l.Release(t.Context()); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if len(tokens) != 80 {
				t.Fatalf("%d acquisitions, want 80", len(tokens))
			}
			servers := 0
			for i := 1; i < len(tokens); i++ {
				if tokens[i] <= tokens[i-1] {
					t.Fatalf("acquisition %d: token %#x after %#x, want strictly greater", i, tokens[i], tokens[i-1])
				}
				if tokens[i]>>16 != tokens[i-1]>>16 {
					servers++
				}
			}
			if servers < 80/3-1 {
				t.Fatalf("%d server acquisitions for 80 leases with 2 passes per hold, want at least %d", servers, 80/3-1)
			}
		})
	}
}

// AdvanceTokens moves the counter past a fence's high-water mark (a
// database recreated empty hands out small tokens again); it never moves
// it back.
func TestAdvanceTokens(t *testing.T) {
	srv := newServer(t)
	lk := newLocker(t, BackendGetLock, srv.dsn, Config{})
	key := locktest.Key(t)
	l := locktest.MustAcquire(t, lk, key)
	first := l.Token()
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The database is recreated: the counter row is gone.
	srv.exec(t, "DELETE FROM "+tokenTable+" WHERE name = ?", LockName(key))
	l = locktest.MustAcquire(t, lk, key)
	if l.Token() > first {
		t.Fatalf("token %#x after the counter was deleted, want it back at the start (≤ %#x)", l.Token(), first)
	}
	_ = l.Release(t.Context())

	fence := uint64(1000)<<16 | 7
	if err := lk.AdvanceTokens(t.Context(), key, fence); err != nil {
		t.Fatal(err)
	}
	if err := lk.AdvanceTokens(t.Context(), key, 5<<16); err != nil { // stale: no effect
		t.Fatal(err)
	}
	l = locktest.MustAcquire(t, lk, key)
	if l.Token() <= fence {
		t.Fatalf("token %#x after AdvanceTokens(%#x), want above it", l.Token(), fence)
	}
	_ = l.Release(t.Context())
}

// Tokens are committed before the lease is handed out, whatever the DSN
// says about autocommit: another session sees every mint at once.
func TestMintsCommitDespiteDSN(t *testing.T) {
	srv := newServer(t)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			lk := newLocker(t, backend, srv.dsn+"?autocommit=0", Config{})
			key := locktest.Key(t)
			for i := 1; i <= 3; i++ {
				l := locktest.MustAcquire(t, lk, key)
				got := srv.count(t, "SELECT COALESCE(MAX(token), 0) FROM "+tokenTable+" WHERE name = ?", LockName(key))
				if got != i || l.Token()>>16 != uint64(i) {
					t.Fatalf("acquisition %d: committed counter %d, lease base %d; want both %d", i, got, l.Token()>>16, i)
				}
				if err := l.Release(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
