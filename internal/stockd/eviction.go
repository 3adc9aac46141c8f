package stockd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"seckill/internal/handler"
	"seckill/internal/health"
)

// ErrEvictingRedis refuses the start (exit status 2, as a configuration
// error: the fix is the Redis's configuration, or stock.allow_eviction).
var ErrEvictingRedis = errors.New("refusing a Redis that may evict keys")

// evictionFix says how to make a Redis keep every key, for the refusal.
const evictionFix = "run CONFIG SET maxmemory-policy noeviction on it and put the line " +
	"\"maxmemory-policy noeviction\" in its redis.conf (on a managed Redis: its parameter group), " +
	"or set stock.allow_eviction: true to run anyway"

// policyChecks lists the Redis servers the sale keeps keys in: the stock
// Redis, and the lock's when the lock lives in Redis (redis, redisson and
// the lab's broken locks) on another server (lock.redis_addr).
func policyChecks(w *wiring, locked bool) []handler.PolicyCheck {
	checks := []handler.PolicyCheck{{Redis: w.stockRedis()}}
	if spec, ok := backends[w.cfg.Lock.Backend]; locked && ok && spec.needs == needsRedis && w.cfg.Lock.RedisAddr != "" {
		checks = append(checks, handler.PolicyCheck{Name: "lock redis", Redis: w.lockRedis()})
	}
	return checks
}

// checkEviction reads each Redis's maxmemory-policy at start and refuses
// one that may evict keys, unless stock.allow_eviction, when it says so
// loudly. A Redis that cannot be reached yet is no reason to refuse (it may
// come up after us): /readyz reads its policy once it answers.
func checkEviction(ctx context.Context, cfg *Config, log *slog.Logger, checks []handler.PolicyCheck) error {
	for _, c := range checks {
		name := cmp.Or(c.Name, "stock redis")
		cctx, cancel := context.WithTimeout(ctx, cfg.Redis.Timeout)
		policy, err := health.MaxmemoryPolicy(cctx, c.Redis)
		cancel()
		switch {
		case err == nil:
		case unanswered(ctx, err):
			log.Info(name+" not reachable yet: /readyz checks its maxmemory-policy once it answers", "err", err)
		case errors.Is(err, health.ErrEvictingPolicy) && cfg.Stock.AllowEviction:
			log.Warn("REDIS MAY EVICT THE SALE'S KEYS: stock.allow_eviction is on, so this replica runs anyway; "+
				"an evicted stock key reads as sold out, an evicted receipt or idempotency record sells again",
				"redis", name, "maxmemory_policy", cmp.Or(policy, "unreported"), "err", err)
		case errors.Is(err, health.ErrEvictingPolicy):
			return fmt.Errorf("%w: %s: %w: under memory pressure it may drop the stock, the receipts and the idempotency "+
				"records, and sell a unit twice; %s", ErrEvictingRedis, name, err, evictionFix)
		default:
			return fmt.Errorf("%s: maxmemory-policy: %w", name, err)
		}
	}
	return nil
}
