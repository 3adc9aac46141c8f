package etcdlock_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"seckill/internal/etcdsess"
	"seckill/internal/lock"
	"seckill/internal/lock/etcdlock"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// cluster is one real etcd plus the clients its lockers were made with, so
// Crash can find the client behind a Locker.
type cluster struct {
	addr  string
	admin *clientv3.Client // plays the operator: inspects keys, revokes leases

	mu      sync.Mutex
	clients map[*etcdlock.Locker]*clientv3.Client
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	c := &cluster{addr: servertest.Etcd(t).Addr(), clients: map[*etcdlock.Locker]*clientv3.Client{}}
	c.admin = servertest.EtcdClient(t, c.addr)
	return c
}

// locker returns a Locker with its own client and session, like a separate
// process. Cleanup closes the Locker, then the Manager (revoking the lease).
func (c *cluster) locker(t testing.TB, ttl time.Duration) *etcdlock.Locker {
	t.Helper()
	return c.lockerWith(t, ttl, etcdlock.Options{})
}

// lockerWith is locker with options.
func (c *cluster) lockerWith(t testing.TB, ttl time.Duration, opts etcdlock.Options) *etcdlock.Locker {
	t.Helper()
	cli := servertest.EtcdClient(t, c.addr)
	m := etcdsess.New(cli, ttl)
	l := etcdlock.New(m, opts)
	t.Cleanup(func() { _ = l.Close(); _ = m.Close() })
	c.mu.Lock()
	c.clients[l] = cli
	c.mu.Unlock()
	return l
}

// crash closes lk's client without revoking its lease: keep-alives stop and
// the lease expires after its TTL, as if the process had died.
func (c *cluster) crash(t testing.TB, lk lock.Locker) {
	t.Helper()
	c.mu.Lock()
	cli := c.clients[lk.(*etcdlock.Locker)]
	c.mu.Unlock()
	if err := cli.Close(); err != nil {
		t.Logf("close client: %v", err)
	}
}

// steal revokes the holder's session lease from another client.
func (c *cluster) steal(t testing.TB, l lock.Lease) {
	t.Helper()
	if _, err := c.admin.Revoke(t.Context(), etcdlock.LeaseID(l)); err != nil {
		t.Fatalf("revoke: %v", err)
	}
}

// keys lists the keys under prefix and the revision they were read at.
func (c *cluster) keys(t testing.TB, prefix string) ([]string, int64) {
	t.Helper()
	resp, err := c.admin.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, kv := range resp.Kvs {
		ks = append(ks, string(kv.Key))
	}
	return ks, resp.Header.Revision
}

// waitKeys waits (on a watch, not a sleep) until the number of keys under
// prefix satisfies ok, and returns them.
func (c *cluster) waitKeys(t testing.TB, prefix string, ok func(n int) bool) []string {
	t.Helper()
	ctx := testwait.Until(t)
	ks, rev := c.keys(t, prefix)
	if ok(len(ks)) {
		return ks
	}
	live := map[string]bool{}
	for _, k := range ks {
		live[k] = true
	}
	for wr := range c.admin.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		for _, ev := range wr.Events {
			live[string(ev.Kv.Key)] = ev.Type == mvccpb.PUT
			if !live[string(ev.Kv.Key)] {
				delete(live, string(ev.Kv.Key))
			}
		}
		if ok(len(live)) {
			ks = ks[:0]
			for k := range live {
				ks = append(ks, k)
			}
			return ks
		}
	}
	t.Fatalf("keys under %s: condition not met (%d live)", prefix, len(live))
	return nil
}

// waitPut waits (on a watch) for a key to be put under prefix after rev:
// a new waiter has queued.
func (c *cluster) waitPut(t testing.TB, prefix string, rev int64) {
	t.Helper()
	ctx := testwait.Until(t)
	for wr := range c.admin.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithFilterDelete()) {
		if len(wr.Events) > 0 {
			return
		}
	}
	t.Fatalf("no key put under %s", prefix)
}

// otherLease returns the lease of the key under prefix that is not mine.
func (c *cluster) otherLease(t testing.TB, prefix, mine string) clientv3.LeaseID {
	t.Helper()
	resp, err := c.admin.Get(t.Context(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if string(kv.Key) != mine {
			return clientv3.LeaseID(kv.Lease)
		}
	}
	t.Fatalf("no key under %s but %s", prefix, mine)
	return 0
}

// acquire takes key on lk, which must become free, or fails the test.
func acquire(t testing.TB, lk *etcdlock.Locker, key string) lock.Lease {
	t.Helper()
	l, err := lk.Acquire(testwait.Until(t), key)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return l
}

func testKey(t testing.TB) string {
	return strings.NewReplacer("/", "-").Replace(t.Name())
}
