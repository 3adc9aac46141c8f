package stockd

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"seckill/internal/handler"
	"seckill/internal/health"
)

// clockCheck is the clocks items' windows assume (docs/items.md): the
// stock Redis primary's, its replicas' (from the Sentinels with
// redis.sentinel.master, every node of a cluster, else from the primary's
// INFO replication) and
// this process's; nil with stock.max_clock_skew 0.
func clockCheck(w *wiring) *health.ClockCheck {
	cfg := w.cfg
	if cfg.Stock.MaxClockSkew == 0 {
		return nil
	}
	c := &health.ClockCheck{
		Primary: w.stockRedis(),
		Dial:    func(addr string) *redis.Client { return newRedisClient(cfg, addr, -1) },
	}
	if cc, ok := w.stockRedis().(*redis.ClusterClient); ok {
		// Each item's window is decided by its own master's clock:
		// every node's is compared, against one master's.
		c.Replicas = func(ctx context.Context) ([]string, error) {
			return health.ClusterNodes(ctx, cc)
		}
	} else if s := cfg.Redis.Sentinel; s.Master != "" {
		c.Replicas = func(ctx context.Context) ([]string, error) {
			return health.SentinelReplicas(ctx, s.Addrs, s.Master)
		}
	} else {
		c.Replicas = func(ctx context.Context) ([]string, error) {
			return health.InfoReplicas(ctx, w.stockRedis())
		}
	}
	return c
}

// checkClocks reads the clocks at start and says what it found: WARN when
// one is off the primary's by more than stock.max_clock_skew or a
// replica's cannot be read. It never refuses the start: the primary's
// clock decides every window now, a replica's only after a failover, and
// a replica's host is no reason to stop every replica selling; /readyz
// keeps saying it. A primary that cannot be reached yet is read by
// /readyz once it answers.
func checkClocks(ctx context.Context, cfg *Config, log *slog.Logger, c *health.ClockCheck) *handler.ClockCheck {
	if c == nil {
		return nil
	}
	check := &handler.ClockCheck{Clocks: c, MaxSkew: cfg.Stock.MaxClockSkew}
	cctx, cancel := context.WithTimeout(ctx, cfg.Redis.Timeout)
	clocks, err := c.ReadClocks(cctx)
	cancel()
	switch {
	case unanswered(ctx, err):
		log.Info("stock redis not reachable yet: /readyz reads its clock once it answers", "err", err)
		return check
	case err != nil:
		log.Warn("could not read the stock Redis's clock: items' windows assume it is right", "err", err)
		return check
	}
	check.Known = &clocks
	attrs := []any{"max_clock_skew", cfg.Stock.MaxClockSkew, "process", clocks.Process.String()}
	for _, r := range clocks.Replicas {
		attrs = append(attrs, "replica", r.String())
	}
	if p := clocks.Problems(cfg.Stock.MaxClockSkew); len(p) > 0 {
		log.Warn("CLOCK SKEW: a clock is off the stock Redis primary's, or unread; after a failover items' "+
			"windows move by a replica's skew (keep the hosts on NTP)", append(attrs, "problems", p)...)
		return check
	}
	log.Info("stock redis clocks", attrs...)
	return check
}
