package stockd

import (
	"net"

	"github.com/redis/go-redis/v9"

	"seckill/internal/election/audit"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// cluster.go: stockd on a Redis Cluster (redis.cluster.addrs). A script,
// MULTI or pipeline of a sale runs on one master only when every key it
// names is in one slot, so every family of keys stockd writes together
// carries one hash tag there: the sale's ({stock}, {stock}:lucky, ...), a
// Redis lock's ({lock}, {lock}:fence), the audit's. A cluster refuses
// anything else at the first script (CROSSSLOT), so it is refused here at
// start, by name, instead.

func onCluster(c *Config) bool { return len(c.Redis.Cluster.Addrs) > 0 }

// validateCluster checks redis.cluster.* and what a cluster asks of the
// key names.
func validateCluster(c *Config, bad func(key, format string, args ...any)) {
	if !onCluster(c) {
		return
	}
	for _, a := range c.Redis.Cluster.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			bad("redis.cluster.addrs", "want host:port, got %q", a)
		}
	}
	if c.Redis.Sentinel.Master != "" {
		bad("redis.cluster.addrs", "a Redis Cluster fails over by itself: not with redis.sentinel.master")
	}
	if c.Redis.DB != 0 {
		bad("redis.db", "a Redis Cluster has database 0 only, got %d", c.Redis.DB)
	}
	// validateKeys makes stock.lucky_key and stock.fence_key share
	// stock.key's tag; here the tag must exist.
	if c.Stock.Key != "" && redisstore.HashTag(c.Stock.Key) == "" {
		bad("stock.key", "on a Redis Cluster the sale's keys must share one slot: give stock.key a hash tag, e.g. {stock} (with stock.lucky_key {stock}:lucky, stock.fence_key {stock}:fence), got %q", c.Stock.Key)
	}
	spec, ok := backends[c.Lock.Backend]
	if ok && spec.redisKeys != nil && c.Lock.RedisAddr == "" && c.Lock.Key != "" && c.Stock.Mode != string(stock.ModeAtomic) {
		// redislock tags its names itself; redisson's lock is the key.
		keys := spec.redisKeys(c.Lock.Key)
		for _, k := range keys {
			if tag := redisstore.HashTag(k); tag == "" || tag != redisstore.HashTag(keys[0]) {
				bad("lock.key", "on a Redis Cluster the %s lock's keys %q must share one slot: give lock.key a hash tag, e.g. {lock}, got %q",
					c.Lock.Backend, keys, c.Lock.Key)
				break
			}
		}
	}
}

// auditKeys are the audit's stream and term keys: the defaults on one
// Redis, one hash tag on a cluster, where its record script writes both.
func auditKeys(c *Config) (stream, term string) {
	if onCluster(c) {
		return "{" + audit.DefaultStream + "}", "{" + audit.DefaultStream + "}:term"
	}
	return audit.DefaultStream, audit.DefaultTermKey
}

// newClusterClient is a client of redis.cluster.addrs. maxRetries as for
// newRedisClient; the stock's client (-1) still follows MOVED and ASK,
// refusals before anything ran, but never sends a command again that got
// no answer (redisstore.SendOnce).
func newClusterClient(cfg *Config, maxRetries int) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 cfg.Redis.Cluster.Addrs,
		MaxRetries:            maxRetries,
		Password:              cfg.Redis.Password,
		DialTimeout:           cfg.Redis.Timeout,
		ReadTimeout:           cfg.Redis.Timeout,
		WriteTimeout:          cfg.Redis.Timeout,
		ContextTimeoutEnabled: true,
	})
	if maxRetries < 0 {
		redisstore.SendOnce(cc)
	}
	redisstore.FollowFailover(cc)
	return cc
}
