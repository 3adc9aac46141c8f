package locallock_test

import (
	"context"
	"errors"
	"testing"

	"seckill/internal/lock"
	"seckill/internal/lock/locallock"
	"seckill/internal/lock/locktest"
	"seckill/internal/testwait"
)

func TestConformance(t *testing.T) {
	locktest.Run(t, locktest.Env{
		New:       func(*testing.T, lock.Options) lock.Locker { return locallock.New() },
		Exclusive: true,
	})
}

// One process: the bound shows in the tokens (a new base after it).
func TestCohort(t *testing.T) {
	locktest.RunCohort(t, locktest.Cohort{
		New: func(_ *testing.T, k int) lock.Locker { return locallock.NewWith(locallock.Options{LocalHandoffs: k}) },
	})
}

// Waiters are served in arrival order, and one whose context ends does not
// block those behind it.
func TestFIFOAndAbandonedTurn(t *testing.T) {
	lk := locallock.New()
	key := locktest.Key(t)
	holder, err := lk.Acquire(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}

	const waiters = 5
	order := make(chan int, waiters)
	gone, cancelGone := context.WithCancel(t.Context())
	abandoned := make(chan error, 1)
	for i := range waiters {
		go func() {
			if i == 2 { // this one gives up while queued
				_, err := lk.Acquire(gone, key)
				abandoned <- err
				return
			}
			l, err := lk.Acquire(t.Context(), key)
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			_ = l.Release(t.Context())
		}()
		// Start the next waiter only once this one is queued.
		if err := lk.WaitQueued(t.Context(), key, i+1); err != nil {
			t.Fatal(err)
		}
	}
	cancelGone()
	if err := <-abandoned; !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned Acquire = %v, want ErrNotObtained wrapping Canceled", err)
	}
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []int{0, 1, 3, 4}
	until := testwait.Until(t)
	for _, w := range want {
		select {
		case got := <-order:
			if got != w {
				t.Fatalf("waiter %d acquired, want %d (FIFO order)", got, w)
			}
		case <-until.Done():
			t.Fatalf("waiter %d never acquired", w)
		}
	}
}

func TestDescribe(t *testing.T) {
	if got, want := locallock.New().Describe(), (lock.Info{Name: "local", Safe: false}); got != want {
		t.Fatalf("Describe() = %+v, want %+v", got, want)
	}
}
