package etcdsess_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"seckill/internal/etcdsess"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// commitKV tells, on commits, when a Txn sent through it has been answered.
type commitKV struct {
	clientv3.KV
	commits chan error
}

func (kv commitKV) Txn(ctx context.Context) clientv3.Txn {
	return commitTxn{kv.KV.Txn(ctx), kv.commits}
}

type commitTxn struct {
	clientv3.Txn
	commits chan error
}

func (t commitTxn) If(cs ...clientv3.Cmp) clientv3.Txn { return commitTxn{t.Txn.If(cs...), t.commits} }
func (t commitTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	return commitTxn{t.Txn.Then(ops...), t.commits}
}
func (t commitTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	return commitTxn{t.Txn.Else(ops...), t.commits}
}

func (t commitTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	select {
	case t.commits <- err:
	default:
	}
	return resp, err
}

// A key abandoned with its put unconfirmed (the caller's ctx ended with the
// enqueue sent) may be created by etcd AFTER the sweeper's delete by name
// went through and found nothing: the put was still on its way. The session
// lives on, so that key would head its lock's queue for good, and every
// process would wait behind it (the compose-test "reconnected" wedge). The
// sweeper must keep removing such a key for a while after the first delete.
func TestSweeperRemovesLatePut(t *testing.T) {
	addr := servertest.Etcd(t).Addr()
	cli, admin := servertest.EtcdClient(t, addr), servertest.EtcdClient(t, addr)
	commits := make(chan error, 1)
	cli.KV = commitKV{KV: cli.KV, commits: commits}
	m := etcdsess.New(cli, 2*time.Second)
	t.Cleanup(func() { _ = m.Close() })
	s, sw := sessionAndSweeper(t, m)

	key := "/seckill/test/sweep/" + t.Name() + "/k-1"
	k := sw.Sent(key, s) // the enqueue is sent...
	sw.Abandon(k)        // ...and its caller gives up before the reply
	select {
	case err := <-commits:
		if err != nil {
			t.Fatalf("the sweeper's delete by name: %v", err)
		}
	case <-testwait.Until(t).Done():
		t.Fatal("the sweeper made no delete")
	}
	// Only now is the put applied, on the live session.
	put, err := admin.Txn(t.Context()).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "", clientv3.WithLease(s.Lease()))).Commit()
	if err != nil || !put.Succeeded {
		t.Fatalf("late put: %v (succeeded %v)", err, put != nil && put.Succeeded)
	}

	// The session lives on: a key the sweeper does not remove stays for
	// good, so the wait is bounded by the test's deadline only.
	if !deletedAfter(t, admin, key, put.Header.Revision) {
		t.Fatalf("key %s put after the sweeper's delete still there: it would head its queue for good", key)
	}
	if ttl := leaseTTL(t, admin, s.Lease()); ttl <= 0 {
		t.Errorf("session lease TTL = %d, want alive: the key removed, not the session ended", ttl)
	}
}

// A session whose keep-alive stopped without a revoke (the client gave up
// on it during a blip) is over for this process, but its lease lives on
// in etcd until its TTL, and so does an abandoned key on it, heading its
// queue. The sweeper still deletes that key: the delete, not the lease's
// expiry, removes it (the lease is still alive after).
func TestSweeperRemovesAKeyOfASessionWhoseKeepAliveStopped(t *testing.T) {
	addr := servertest.Etcd(t).Addr()
	cli, admin := servertest.EtcdClient(t, addr), servertest.EtcdClient(t, addr)
	m := etcdsess.New(cli, time.Minute)
	t.Cleanup(func() { _ = m.Close() })
	s, sw := sessionAndSweeper(t, m)

	key := "/seckill/test/sweep/" + t.Name() + "/k-1"
	k := sw.Sent(key, s)
	put, err := cli.Put(t.Context(), key, "", clientv3.WithLease(s.Lease()))
	if err != nil {
		t.Fatal(err)
	}
	sw.Created(k, put.Header.Revision)
	s.Orphan() // the keep-alive stops; the lease is not revoked
	<-s.Done()
	sw.Abandon(k)

	if !deletedAfter(t, admin, key, put.Header.Revision) {
		t.Fatalf("key %s of a session whose keep-alive stopped never deleted", key)
	}
	if ttl := leaseTTL(t, admin, s.Lease()); ttl <= 0 {
		t.Errorf("lease TTL = %d at the delete, want alive: the key went with the lease's expiry, not the sweeper's delete", ttl)
	}
}

// deletedAfter watches key from the revision after rev until it is
// deleted (true) or the test's deadline passes (false): the sweeper's
// delete is an event, so the wait takes no duration of its own.
func deletedAfter(t *testing.T, admin *clientv3.Client, key string, rev int64) bool {
	t.Helper()
	for wr := range admin.Watch(testwait.Until(t), key, clientv3.WithRev(rev+1)) {
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return true
			}
		}
	}
	return false
}

// sessionAndSweeper opens a session on m and a sweeper, closed with the
// test.
func sessionAndSweeper(t *testing.T, m *etcdsess.Manager) (*concurrency.Session, *etcdsess.Sweeper) {
	t.Helper()
	s, err := m.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sw := m.NewSweeper(slog.Default())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		sw.Close(ctx)
	})
	return s, sw
}
