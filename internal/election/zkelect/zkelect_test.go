package zkelect_test

import (
	"testing"
	"time"

	"seckill/internal/election/electiontest"
	"seckill/internal/election/zkelect"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
	"seckill/internal/zksess/zksesstest"
)

// timeout is the ZooKeeper session timeout of every candidate.
const timeout = 2 * time.Second

type cluster struct{ zk *servers.Process }

func (c *cluster) SessionTTL() time.Duration { return timeout }

func (c *cluster) Restart(t *testing.T) {
	t.Helper()
	if err := c.zk.Restart(testwait.Until(t)); err != nil {
		t.Fatal(err)
	}
}

// Candidate connects through its own TCP proxy; cutting the proxy is, to
// the server, exactly a process that stopped talking.
func (c *cluster) Candidate(t *testing.T, path, id string) electiontest.Candidate {
	t.Helper()
	proxy := zksesstest.NewProxy(t, c.zk.Addr())
	s := zksesstest.Dial(t, proxy.Addr(), timeout)
	el := zkelect.New(s, zkelect.Options{Path: path, ID: id})
	t.Cleanup(func() { _ = el.Close() })
	return electiontest.Candidate{
		Elector: el,
		Crash:   proxy.Cut, // never restored: the session expires on the server
		Cut:     proxy.Cut,
		Restore: func() { proxy.Restore(t) },
	}
}

func TestConformance(t *testing.T) {
	electiontest.Run(t, &cluster{zk: servertest.ZooKeeper(t)})
}
