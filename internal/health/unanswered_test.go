package health

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// silentRedis answers nothing until its caller's context ends, as a Redis
// on a loaded machine that does not answer within redis.timeout.
type silentRedis struct{}

func (silentRedis) Info(ctx context.Context, section ...string) *redis.StringCmd {
	cmd := redis.NewStringCmd(ctx, "info")
	<-ctx.Done()
	cmd.SetErr(ctx.Err())
	return cmd
}

func (silentRedis) ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd {
	cmd := redis.NewMapStringStringCmd(ctx, "config", "get", parameter)
	<-ctx.Done()
	cmd.SetErr(ctx.Err())
	return cmd
}

// A Redis silent past a start-up check's own bound is one not reachable
// yet, not a refusal: the start goes on (and /readyz reads it later). A
// start that is itself ending still reports the check's error.
func TestStartChecksGoOnPastASilentRedis(t *testing.T) {
	const timeout = 20 * time.Millisecond // the checks' own bound, which the silent Redis outlasts
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := New(Config{Logger: log, StartTimeout: timeout, RequireAOF: true,
		Policies:   []Policy{{Redis: silentRedis{}}, {Name: "lock redis", Redis: silentRedis{}}},
		Durability: &DurabilityCheck{Redis: silentRedis{}}})
	if err := c.CheckPolicies(t.Context()); err != nil {
		t.Fatalf("CheckPolicies on silent Redis servers: %v; want the start to go on", err)
	}
	if err := c.CheckServer(t.Context()); err != nil || c.Durability() != nil {
		t.Fatalf("CheckServer (require_aof) on a silent Redis: %+v, %v; want no reading and no refusal", c.Durability(), err)
	}

	ending, cancel := context.WithTimeout(t.Context(), timeout/2)
	defer cancel()
	if err := c.CheckPolicies(ending); err == nil {
		t.Fatal("CheckPolicies while the start itself ends: no error; want the check's")
	}
	// What unanswered does not cover: a Redis that answered.
	if unanswered(t.Context(), ErrEvictingPolicy) {
		t.Fatal("an evicting policy read as unanswered")
	}
}
