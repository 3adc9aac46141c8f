package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"seckill/internal/lock"
)

// A Lazy whose server is down answers unavailable on every call and tries
// again on the next; one that is closed answers closed and opens nothing.
func TestLazyRetriesUntilClosed(t *testing.T) {
	var opens atomic.Int64
	z := NewLazy(lock.Info{Name: "mysql", Safe: true}, func(context.Context) (*Locker, error) {
		opens.Add(1)
		return nil, fmt.Errorf("dial: %w", lock.ErrUnavailable)
	})
	if _, err := z.Acquire(t.Context(), "k"); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Acquire with the server down: %v, want ErrUnavailable", err)
	}
	if err := z.Ping(t.Context()); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Ping with the server down: %v, want ErrUnavailable", err)
	}
	if n := opens.Load(); n != 2 {
		t.Fatalf("%d opens, want one per call", n)
	}
	if got := z.Describe(); got.Name != "mysql" || !got.Safe {
		t.Fatalf("Describe before any open: %+v", got)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := z.Acquire(t.Context(), "k"); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("Acquire after Close: %v, want ErrClosed", err)
	}
	if n := opens.Load(); n != 2 {
		t.Fatalf("a closed Lazy opened again (%d opens)", n)
	}
}

// An open that does not return is waited for under the caller's context,
// and a second caller queued behind it gives up with its own.
func TestLazyOpenIsBoundedByTheCaller(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	z := NewLazy(lock.Info{Name: "mysql"}, func(ctx context.Context) (*Locker, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, ctx.Err()
	})
	first, cancelFirst := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := z.Open(first); done <- err }()
	<-started
	second, cancelSecond := context.WithCancel(t.Context())
	cancelSecond()
	if _, err := z.Open(second); !errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("a queued open whose context ended: %v, want ErrUnavailable and Canceled", err)
	}
	cancelFirst()
	if err := <-done; !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("the open cut by its context: %v, want ErrUnavailable", err)
	}
	close(release)
}
