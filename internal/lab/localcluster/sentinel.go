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
// the single redis-server, for the failover cells of the lab.
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
	gen := c.sentinelGen
	dir := filepath.Join(c.cfg.Dir, fmt.Sprintf("sentinel-%d", gen))
	c.mu.Unlock()
	if old != nil {
		old.Stop(5 * time.Second)
	}
	if c.faults != nil && opt.ReplicaVia == nil {
		// The replication stream through a proxy of its own, so
		// LagReplication can starve the replica. Sentinel re-points a
		// replica that names another master after FailoverTimeout: give
		// the set a long one to keep the proxy in the path.
		opt.ReplicaVia = func(primary string) string {
			px, err := c.faults.proxy(targetReplication, gen, primary)
			if err != nil {
				// Replicating directly: LagReplication then says so.
				c.log.Warn("replication proxy", "err", err)
				return primary
			}
			return px.Listen
		}
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

// LagReplication makes the Sentinel set's replica lag: everything the
// primary sends it from now on is dropped (a toxiproxy timeout toxic on
// the replication stream), while the primary keeps answering writes. It is
// the window asynchronous replication loses in a failover, made as wide as
// the caller wants. restore takes the toxic away; the stream is broken by
// then, so only a failover or a resync mends the replica.
func (c *Cluster) LagReplication() (restore func() error, err error) {
	if c.faults == nil {
		return nil, ErrNoFaults
	}
	c.mu.Lock()
	gen, set := c.sentinelGen, c.sentinel
	c.mu.Unlock()
	if set == nil {
		return nil, fmt.Errorf("%w: no Sentinel set", ErrConfig)
	}
	px := c.faults.existing(targetReplication, gen)
	if px == nil {
		return nil, fmt.Errorf("%w: the Sentinel set's replica does not replicate through a proxy", ErrConfig)
	}
	return addToxicOn(px, "lag", "timeout", "downstream", 1, `{"timeout":0}`)
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
		"STOCKD_REDIS_SENTINEL_MASTER": set.MasterName,
		"STOCKD_REDIS_SENTINEL_ADDRS":  strings.Join(set.SentinelAddrs(), ","),
	}
}
