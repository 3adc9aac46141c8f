package bench

import (
	"context"
	"strings"
	"sync/atomic"

	"seckill/internal/servers"

	"github.com/redis/go-redis/v9"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// How lock round trips are counted (docs/benchmarks.md repeats this):
//
//   - Redis: the lock clients (separate from the clients that read and write
//     the stock) carry a go-redis Hook that counts every command and every
//     pipeline as one round trip. The sale loop tags the ctx it passes to
//     Lock and to unlock, so a command sent under Lock's ctx is an acquire
//     round trip whatever the library does (SET NX, EVALSHA, redsync's
//     clean-up DEL after a failed try). Pub/sub messages are not requests and
//     are not counted; background work (watchdog renewals) counts only in
//     the total.
//   - etcd: the clients get gRPC interceptors. Unary RPCs (Txn, Range,
//     DeleteRange, …) are tagged by ctx as for Redis; a watch created on the
//     shared Watch stream counts as one acquire round trip (only waiters and
//     holders watching for waiters create watches). Lease keep-alives are
//     not counted.
//   - ZooKeeper: go-zookeeper has no hook, and zksess dials for us, so the
//     count is server-side: the delta of `mntr`'s zk_packets_received over
//     the row (every request from every client: create, getChildren,
//     getData/exists watches, delete, plus the odd ping). Nothing else
//     talks to that ZooKeeper during the micro rows. Both zk rows release
//     with one delete, so acquire round trips are total − 1 per acquisition.

// phase tags a ctx with what the sale loop is doing, for the counters.
type phase int

const (
	phaseOther phase = iota
	phaseAcquire
	phaseRelease
)

type phaseKey struct{}

func withPhase(ctx context.Context, p phase) context.Context {
	return context.WithValue(ctx, phaseKey{}, p)
}

func phaseOf(ctx context.Context) phase {
	p, _ := ctx.Value(phaseKey{}).(phase)
	return p
}

// Counter counts lock round trips by phase. Its zero value is ready.
type Counter struct {
	acquire, release, other atomic.Int64
}

// counts is a snapshot of a Counter.
type counts struct{ Acquire, Release, Other int64 }

func (c counts) total() int64 { return c.Acquire + c.Release + c.Other }

func (c counts) sub(o counts) counts {
	return counts{c.Acquire - o.Acquire, c.Release - o.Release, c.Other - o.Other}
}

func (c *Counter) snapshot() counts {
	return counts{c.acquire.Load(), c.release.Load(), c.other.Load()}
}

func (c *Counter) add(ctx context.Context) {
	switch phaseOf(ctx) {
	case phaseAcquire:
		c.acquire.Add(1)
	case phaseRelease:
		c.release.Add(1)
	default:
		c.other.Add(1)
	}
}

// redisHook counts round trips of a go-redis client.
type redisHook struct{ c *Counter }

var _ redis.Hook = redisHook{}

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// Connection set-up (HELLO, CLIENT SETINFO) is not the lock's doing.
		if n := cmd.Name(); n != "hello" && n != "client" {
			h.c.add(ctx)
		}
		return next(ctx, cmd)
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.c.add(ctx) // one pipeline, one round trip
		return next(ctx, cmds)
	}
}

// grpcCounting returns dial options that count etcd RPCs into c.
func grpcCounting(c *Counter) []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c.add(ctx)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || !strings.HasSuffix(method, "/Watch") {
			return s, err
		}
		return &watchStream{ClientStream: s, c: c}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

// watchStream counts watch creations sent on etcd's shared Watch stream.
type watchStream struct {
	grpc.ClientStream
	c *Counter
}

func (w *watchStream) SendMsg(m any) error {
	if req, ok := m.(*pb.WatchRequest); ok && req.GetCreateRequest() != nil {
		w.c.acquire.Add(1)
	}
	return w.ClientStream.SendMsg(m)
}

// zkPackets reads zk_packets_received from ZooKeeper's mntr command.
func zkPackets(ctx context.Context, addr string) (int64, error) {
	return servers.ZooKeeperStat(ctx, addr, "zk_packets_received")
}
