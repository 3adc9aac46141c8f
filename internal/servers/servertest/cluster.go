package servertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill/internal/servers"
)

// RedisCluster starts a formed Redis Cluster of three masters with a
// replica each on free loopback ports (servers.StartRedisCluster) and
// kills it in t.Cleanup.
func RedisCluster(t testing.TB) *servers.RedisCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := servers.StartRedisCluster(ctx, t.TempDir(), servers.RedisClusterOptions{})
	if errors.Is(err, servers.ErrNotInstalled) {
		SkipOrFail(t, err, "redis-server redis-tools")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("closing the redis cluster: %v", err)
		}
	})
	return c
}
