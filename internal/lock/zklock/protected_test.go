package zklock

import (
	"context"
	"testing"
	"time"

	"seckill/internal/lock/locktest"
	"seckill/internal/servers/servertest"
	"seckill/internal/zksess"
	"seckill/internal/zksess/zksesstest"
)

// opCreate is ZooKeeper's create opcode (the lock node's create; ancestors
// are createContainer, 19).
const opCreate = 1

// nodesOwnedBy lists the children of dir whose ephemeral owner is session.
func nodesOwnedBy(t *testing.T, admin *zksess.Session, dir string, session int64) []string {
	t.Helper()
	children, _, err := admin.Conn().Children(dir)
	if err != nil {
		t.Fatalf("children of %s: %v", dir, err)
	}
	var owned []string
	for _, c := range children {
		ok, st, err := admin.Conn().Exists(dir + "/" + c)
		if err != nil {
			t.Fatalf("exists %s: %v", c, err)
		}
		if ok && st.EphemeralOwner == session {
			owned = append(owned, c)
		}
	}
	return owned
}

// A create whose reply is lost in a blip shorter than the session: the
// server made the node, the client never learnt its name, and the session
// lives on. The node must not stay queued: another process obtains the lock
// within a bound, and no node of the first session remains.
func TestLostCreateReplyLeavesNoOrphan(t *testing.T) {
	const sessionTimeout = 8 * time.Second // far longer than the blip
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	proxy := zksesstest.NewZooKeeperProxy(t, srv.Addr())
	sa := zksesstest.Dial(t, proxy.Addr(), sessionTimeout)
	a := New(sa, Options{})
	t.Cleanup(func() { _ = a.Close() })
	b := New(zksesstest.Dial(t, srv.Addr(), sessionTimeout), Options{})
	t.Cleanup(func() { _ = b.Close() })

	key := locktest.Key(t)
	dir := DefaultRoot + "/" + key
	if err := a.ensurePath(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	sidA := sa.SessionID()

	lost := proxy.LoseReply(t, opCreate, dir+"/")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	_, err := a.Acquire(ctx, key)
	cancel()
	if err == nil {
		t.Fatal("Acquire succeeded although its create's reply was lost")
	}
	select {
	case <-lost:
	default:
		t.Fatalf("the create's reply was not lost (Acquire: %v)", err)
	}
	if got := nodesOwnedBy(t, admin, dir, sidA); len(got) != 1 {
		t.Fatalf("nodes of the cut session after the lost reply: %v, want the one the server created", got)
	}

	proxy.Restore(t)
	start := time.Now()
	ctx, cancel = context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	lb, err := b.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("another Locker could not obtain the lock after the blip: %v", err)
	}
	t.Logf("the other Locker obtained the lock %v after the link was restored", time.Since(start))
	if id := sa.SessionID(); id != sidA {
		t.Fatalf("session %#x was replaced by %#x: the blip must be shorter than the session", sidA, id)
	}
	if got := nodesOwnedBy(t, admin, dir, sidA); len(got) != 0 {
		t.Fatalf("nodes of the first session left once idle: %v, want none", got)
	}
	if err := sa.Swept(ctx, dir); err != nil {
		t.Fatalf("Swept: %v, want every lost create swept", err)
	}
	if err := lb.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
