package stockd

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"seckill/internal/health"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// The clocks at start: INFO when they agree (one machine), WARN naming a
// replica whose clock cannot be read, and never a refusal; with the key
// at 0 no check.
func TestCheckClocksAtStart(t *testing.T) {
	srv := servertest.Redis(t)
	cfg, err := Load("", []string{"STOCKD_REDIS_ADDR=" + srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	w := &wiring{cfg: cfg}
	t.Cleanup(func() { _ = w.close() })
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	c := clockCheck(w)
	checkClocks := func() *health.Checker {
		check := health.New(health.Config{Logger: log, StartTimeout: cfg.Redis.Timeout,
			Clocks: &health.ClockWatch{Clocks: c, MaxSkew: cfg.Stock.MaxClockSkew}})
		if err := check.CheckServer(t.Context()); err != nil {
			t.Fatal(err)
		}
		return check
	}
	check := checkClocks()
	if check.Clocks() == nil || cfg.Stock.MaxClockSkew != time.Second || !strings.Contains(logs.String(), "level=INFO msg=\"stock redis clocks\"") {
		t.Fatalf("one Redis without replicas: got %+v, logged:\n%s", check.Clocks(), logs.String())
	}

	dead, err := servers.LoopbackAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	c.Replicas = func(context.Context) ([]string, error) { return []string{dead}, nil }
	logs.Reset()
	check = checkClocks()
	if check.Clocks() == nil || !strings.Contains(logs.String(), "level=WARN msg=\"CLOCK SKEW") ||
		!strings.Contains(logs.String(), "replica "+dead+" unread") {
		t.Fatalf("a replica unread: got %+v, logged:\n%s", check.Clocks(), logs.String())
	}

	cfg.Stock.MaxClockSkew = 0
	if c := clockCheck(w); c != nil {
		t.Fatalf("stock.max_clock_skew 0: got a check %+v, want none", c)
	}
}
