package etcdelect_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"seckill/internal/election"
	"seckill/internal/election/etcdelect"
	"seckill/internal/etcdsess"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
	"seckill/internal/zksess/zksesstest"
)

func dial(t *testing.T, addr string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{addr},
		DialTimeout:          time.Second,
		DialKeepAliveTime:    500 * time.Millisecond,
		DialKeepAliveTimeout: 500 * time.Millisecond,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// proxiedElector is a candidate whose client reaches etcd through a
// cuttable proxy.
func proxiedElector(t *testing.T, etcdAddr, path, id string) (*etcdelect.Elector, *zksesstest.Proxy, *clientv3.Client) {
	t.Helper()
	proxy := zksesstest.NewProxy(t, etcdAddr)
	cli := dial(t, proxy.Addr())
	m := etcdsess.New(cli, ttl)
	el := etcdelect.New(m, etcdelect.Options{Prefix: path, ID: id})
	t.Cleanup(func() { _ = m.Close() })
	t.Cleanup(func() { _ = el.Close() })
	return el, proxy, cli
}

// A compaction past the leader watch's start revision is no news about the
// leader key: when the watch is resumed after a reconnect and refused as
// compacted, the tenure must go on (re-read, re-watch), not end.
func TestLeadershipSurvivesCompaction(t *testing.T) {
	etcd := servertest.Etcd(t)
	admin := dial(t, etcd.Addr())
	path := "/test/" + t.Name()
	el, proxy, _ := proxiedElector(t, etcd.Addr(), path, "a")

	ctx := testwait.Until(t)
	l, err := el.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rev int64
	for i := range 5 {
		resp, err := admin.Put(ctx, fmt.Sprintf("/test/%s-noise", t.Name()), fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := admin.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	// The watch resumes from where it started, now compacted away.
	proxy.Cut()
	proxy.Restore(t)

	select {
	case <-etcdelect.Rewatched(l):
	case <-l.Done():
		t.Fatalf("leadership ended after a compaction and a reconnect: %v", l.Err())
	case <-ctx.Done():
		t.Fatal("leader watch not re-established after the reconnect")
	}
	if err := l.Check(ctx); err != nil {
		t.Fatalf("Check after the re-watch = %v, want nil", err)
	}
	select {
	case <-l.Done():
		t.Fatalf("leadership ended: %v", l.Err())
	default:
	}
	// The new watch still sees the key: deleting it ends the tenure.
	if _, err := admin.Delete(ctx, path, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), election.ErrLost) {
			t.Fatalf("Err after the key was deleted = %v, want ErrLost", l.Err())
		}
	case <-ctx.Done():
		t.Fatal("deleting the leader key did not end the tenure: the re-established watch is dead")
	}
}
