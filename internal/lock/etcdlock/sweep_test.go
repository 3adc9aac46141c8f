package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"seckill/internal/etcdsess"
	"seckill/internal/lock"
	"seckill/internal/lock/etcdlock"
)

// proxiedLocker is a Locker, like a separate process, whose client reaches
// etcd through p. Its client reconnects quickly once p is restored.
func (c *cluster) proxiedLocker(t *testing.T, p *proxy, ttl time.Duration) *etcdlock.Locker {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{p.addr},
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})},
		Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	m := etcdsess.New(cli, ttl)
	l := etcdlock.New(m, etcdlock.Options{})
	t.Cleanup(func() { _ = l.Close(); _ = m.Close() })
	c.mu.Lock()
	c.clients[l] = cli
	c.mu.Unlock()
	return l
}

// A key whose delete (or enqueue reply) was lost in a network blip shorter
// than the session TTL must not outlive the blip: keep-alives resume, so
// the lease never expires, and a leftover key would hold the smallest
// create revision forever. The fault lasts longer than one cleanup attempt
// (so a single retry is not enough) and shorter than the TTL.
//
// The delete after the blip must happen; the Sweeper's fallback (ending the
// session) comes one TTL after the key was abandoned, so the TTL is that
// must-happen wait's bound and is long: with 10s, a loaded machine's
// reconnect and delete took longer than what was left of it, and the
// fallback ended A's session. B's Acquire returns at the delete, so a long
// TTL costs nothing when the machine is idle.
func TestNoOrphanKeyAfterBlip(t *testing.T) {
	const ttl = 60 * time.Second
	blip := etcdlock.CleanupTimeout + time.Second // the fault's length, not a wait for an event
	c := newCluster(t)

	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, p *proxy, a *etcdlock.Locker, key string) clientv3.LeaseID
	}{{
		// The release's delete never reaches etcd.
		name: "ReleaseCut",
		fault: func(t *testing.T, p *proxy, a *etcdlock.Locker, key string) clientv3.LeaseID {
			le := acquire(t, a, key)
			p.cut()
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			if err := le.Release(ctx); !errors.Is(err, lock.ErrUnavailable) {
				t.Fatalf("Release while cut = %v, want ErrUnavailable", err)
			}
			return etcdlock.LeaseID(le)
		},
	}, {
		// The enqueue Txn is applied but its reply is lost, then the link
		// goes: the acquisition never learns its key's revision.
		name: "EnqueueReplyLost",
		fault: func(t *testing.T, p *proxy, a *etcdlock.Locker, key string) clientv3.LeaseID {
			warm := acquire(t, a, key+"-warm") // the session exists before the fault
			id := etcdlock.LeaseID(warm)
			if err := warm.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			_, rev := c.keys(t, a.KeyPrefix(key))
			p.dropReplies()
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				_, err := a.Acquire(ctx, key)
				done <- err
			}()
			c.waitPut(t, a.KeyPrefix(key), rev) // the put was applied
			p.cut()
			if err := <-done; err == nil {
				t.Fatal("Acquire with its reply lost and the link cut succeeded, want an error")
			}
			return id
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			key := testKey(t)
			p := newProxy(t, c.addr)
			a := c.proxiedLocker(t, p, ttl)
			b := c.locker(t, ttl)
			pfx := a.KeyPrefix(key)

			leaseA := tc.fault(t, p, a, key)
			if ks, _ := c.keys(t, pfx); len(ks) != 1 {
				t.Fatalf("keys under %s during the fault = %v, want A's one leftover", pfx, ks)
			}
			time.Sleep(blip)
			p.restore(t)
			restored := time.Now()

			ctx, cancel := context.WithTimeout(t.Context(), ttl)
			defer cancel()
			lb, err := b.Acquire(ctx, key)
			if err != nil {
				t.Fatalf("B's Acquire %v after the blip: %v (A's key left behind)", ttl, err)
			}
			t.Logf("B acquired %v after the link was restored", time.Since(restored).Round(time.Millisecond))
			// The key was removed, not the session ended: A's lease lives.
			ttlResp, err := c.admin.TimeToLive(t.Context(), leaseA)
			if err != nil {
				t.Fatal(err)
			}
			if ttlResp.TTL <= 0 {
				t.Errorf("A's lease TTL = %d, want alive (the key deleted, not the session ended)", ttlResp.TTL)
			}
			if err := lb.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			c.waitKeys(t, pfx, func(n int) bool { return n == 0 })
		})
	}
}
