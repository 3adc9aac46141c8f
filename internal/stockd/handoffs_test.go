package stockd

import (
	"context"
	"sync"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
	"seckill/internal/lock/redissonlock"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// With stock.combine no backend passes a released lock in memory to
// another request of the replica (localHandoffs): the combiner is the
// replica's queue, and passes would keep the lock from the other replicas'
// batches. Without it, the same contention is passed in memory, which is
// what shows the contention below would reveal a pass.
func TestCombiningPassesNoLockInMemory(t *testing.T) {
	rds := servertest.Redis(t)
	cases := []struct {
		backend string
		server  func(t *testing.T, c *Config)
	}{
		{"redis", nil},
		{"redisson", nil},
		{"etcd", func(t *testing.T, c *Config) { c.Etcd.Endpoints = []string{"http://" + servertest.Etcd(t).Addr()} }},
		{"zookeeper", func(t *testing.T, c *Config) { c.ZooKeeper.Servers = []string{servertest.ZooKeeper(t).Addr()} }},
		{"mysql", func(t *testing.T, c *Config) { c.MySQL.DSN = servers.MariaDBDSN(mariadb(t).Addr()) }},
	}
	for _, tc := range cases {
		for _, combine := range []bool{false, true} {
			name := tc.backend + map[bool]string{false: "/per buyer", true: "/combine"}[combine]
			t.Run(name, func(t *testing.T) {
				c := validConfig(t)
				c.Lock.Backend, c.Redis.Addr, c.Lock.TTL = tc.backend, rds.Addr(), 5*time.Second
				c.Stock.Combine = combine
				if tc.server != nil {
					tc.server(t, c)
				}
				lk, _, _ := builtLocker(t, c)
				key := c.Lock.Key + "-handoffs-" + map[bool]string{false: "p", true: "c"}[combine]
				if !combine {
					// Contention until a pass is seen, bounded.
					ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
					defer cancel()
					for passed(lk, contend(ctx, t, lk, key, 30)) == 0 {
						if ctx.Err() != nil {
							t.Fatal("no lease was passed in memory in 30 s of contention: the control shows nothing")
						}
					}
					return
				}
				if n := passed(lk, contend(t.Context(), t, lk, key, 60)); n != 0 {
					t.Fatalf("%d of 60 leases were passed in memory with stock.combine on; want none", n)
				}
			})
		}
	}
}

// contend takes key's lock n times from three goroutines at once, each
// holding it a moment so that the others queue behind it; it returns the
// leases' tokens.
func contend(ctx context.Context, t *testing.T, lk lock.Locker, key string, n int) []uint64 {
	t.Helper()
	var (
		mu     sync.Mutex
		tokens []uint64
		wg     sync.WaitGroup
		errs   = make(chan error, 3)
	)
	for range 3 {
		wg.Go(func() {
			for range n / 3 {
				l, err := lk.Acquire(ctx, key)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // held: the others queue behind it
				if err := l.Release(context.WithoutCancel(ctx)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if ctx.Err() == nil {
			t.Fatal(err)
		}
	}
	return tokens
}

// passed counts the leases passed in memory: the cohort's token counts a
// hold's passes in its low bits; redisson mints a token per lease, and
// counts its passes itself.
func passed(lk lock.Locker, tokens []uint64) uint64 {
	if r, ok := lk.(*redissonlock.Locker); ok {
		return r.Stats().Handoffs
	}
	var n uint64
	for _, tk := range tokens {
		if tk&(1<<cohort.PassBits-1) != 0 {
			n++
		}
	}
	return n
}
