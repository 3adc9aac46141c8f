package zksess_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
	"seckill/internal/zksess"
	"seckill/internal/zksess/zksesstest"
)

// nextState reads events until one with a state in want arrives, which it
// must: the wait is bounded by the test's deadline only.
func nextState(t *testing.T, events <-chan zk.Event, want ...zk.State) zk.State {
	t.Helper()
	until := testwait.Until(t)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("events closed while waiting for %v", want)
			}
			for _, w := range want {
				if ev.State == w {
					return ev.State
				}
			}
		case <-until.Done():
			t.Fatalf("no %v", want)
		}
	}
}

func TestDialUseAndClose(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	s := zksesstest.Dial(t, srv.Addr(), 2*time.Second)
	other := zksesstest.Dial(t, srv.Addr(), 2*time.Second)

	if got := s.State(); got != zk.StateHasSession {
		t.Fatalf("State() = %v, want %v", got, zk.StateHasSession)
	}
	if s.SessionID() == 0 {
		t.Fatal("SessionID() = 0 with an established session")
	}
	events, cancel := s.Subscribe()
	defer cancel()
	if ev := <-events; ev.State != zk.StateHasSession {
		t.Fatalf("first event = %v, want the current state %v", ev.State, zk.StateHasSession)
	}

	path, err := s.Conn().Create("/ephemeral", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Close is graceful: the ephemeral node is gone as soon as Close
	// returns, not after the session timeout.
	if ok, _, err := other.Conn().Exists(path); err != nil || ok {
		t.Fatalf("Exists(%s) after Close = %v, %v; want false, nil", path, ok, err)
	}
	if _, ok := <-events; ok {
		// Drain: the Disconnected event may precede the close.
		for range events {
		}
	}
	s.Close() // idempotent
	if ev, ok := <-func() <-chan zk.Event { ch, _ := s.Subscribe(); return ch }(); ok {
		t.Fatalf("Subscribe after Close delivered %v, want a closed channel", ev)
	}
}

func TestDialUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens: connections are refused

	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	s, err := zksess.Dial(ctx, []string{addr}, time.Second)
	if err == nil {
		s.Close()
		t.Fatal("Dial succeeded with no server")
	}
	if !errors.Is(err, zksess.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial = %v, want ErrUnavailable wrapping DeadlineExceeded", err)
	}
	// The error says what ended the call: the deadline (otherwise an
	// unreachable server is waited for for ever, and a hang fails the
	// test binary). How long after it the machine took is only noted.
	took := time.Since(start)
	note := ""
	if took > 5*time.Second {
		note = " (SLOW)"
	}
	t.Logf("Dial returned after %v with a 500ms deadline%s", took.Round(time.Millisecond), note)
}

// Cutting the network suspends the session (Disconnected); once the server
// has expired it, the client learns Expired on reconnection and go-zookeeper
// opens a new session.
func TestSuspendExpireReconnect(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	proxy := zksesstest.NewProxy(t, srv.Addr())
	s := zksesstest.Dial(t, proxy.Addr(), time.Second)
	observer := zksesstest.Dial(t, srv.Addr(), 5*time.Second)

	path, err := s.Conn().Create("/owned", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	_, _, gone, err := observer.Conn().ExistsW(path)
	if err != nil {
		t.Fatal(err)
	}
	oldID := s.SessionID()
	events, cancel := s.Subscribe()
	defer cancel()
	nextState(t, events, zk.StateHasSession)

	proxy.Cut()
	nextState(t, events, zk.StateDisconnected)
	if got := s.State(); got == zk.StateHasSession {
		t.Fatalf("State() = %v after the cut", got)
	}
	// The server expires the silent session and deletes its ephemeral node.
	select {
	case ev := <-gone:
		if ev.Type != zk.EventNodeDeleted {
			t.Fatalf("watch on the ephemeral node: %v, want NodeDeleted", ev.Type)
		}
	case <-testwait.Until(t).Done():
		t.Fatal("ephemeral node of a cut session not deleted")
	}

	proxy.Restore(t)
	nextState(t, events, zk.StateExpired)
	nextState(t, events, zk.StateHasSession)
	if id := s.SessionID(); id == 0 || id == oldID {
		t.Fatalf("SessionID() = %#x after expiry, want a new non-zero id (old %#x)", id, oldID)
	}
}

func TestCancelClosesAndIsIdempotent(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	s := zksesstest.Dial(t, srv.Addr(), 2*time.Second)
	events, cancel := s.Subscribe()
	<-events // initial state
	cancel()
	cancel()
	if ev, ok := <-events; ok {
		t.Fatalf("received %v after cancel, want a closed channel", ev)
	}
}
