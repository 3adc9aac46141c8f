package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"seckill/internal/servers"
)

// rediscluster.go: a Redis Cluster (3 masters, 3 replicas) as the stock
// Redis, in place of the single redis-server, for the lab's cluster cells
// and `seckill demo --redis-cluster`. As with StartSentinel, the replicas
// use it from their next start (SetBackend with RedisClusterEnv).

// StartRedisCluster starts a new Redis Cluster in the cluster's
// directory, closing the previous one if any: a failover or a slot move
// leaves the roles changed, so every cell starts from a fresh one. The
// replicas reach its nodes directly: a cluster hands out its nodes' real
// addresses.
func (c *Cluster) StartRedisCluster(ctx context.Context, opt servers.RedisClusterOptions) (*servers.RedisCluster, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	old := c.rcluster
	c.rcluster = nil
	c.rclusterGen++
	dir := filepath.Join(c.cfg.Dir, fmt.Sprintf("redis-cluster-%d", c.rclusterGen))
	c.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("localcluster: redis cluster: %w", err)
	}
	cl, err := servers.StartRedisCluster(ctx, dir, opt)
	if err != nil {
		return nil, fmt.Errorf("localcluster: redis cluster: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = cl.Close()
		return nil, ErrClosed
	}
	c.rcluster = cl
	return cl, nil
}

// RedisCluster returns the running Redis Cluster, or nil.
func (c *Cluster) RedisCluster() *servers.RedisCluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rcluster
}

// ClusterStockKey and ClusterLuckyKey are the default sale's keys on a
// Redis Cluster (RedisClusterEnv): one hash tag, one slot.
const (
	ClusterStockKey = "{stock}"
	ClusterLuckyKey = "{stock}:lucky"
)

// RedisClusterEnv is the stockd configuration that makes the replicas
// sell on cl: its nodes as seeds, the sale's keys and the Redis locks'
// under one hash tag each (docs/cluster.md), the locks in the cluster
// too, so their token counter fails over with the fence it is checked by.
func RedisClusterEnv(cl *servers.RedisCluster) map[string]string {
	return map[string]string{
		"STOCKD_REDIS_CLUSTER_ADDRS": strings.Join(cl.Addrs(), ","),
		"STOCKD_STOCK_KEY":           ClusterStockKey,
		"STOCKD_STOCK_LUCKY_KEY":     ClusterLuckyKey,
		"STOCKD_STOCK_FENCE_KEY":     "{stock}:fence",
		"STOCKD_LOCK_KEY":            "{lock}",
		"STOCKD_LOCK_REDIS_ADDR":     "",
	}
}
