package stockd

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/handler"
	"seckill/internal/health"
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
	cfg := &Config{}
	cfg.Redis.Timeout = 20 * time.Millisecond // the checks' own bound, which the silent Redis outlasts
	cfg.Stock.RequireAOF = true
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	checks := []handler.PolicyCheck{{Redis: silentRedis{}}, {Name: "lock redis", Redis: silentRedis{}}}
	if err := checkEviction(t.Context(), cfg, log, checks); err != nil {
		t.Fatalf("checkEviction on silent Redis servers: %v; want the start to go on", err)
	}
	if d, err := checkDurability(t.Context(), cfg, log, silentRedis{}, 0); err != nil || d != nil {
		t.Fatalf("checkDurability (require_aof) on a silent Redis: %+v, %v; want no reading and no refusal", d, err)
	}

	ending, cancel := context.WithTimeout(t.Context(), cfg.Redis.Timeout/2)
	defer cancel()
	if err := checkEviction(ending, cfg, log, checks); err == nil {
		t.Fatal("checkEviction while the start itself ends: no error; want the check's")
	}
	// What unanswered does not cover: a Redis that answered.
	if unanswered(t.Context(), health.ErrEvictingPolicy) {
		t.Fatal("an evicting policy read as unanswered")
	}
}
