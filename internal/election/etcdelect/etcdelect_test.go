package etcdelect_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"seckill/internal/election/electiontest"
	"seckill/internal/election/etcdelect"
	"seckill/internal/etcdsess"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
	"seckill/internal/zksess/zksesstest"
)

// ttl is the etcd session TTL of every candidate (etcd's minimum unit).
const ttl = 2 * time.Second

type cluster struct{ etcd *servers.Process }

func (c *cluster) SessionTTL() time.Duration { return ttl }

func (c *cluster) Restart(t *testing.T) {
	t.Helper()
	if err := c.etcd.Restart(testwait.Until(t)); err != nil {
		t.Fatal(err)
	}
}

// Candidate dials etcd through its own TCP proxy, so the test can cut one
// candidate off as a partition or a frozen process would be.
func (c *cluster) Candidate(t *testing.T, path, id string) electiontest.Candidate {
	t.Helper()
	proxy := zksesstest.NewProxy(t, c.etcd.Addr())
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{proxy.Addr()},
		DialTimeout:          time.Second,
		DialKeepAliveTime:    500 * time.Millisecond,
		DialKeepAliveTimeout: 500 * time.Millisecond,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := etcdsess.New(cli, ttl)
	el := etcdelect.New(m, etcdelect.Options{Prefix: path, ID: id})
	// LIFO: the elector resigns, the manager revokes, then the client closes.
	t.Cleanup(func() { _ = cli.Close() })
	t.Cleanup(func() { _ = m.Close() })
	t.Cleanup(func() { _ = el.Close() })
	return electiontest.Candidate{
		Elector: el,
		// Closing the client stops keep-alives without revoking: the lease
		// expires after the TTL, as for a process killed with -9.
		Crash:   func() { _ = cli.Close() },
		Cut:     proxy.Cut,
		Restore: func() { proxy.Restore(t) },
	}
}

func TestConformance(t *testing.T) {
	electiontest.Run(t, &cluster{etcd: servertest.Etcd(t)})
}
