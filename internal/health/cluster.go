package health

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock/redisstore"
)

// master is one master of a cluster, for the checks of the stock Redis's
// configuration, which must hold of every master that keeps a part of
// the sale.
type master struct {
	addr string
	rdb  *redis.Client
}

// mastersOf lists the masters of rdb when it is a cluster client (ok),
// sorted by address; an error when the slots cannot be read.
func mastersOf(ctx context.Context, rdb any) (_ []master, ok bool, _ error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return nil, false, nil
	}
	var (
		mu  sync.Mutex
		out []master
	)
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, master{addr: c.Options().Addr, rdb: c})
		return nil
	})
	if err != nil {
		return nil, true, redisstore.WrapRedis(ctx, "CLUSTER SLOTS", err)
	}
	slices.SortFunc(out, func(a, b master) int { return strings.Compare(a.addr, b.addr) })
	return out, true, nil
}

// ClusterNodes lists every node of the cluster cc, masters and replicas,
// host:port as the cluster announces them: whose clocks the clock check
// compares.
func ClusterNodes(ctx context.Context, cc *redis.ClusterClient) ([]string, error) {
	var (
		mu  sync.Mutex
		out []string
	)
	err := cc.ForEachShard(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, c.Options().Addr)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoReplicaList, redisstore.WrapRedis(ctx, "CLUSTER SLOTS", err))
	}
	slices.Sort(out)
	return out, nil
}

// MasterReplicas is one master of a cluster and how many replicas it
// reports connected (INFO replication connected_slaves).
type MasterReplicas struct {
	Addr     string
	Replicas int
}

// ClusterReplicas reads every master's connected replicas, sorted by
// address: a master with fewer than stock.min_replica_acks answers each
// of its sales unconfirmed.
func ClusterReplicas(ctx context.Context, cc *redis.ClusterClient) ([]MasterReplicas, error) {
	ms, _, err := mastersOf(ctx, cc)
	if err != nil {
		return nil, err
	}
	out := make([]MasterReplicas, 0, len(ms))
	for _, m := range ms {
		info, err := m.rdb.Info(ctx, "replication").Result()
		if err != nil {
			return nil, fmt.Errorf("master %s: %w", m.addr, redisstore.WrapRedis(ctx, "INFO replication", err))
		}
		v, _ := InfoField(info, "connected_slaves")
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("master %s: INFO replication connected_slaves %q", m.addr, v)
		}
		out = append(out, MasterReplicas{Addr: m.addr, Replicas: n})
	}
	return out, nil
}
