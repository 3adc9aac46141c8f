package zkelect_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"seckill/internal/election/zkelect"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
	"seckill/internal/zksess"
	"seckill/internal/zksess/zksesstest"
)

// opCreate is ZooKeeper's create opcode.
const opCreate = 1

// latchNodesOf lists the children of path whose ephemeral owner is session.
func latchNodesOf(t *testing.T, admin *zksess.Session, path string, session int64) []string {
	t.Helper()
	children, _, err := admin.Conn().Children(path)
	if err != nil {
		t.Fatalf("children of %s: %v", path, err)
	}
	var owned []string
	for _, c := range children {
		ok, st, err := admin.Conn().Exists(path + "/" + c)
		if err != nil {
			t.Fatalf("exists %s: %v", c, err)
		}
		if ok && st.EphemeralOwner == session {
			owned = append(owned, c)
		}
	}
	return owned
}

// The latch node's create reaches the server but its reply is lost in a
// blip shorter than the session. The orphan must not stay ahead of the node
// the next Campaign makes: that Campaign leads within a bound, Leader and
// Check agree, and only the leading node of the session remains.
func TestLostLatchCreateReplyLeavesNoOrphan(t *testing.T) {
	const sessionTimeout = 8 * time.Second // far longer than the blip
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	path := "/seckill/test/" + strings.ReplaceAll(t.Name(), "/", "_")
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		if _, err := admin.Conn().Create(path[:i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	proxy := zksesstest.NewZooKeeperProxy(t, srv.Addr())
	sa := zksesstest.Dial(t, proxy.Addr(), sessionTimeout)
	a := zkelect.New(sa, zkelect.Options{Path: path, ID: "A"})
	t.Cleanup(func() { _ = a.Close() })
	sidA := sa.SessionID()

	lost := proxy.LoseReply(t, opCreate, path+"/")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	l, err := a.Campaign(ctx)
	if err == nil {
		_ = l.Resign(t.Context())
		t.Fatal("Campaign succeeded although its create's reply was lost")
	}
	cancel()
	// The proxy drops the reply and the connection, then reports it: the
	// client may see the broken connection (and Campaign fail) first.
	select {
	case <-lost:
	case <-testwait.Until(t).Done():
		t.Fatalf("the latch create's reply was not lost (Campaign: %v)", err)
	}
	if got := latchNodesOf(t, admin, path, sidA); len(got) != 1 {
		t.Fatalf("latch nodes of the cut session after the lost reply: %v, want the one the server created", got)
	}

	proxy.Restore(t)
	start := time.Now()
	ctx, cancel = context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	l, err = a.Campaign(ctx)
	if err != nil {
		t.Fatalf("Campaign after the blip: %v (the new node waits behind the orphan)", err)
	}
	t.Logf("led %v after the link was restored", time.Since(start))
	if id := sa.SessionID(); id != sidA {
		t.Fatalf("session %#x was replaced by %#x: the blip must be shorter than the session", sidA, id)
	}
	if err := l.Check(ctx); err != nil {
		t.Fatalf("Check of the new tenure: %v", err)
	}
	leader, err := a.Leader(ctx)
	if err != nil || leader.ID != "A" || leader.Term != l.Term() {
		t.Fatalf("Leader() = %+v, %v; want A with term %d", leader, err, l.Term())
	}
	if got := latchNodesOf(t, admin, path, sidA); len(got) != 1 {
		t.Fatalf("latch nodes of the session while leading: %v, want only the leading one", got)
	}
	if err := sa.Swept(ctx, path); err != nil {
		t.Fatalf("Swept: %v, want every lost create swept", err)
	}
	if err := l.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
}
