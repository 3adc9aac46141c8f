package watchdog

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/testwait"
)

const ttl = 90 * time.Millisecond

// fake is a server lock: renew answers held, or fails with err.
type fake struct {
	mu      sync.Mutex
	held    bool
	err     error
	renews  atomic.Int32
	renewed atomic.Int32
	lost    chan error
	wg      sync.WaitGroup
	closed  atomic.Bool
}

func start(t *testing.T) (*fake, *Dog) {
	t.Helper()
	return startWith(t, ttl, 0)
}

// startWith is start with a lock of the given ttl and retry (0: the
// default, TTL/3).
func startWith(t *testing.T, ttl, retry time.Duration) (*fake, *Dog) {
	t.Helper()
	f := &fake{held: true, lost: make(chan error, 1)}
	cfg := &Config{TTL: ttl, Retry: retry, Ctx: t.Context(),
		Track: func() (func(), bool) {
			if f.closed.Load() {
				return nil, false
			}
			f.wg.Add(1)
			return f.wg.Done, true
		},
		Renewed: func() { f.renewed.Add(1) }}
	d := cfg.Start(time.Now().Add(ttl), func(context.Context) (bool, error) {
		f.renews.Add(1)
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.held, f.err
	}, func(err error) { f.lost <- err })
	t.Cleanup(func() { d.Stop(); f.wg.Wait() })
	return f, d
}

func (f *fake) set(held bool, err error) {
	f.mu.Lock()
	f.held, f.err = held, err
	f.mu.Unlock()
}

func waitLost(t *testing.T, f *fake) error {
	t.Helper()
	select {
	case err := <-f.lost:
		if !errors.Is(err, lock.ErrLost) {
			t.Fatalf("lost with %v, want ErrLost", err)
		}
		return err
	case <-testwait.Until(t).Done():
		t.Fatal("loss never reported")
		return nil
	}
}

// Renewals keep the lock valid well past its TTL; Stop ends them.
func TestRenewsUntilStopped(t *testing.T) {
	f, d := start(t)
	until := testwait.Until(t)
	for f.renewed.Load() < 4 {
		if until.Err() != nil {
			t.Fatal("fewer than 4 renewals")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !d.ValidUntil().After(time.Now()) {
		t.Fatal("validity passed while renewing")
	}
	d.Stop()
	n := f.renews.Load()
	time.Sleep(2 * ttl) // nothing to wait for: renewals must not happen
	if got := f.renews.Load(); got > n+1 {
		t.Fatalf("%d renewals after Stop, want at most the one in flight", got-n)
	}
	select {
	case err := <-f.lost:
		t.Fatalf("lost after Stop: %v", err)
	default:
	}
}

// A renewal that finds the lock someone else's reports the loss at once.
func TestLostWhenNotHeld(t *testing.T) {
	f, _ := start(t)
	f.set(false, nil)
	waitLost(t, f)
}

// Failing renewals are retried, and lose the lock once the validity
// passes, not before. The lock's validity (1.5s) is a hundred retries
// (15ms) long, so a busy machine delays the retries without using them
// up: the loss after a single try would be a watchdog that gave up.
func TestLostWhenValidityPasses(t *testing.T) {
	f, d := startWith(t, 1500*time.Millisecond, 15*time.Millisecond)
	f.set(true, errors.New("timeout"))
	valid := d.ValidUntil()
	n := f.renews.Load()
	err := waitLost(t, f)
	if time.Now().Before(valid) {
		t.Fatalf("lost (%v) before the validity %v passed", err, valid)
	}
	if tries := f.renews.Load() - n; tries < 2 {
		t.Fatalf("%d renewals tried before the loss, want retries", tries)
	}
}

// A closed Locker (Track false) renews nothing.
func TestClosedTracksNothing(t *testing.T) {
	f, _ := start(t)
	f.closed.Store(true)
	n := f.renews.Load()
	time.Sleep(2 * ttl)
	if got := f.renews.Load(); got > n+1 {
		t.Fatalf("%d renewals once closed, want at most the one in flight", got-n)
	}
}
