package servers_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/servers/servertest"
)

// A stepped clock moves Redis's TIME and its key expiry either way, at
// once, and survives a restart; the machine's clock does not move.
func TestShiftedClockStepsRedis(t *testing.T) {
	p, clock := servertest.RedisOnClock(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()

	// The server's TIME lies between this process's readings around it,
	// moved by the offset (TIME has microseconds; allow one).
	offsetIs := func(what string, want time.Duration) {
		t.Helper()
		sent := time.Now()
		got, err := rdb.Time(ctx).Result()
		received := time.Now()
		if err != nil {
			t.Fatalf("%s: TIME: %v", what, err)
		}
		lo, hi := sent.Add(want-time.Microsecond), received.Add(want+time.Microsecond)
		if got.Before(lo) || got.After(hi) {
			t.Fatalf("%s: TIME %s, want between %s and %s (offset %s)", what,
				got.Format(time.RFC3339Nano), lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano), want)
		}
	}
	offsetIs("at start", 0)

	if err := clock.Step(-30 * time.Second); err != nil {
		t.Fatal(err)
	}
	offsetIs("stepped back", -30*time.Second)

	if err := rdb.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := clock.Step(90 * time.Second); err != nil {
		t.Fatal(err)
	}
	offsetIs("stepped forward", time.Minute)
	if n, err := rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("a key with a minute to live, after a 90 s step: exists %d, %v; want gone", n, err)
	}

	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	offsetIs("after a restart", time.Minute)
	if clock.Offset() != time.Minute {
		t.Fatalf("Offset %s, want 1m0s", clock.Offset())
	}
}
