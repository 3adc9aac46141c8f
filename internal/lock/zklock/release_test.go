package zklock

import (
	"testing"
	"time"

	"seckill/internal/lock/locktest"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
	"seckill/internal/zksess/zksesstest"
)

// opDelete is ZooKeeper's delete opcode.
const opDelete = 2

// A release whose delete went through but whose reply was lost with the
// connection, in a blip shorter than the session: Release tries again on
// the same session, finds the node gone by its own delete, and reports
// success rather than "connection closed". The next holder gets the lock
// at once, not after an orphan sweep.
func TestReleaseAcrossALostDeleteReply(t *testing.T) {
	const sessionTimeout = 8 * time.Second // far longer than the blip
	srv := servertest.ZooKeeper(t)
	admin := zksesstest.Dial(t, srv.Addr(), 5*time.Second)
	proxy := zksesstest.NewZooKeeperProxy(t, srv.Addr())
	sa := zksesstest.Dial(t, proxy.Addr(), sessionTimeout)
	a := New(sa, Options{})
	t.Cleanup(func() { _ = a.Close() })

	key := locktest.Key(t)
	dir := DefaultRoot + "/" + key
	until := testwait.Until(t)
	l, err := a.Acquire(until, key)
	if err != nil {
		t.Fatal(err)
	}
	sidA := sa.SessionID()

	lost := proxy.LoseReply(t, opDelete, dir+"/")
	released := make(chan error, 1)
	go func() { released <- l.Release(until) }()
	select {
	case <-lost:
	case err := <-released:
		t.Fatalf("Release returned %v before its delete's reply was lost", err)
	case <-until.Done():
		t.Fatal("the delete's reply was not lost")
	}
	if got := nodesOwnedBy(t, admin, dir, sidA); len(got) != 0 {
		t.Fatalf("nodes of the session after the lost reply: %v, want none (the delete ran)", got)
	}
	proxy.Restore(t)
	select {
	case err := <-released:
		if err != nil {
			t.Fatalf("Release across a lost delete reply: %v, want nil", err)
		}
	case <-until.Done():
		t.Fatal("Release did not return after the link was restored")
	}
	if id := sa.SessionID(); id != sidA {
		t.Fatalf("session %#x was replaced by %#x: the blip must be shorter than the session", sidA, id)
	}
}
