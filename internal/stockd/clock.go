package stockd

import (
	"context"

	"github.com/redis/go-redis/v9"

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
