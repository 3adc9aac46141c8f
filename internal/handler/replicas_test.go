package handler_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/handler"
	"seckill/internal/lock/locallock"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// POST /stock/reset with stock.min_replica_acks 1, against a real primary,
// replica and Sentinels: with the replica frozen (SIGSTOP) the reset is a
// 503 that says to reset again, not a 200 a failover could undo; once it
// thaws the reset is a 200 and the replica, read directly, holds the new
// stock as soon as the answer is in.
func TestResetWaitsForReplica(t *testing.T) {
	set := servertest.Sentinels(t, servers.SentinelOptions{})
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: set.MasterName, SentinelAddrs: set.SentinelAddrs(), MaxRetries: -1,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	// The long default: a busy machine's replica acks a step that must be
	// acknowledged; the frozen one cannot, whatever the bound.
	acks := redisstore.ReplicaAcks{Replicas: 1}
	store := redisstore.NewStore(rdb, redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "fence"}).WithReplicaAcks(acks)
	svc := stock.NewService(stock.ServiceConfig{Store: store, Locker: locallock.New(), Backend: "local", LockKey: "k"})
	e := &env{rdb: rdb, store: store, h: handler.New(handler.Config{
		Replica: replica, AdminToken: token, MinReplicaAcks: acks.Replicas, ReplicaAckTimeout: acks.Timeout.Duration(), Sentinel: true,
	}, handler.Deps{Seller: svc, Inventory: store})}
	replicaRDB := redis.NewClient(&redis.Options{Addr: set.Replica.Addr()})
	t.Cleanup(func() { _ = replicaRDB.Close() })

	if r := e.do(t, "GET", "/info", ""); r.body["min_replica_acks"] != 1.0 || r.body["sentinel"] != true || r.body["replica_ack_timeout_ms"] != float64(redisstore.DefaultReplicaAckTimeout.Milliseconds()) {
		t.Fatalf("info: got %s, want min_replica_acks 1, replica_ack_timeout_ms %d, sentinel true", r.raw, redisstore.DefaultReplicaAckTimeout.Milliseconds())
	}
	if err := set.Replica.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = set.Replica.Resume() }()
	r := e.do(t, "POST", "/stock/reset", `{"stock":7}`, "X-Admin-Token", token)
	if r.code != 503 || r.body["error"] != "reset not acknowledged by enough replicas in time (stock.min_replica_acks); a failover could bring back the old sale: reset again" {
		t.Fatalf("reset with the replica stopped: got %d %s, want 503 naming the replicas", r.code, r.raw)
	}
	if err := set.Replica.Resume(); err != nil {
		t.Fatal(err)
	}
	// The thawed replica has the refused reset's writes to catch up on first.
	if err := set.WaitReplicated(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if r := e.do(t, "POST", "/stock/reset", `{"stock":9}`, "X-Admin-Token", token); r.code != 200 {
		t.Fatalf("reset with the replica back: got %d %s, want 200", r.code, r.raw)
	}
	if got, err := replicaRDB.Get(t.Context(), "stock").Result(); err != nil || got != "9" {
		t.Fatalf("replica right after the 200: stock %q, %v; want 9", got, err)
	}
	if r := e.do(t, "POST", "/stock/reduce", ""); r.code != 200 || r.body["stock"] != 8.0 {
		t.Fatalf("sale after the reset: got %d %s, want 200 with stock 8", r.code, r.raw)
	}
}
