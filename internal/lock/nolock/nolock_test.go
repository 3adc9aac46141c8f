package nolock_test

import (
	"context"
	"errors"
	"testing"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
	"seckill/internal/lock/nolock"
)

func TestNoExclusion(t *testing.T) {
	lk := nolock.New()
	a, err := lk.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	// The point of the backend: a second holder gets in while the first holds.
	b, err := lk.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatalf("second Acquire: %v, want an immediate lease", err)
	}
	if b.Token() <= a.Token() {
		t.Errorf("tokens %d then %d, want increasing", a.Token(), b.Token())
	}
	if b.Key() != "k" {
		t.Errorf("Key() = %q, want %q", b.Key(), "k")
	}
}

// The contract minus exclusion: release semantics and increasing tokens.
func TestConformance(t *testing.T) {
	locktest.Run(t, locktest.Env{
		New: func(*testing.T, lock.Options) lock.Locker { return nolock.New() },
	})
}

func TestDoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := nolock.New().Acquire(ctx, "k"); !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled ctx = %v, want ErrNotObtained wrapping Canceled", err)
	}
	if got, want := nolock.New().Describe(), (lock.Info{Name: "none", Safe: false}); got != want {
		t.Fatalf("Describe() = %+v, want %+v", got, want)
	}
}
