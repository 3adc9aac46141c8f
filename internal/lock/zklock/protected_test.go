package zklock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"seckill/internal/lock/locktest"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
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
	// The proxy cuts the link before it reports the lost reply, so the
	// Acquire may return first.
	select {
	case <-lost:
	case <-testwait.Until(t).Done():
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

// A listing proves a node lowest only for the session that created it. If
// that session expires before the grant (and go-zookeeper has silently
// opened a new one), the node is gone and hold must refuse it, even though
// the session is established again.
func TestHoldRefusesNodeOfExpiredSession(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	p := newProxied(t, srv.Addr(), time.Second)
	key := locktest.Key(t)
	dir := DefaultRoot + "/" + key
	if err := p.ensurePath(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	n, err := p.create(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// The request that proves n lowest, in n's session.
	children, st, err := p.conn.Children(dir)
	if err != nil {
		t.Fatal(err)
	}
	if q := sortBySequence(children); len(q) != 1 || dir+"/"+q[0] != n.path {
		t.Fatalf("queue %v, want only %s", q, n.path)
	}
	_, _, gone, err := admin.Conn().ExistsW(n.path)
	if err != nil {
		t.Fatal(err)
	}
	events, cancel := p.sess.Subscribe()
	defer cancel()

	// The session expires between the listing and the grant.
	oldID := p.sess.SessionID()
	p.proxy.Cut()
	select {
	case ev := <-gone:
		if ev.Type != zk.EventNodeDeleted {
			t.Fatalf("watch on the lock node: %v, want NodeDeleted", ev.Type)
		}
	case <-testwait.Until(t).Done():
		t.Fatal("the server never expired the cut session")
	}
	p.proxy.Restore(t)
	waitState(t, events, zk.StateExpired)
	waitState(t, events, zk.StateHasSession)
	if id := p.sess.SessionID(); id == oldID {
		t.Fatalf("session id %#x unchanged after expiry", id)
	}

	err = p.hold(n, st.Pzxid)
	if err == nil {
		t.Fatal("hold granted a node that died with its expired session")
	}
	if !errors.Is(err, errRestart) {
		t.Fatalf("hold = %v, want errRestart (queue again in the new session)", err)
	}
	p.mu.Lock()
	held := n.held
	p.mu.Unlock()
	if held {
		t.Fatal("node of the expired session marked held")
	}
}

// waitState reads session events until want arrives.
func waitState(t *testing.T, events <-chan zk.Event, want zk.State) {
	t.Helper()
	until := testwait.Until(t)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("session events closed while waiting for %v", want)
			}
			if ev.State == want {
				return
			}
		case <-until.Done():
			t.Fatalf("no %v event", want)
		}
	}
}
