package zksess_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
	"seckill/internal/zksess"
	"seckill/internal/zksess/zksesstest"
)

// Await returns at once with a session, waits for the next one after the
// session is lost (the new one after an expiry), ends at the caller's
// deadline while there is none, and fails once the Session is closed.
func TestAwait(t *testing.T) {
	srv := servertest.ZooKeeper(t)
	proxy := zksesstest.NewProxy(t, srv.Addr())
	s := zksesstest.Dial(t, proxy.Addr(), time.Second)
	if err := s.Await(t.Context()); err != nil {
		t.Fatalf("Await with a session = %v, want nil", err)
	}
	events, cancel := s.Subscribe()
	defer cancel()
	proxy.Cut()
	nextState(t, events, zk.StateDisconnected)

	const wait = 300 * time.Millisecond
	ctx, stop := context.WithTimeout(t.Context(), wait)
	defer stop()
	// Judged against the context's own deadline: a start taken after
	// WithTimeout would make an on-time return look early.
	deadline, _ := ctx.Deadline()
	err := s.Await(ctx)
	returned := time.Now()
	if !errors.Is(err, zksess.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Await without a session = %v, want ErrUnavailable wrapping DeadlineExceeded", err)
	}
	// The upper bound only tells "at its deadline" from "when a session
	// comes back" (never, while cut); it is loose for a loaded machine.
	if late := returned.Sub(deadline); late < 0 || late > 2*time.Second {
		t.Fatalf("Await returned %v after its deadline, want within [0, 2s]", late)
	}

	res := make(chan error, 1)
	go func() { res <- s.Await(t.Context()) }()
	// Whether the server has expired the cut session by then or not,
	// Await returns once go-zookeeper has a session again.
	nextState(t, events, zk.StateConnecting)
	proxy.Restore(t)
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("Await across the reconnection = %v, want nil", err)
		}
	case <-testwait.Until(t).Done():
		t.Fatal("Await still blocked after the network came back")
	}
	if s.State() != zk.StateHasSession {
		t.Fatalf("Await returned with state %v", s.State())
	}

	s.Close()
	if err := s.Await(t.Context()); !errors.Is(err, zksess.ErrUnavailable) {
		t.Fatalf("Await after Close = %v, want ErrUnavailable", err)
	}
}
