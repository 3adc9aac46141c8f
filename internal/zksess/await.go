package zksess

import (
	"context"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// Await returns once a session is established (the current one, or the one
// go-zookeeper opens after a disconnect or an expiry), so that a request
// that arrives during a reconnection can wait for it instead of failing:
// go-zookeeper reconnects by itself, and a caller with time left loses
// nothing by waiting. It does not tell which session it is; a recipe that
// must not mix sessions compares Incarnations (Alive).
//
// Errors wrap ErrUnavailable, and ctx's error when ctx ended first (the
// caller's deadline passed with no session to be had), or say that the
// Session is closed.
func (s *Session) Await(ctx context.Context) error {
	if s.closing.Load() {
		return fmt.Errorf("%w: session closed", ErrUnavailable)
	}
	if s.State() == zk.StateHasSession {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: no session (state %v): %w", ErrUnavailable, s.State(), err)
	}
	// The first event is the state at subscription, so a session
	// established between the check above and here is not missed.
	events, cancel := s.Subscribe()
	defer cancel()
	for {
		select {
		case ev, ok := <-events:
			if !ok || s.closing.Load() {
				return fmt.Errorf("%w: session closed", ErrUnavailable)
			}
			if ev.State == zk.StateHasSession && s.State() == zk.StateHasSession {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("%w: no session (state %v): %w", ErrUnavailable, s.State(), ctx.Err())
		}
	}
}
