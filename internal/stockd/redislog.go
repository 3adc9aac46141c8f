package stockd

import (
	"context"
	"fmt"
	"log/slog"

	"seckill/internal/metrics"
)

// redisLogger routes go-redis's internal log (pool and reconnect chatter,
// otherwise printed to stderr past slog) into stockd's logger, at most one
// line per second; the rest are counted in seckill_log_suppressed_total.
// Installed with redis.SetLogger.
type redisLogger struct {
	log *slog.Logger
	lim *metrics.LogLimiter
}

// Printf implements go-redis's internal.Logging.
func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if ok, n := r.lim.Allow("redis_client"); ok {
		r.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...), "suppressed", n)
	}
}
