package redisstore

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

// SendOnce keeps cc from sending a command again after it was sent and
// no answer came (a timeout, a reset connection): go-redis's cluster
// client does that once on the same node whatever MaxRetries says, and a
// write resent after its first run (a reset after sales, an INCR) counts
// twice. Refusals before execution (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, a
// dial that failed) are still followed. The store then decides, as on
// one Redis: a sale is retried with its attempt id or unconfirmed. Call
// it once, where cc is made, before its first command.
func SendOnce(cc *redis.ClusterClient) {
	cc.OnNewNode(func(node *redis.Client) { node.AddHook(sendOnceHook{}) })
}

type sendOnceHook struct{}

func (sendOnceHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (sendOnceHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if e := sentNoAnswer(err); e != err {
			cmd.SetErr(e)
			return e
		}
		return err
	}
}

func (sendOnceHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if e := sentNoAnswer(cmd.Err()); e != cmd.Err() {
				cmd.SetErr(e)
			}
		}
		return sentNoAnswer(err)
	}
}

// sentNoAnswer hides err from go-redis's resend test when it is no answer
// to a command that may have run: not a reply, not a dial or a pool wait
// (nothing was sent), not the caller's context (never resent anyway).
func sentNoAnswer(err error) error {
	var (
		reply redis.Error
		op    *net.OpError
	)
	switch {
	case err == nil, errors.As(err, &reply), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &op) && op.Op == "dial":
		return err
	}
	return noAnswer{err}
}

// noAnswer carries an error's text without its chain, which go-redis
// reads to decide a resend; the store sees it as what it is: the Redis
// did not answer (ErrUnavailable, WrapRedis).
type noAnswer struct{ err error }

func (e noAnswer) Error() string { return e.err.Error() }
