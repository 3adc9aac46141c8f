package localcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"seckill/internal/servers"
)

// sentinel.go: a replicated stock Redis watched by Sentinel, in place of
// the single redis-server, for the failover cells of the lab (issue #15).
// The set is started on demand and the replicas use it from their next
// start (SetBackend with SentinelEnv in its env): a cell that does not ask
// for it keeps the plain stock Redis.

// StartSentinel starts a new Sentinel set (servers.StartSentinelSet: a
// primary, a synced replica, three Sentinels) in the cluster's directory,
// stopping the previous one if any: each failover leaves roles swapped, so
// every cell starts from a fresh set. The replicas talk to it directly,
// not through the fault proxies: Sentinel hands out the servers' real
// addresses.
func (c *Cluster) StartSentinel(ctx context.Context, opt servers.SentinelOptions) (*servers.SentinelSet, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	old := c.sentinel
	c.sentinel = nil
	c.sentinelGen++
	dir := filepath.Join(c.cfg.Dir, fmt.Sprintf("sentinel-%d", c.sentinelGen))
	c.mu.Unlock()
	if old != nil {
		old.Stop(5 * time.Second)
	}
	set, err := servers.StartSentinelSet(ctx, dir, opt)
	if err != nil {
		return nil, fmt.Errorf("localcluster: sentinel set: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		set.Stop(5 * time.Second)
		return nil, ErrClosed
	}
	c.sentinel = set
	return set, nil
}

// Sentinel returns the running Sentinel set, or nil.
func (c *Cluster) Sentinel() *servers.SentinelSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sentinel
}

// StopSentinel stops the Sentinel set, if one runs. Replicas still
// pointed at it lose their stock Redis until the next SetBackend.
func (c *Cluster) StopSentinel() {
	c.mu.Lock()
	set := c.sentinel
	c.sentinel = nil
	c.mu.Unlock()
	if set != nil {
		set.Stop(5 * time.Second)
	}
}

// SentinelEnv is the stockd configuration that makes the replicas use set
// as their stock Redis (redis.sentinel.master and .addrs).
func SentinelEnv(set *servers.SentinelSet) map[string]string {
	return map[string]string{
		"STOCKD_REDIS_SENTINEL_MASTER": servers.SentinelMaster,
		"STOCKD_REDIS_SENTINEL_ADDRS":  strings.Join(set.SentinelAddrs(), ","),
	}
}
