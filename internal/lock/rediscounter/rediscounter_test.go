package rediscounter

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/locktest"
	"seckill/internal/servers/servertest"
)

func newClient(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: servertest.Redis(t).Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Past 2^53 a Lua number cannot tell n from n+1: the script compares
// decimal strings, so it still moves a counter up by one there, and never
// moves it back.
func TestAdvanceExactPast2To53(t *testing.T) {
	rdb := newClient(t)
	key := locktest.Key(t)
	if err := rdb.Set(t.Context(), key, "9007199254740992", 0).Err(); err != nil { // 2^53
		t.Fatal(err)
	}
	for _, s := range []struct {
		min   uint64
		moved bool
		want  string
	}{
		{9007199254740993, true, "9007199254740993"}, // 2^53+1: a double says equal
		{9007199254740992, false, "9007199254740993"},
		{99, false, "9007199254740993"},
		{18446744073709551615, true, "18446744073709551615"},
	} {
		moved, err := Advance(t.Context(), rdb, key, s.min)
		if err != nil {
			t.Fatal(err)
		}
		if got := rdb.Get(t.Context(), key).Val(); moved != s.moved || got != s.want {
			t.Fatalf("Advance(%d): moved %v, counter %s; want moved %v, counter %s", s.min, moved, got, s.moved, s.want)
		}
	}
}

// A missing counter is created; a corrupt one is an error and left alone.
func TestAdvanceMissingAndCorrupt(t *testing.T) {
	rdb := newClient(t)
	key := locktest.Key(t)
	if moved, err := Advance(t.Context(), rdb, key, 7); err != nil || !moved {
		t.Fatalf("Advance of a missing counter = %v, %v; want moved", moved, err)
	}
	if got := rdb.Get(t.Context(), key).Val(); got != "7" {
		t.Fatalf("counter = %q, want 7", got)
	}
	if err := rdb.Set(t.Context(), key, "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := Advance(t.Context(), rdb, key, 5); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Advance over a corrupt counter = %v, want ErrUnavailable", err)
	}
	if got := rdb.Get(t.Context(), key).Val(); got != "garbage" {
		t.Fatalf("corrupt counter = %q after Advance, want it left alone", got)
	}
}
