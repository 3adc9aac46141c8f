package stockd

import (
	"log/slog"

	"seckill/internal/health"
	"seckill/internal/metrics"
	"seckill/internal/stock"
)

// healthChecker is what this replica holds its Redis servers to, at start
// and in /readyz: the maxmemory-policy of every Redis the sale keeps keys
// in (the stock Redis, and the lock's when the lock lives in Redis on
// another server: lock.redis_addr), the stock Redis's persistence, and
// the clocks items' windows assume.
func healthChecker(w *wiring, mode stock.Mode, log *slog.Logger, m *metrics.Metrics) *health.Checker {
	cfg := w.cfg
	policies := []health.Policy{{Redis: w.stockRedis()}}
	if spec, ok := backends[cfg.Lock.Backend]; mode == stock.ModeLocked && ok && spec.needs == needsRedis && cfg.Lock.RedisAddr != "" {
		policies = append(policies, health.Policy{Name: "lock redis", Redis: w.lockRedis()})
	}
	c := health.Config{
		Logger: log, Logs: metrics.NewLogLimiter(m, 0), StartTimeout: cfg.Redis.Timeout,
		Policies: policies, AllowEviction: cfg.Stock.AllowEviction,
		Durability: &health.DurabilityCheck{Redis: w.stockRedis(), ReplicaAcks: minReplicaAcks(cfg)},
		RequireAOF: cfg.Stock.RequireAOF,
		Memory:     w.stockRedis(),
	}
	if clocks := clockCheck(w); clocks != nil {
		c.Clocks = &health.ClockWatch{Clocks: clocks, MaxSkew: cfg.Stock.MaxClockSkew}
	}
	return health.New(c)
}
