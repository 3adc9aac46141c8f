package stock

import (
	"context"
	"errors"
	"net"

	"github.com/redis/go-redis/v9"
)

// cluster.go: what a Redis Cluster client needs to sell. Every key of a
// sale (the default one, given one hash tag, and each item) is one slot,
// so each script, MULTI and pipeline of a sale runs on one master; the
// store sends a run and its WAIT to that master itself (ackClient).

// FollowFailover makes cc read the cluster's slots again whenever a
// command or a dial gets no answer from a node. go-redis follows MOVED
// and ASK by itself, but run without retries, as a stock client must be
// (a retried write could sell twice), it keeps sending a dead master's
// slots to the dead master after its replica is promoted: measured on the
// local cluster, every command refused for as long as it was watched,
// and answered at once after one reload. Call it once, where cc is made.
func FollowFailover(cc *redis.ClusterClient) {
	cc.AddHook(failoverHook{cc})
}

type failoverHook struct{ cc *redis.ClusterClient }

func (h failoverHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			h.cc.ReloadState(ctx)
		}
		return c, err
	}
}

func (h failoverHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		reloadIfNoAnswer(ctx, h.cc, err)
		return err
	}
}

func (h failoverHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		reloadIfNoAnswer(ctx, h.cc, err)
		return err
	}
}

// reloadIfNoAnswer has cc read the slots again (in the background, at
// most one reload at a time) when err is no answer from a node (a
// connection refused, reset or timed out, not a reply), or a reply that
// says the slots have changed: MOVED from a node sent to directly, or
// CLUSTERDOWN.
func reloadIfNoAnswer(ctx context.Context, cc *redis.ClusterClient, err error) {
	if err == nil || errors.Is(err, redis.Nil) {
		return
	}
	var reply redis.Error
	if !errors.As(err, &reply) || redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "CLUSTERDOWN") {
		cc.ReloadState(ctx)
	}
}
