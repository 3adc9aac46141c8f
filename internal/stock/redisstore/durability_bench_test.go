package redisstore_test

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"seckill/internal/lock/locallock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/witness"
)

// BenchmarkDurability is what it costs that a sale answered 200 outlives
// its Redis: the same atomic sale (the ledger on, an anonymous buyer)
// against three real redis-servers, one without persistence, one with an
// AOF fsynced every second, one fsyncing before every answer. buyers=1 is
// one sale at a time; buyers=32 are concurrent, and under "always" one
// fsync covers every write of an event-loop turn, so they share it. The
// AOF is in the test's temp dir: where that is a tmpfs, fsync costs
// nothing and "always" measures like "everysec". "+witness" adds the etcd
// witness (stock.witness etcd): each answer waits for its stock-after to
// be recorded in a real etcd, concurrent sales sharing one write.
func BenchmarkDurability(b *testing.B) {
	var cli *clientv3.Client
	for _, p := range []struct {
		name    string
		args    []string
		witness bool
	}{
		{"none", nil, false},
		{"aof-everysec", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, false},
		{"aof-always", []string{"--appendonly", "yes", "--appendfsync", "always"}, false},
		{"aof-everysec+witness", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, true},
	} {
		if p.witness && cli == nil {
			etcd := servertest.Etcd(b)
			var err error
			cli, err = clientv3.New(clientv3.Config{Endpoints: []string{etcd.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = cli.Close() })
		}
		srv := servertest.RedisWith(b, p.args...)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
		b.Cleanup(func() { _ = rdb.Close() })
		for _, buyers := range []int{1, 32} {
			b.Run(p.name+"/buyers="+strconv.Itoa(buyers), func(b *testing.B) {
				store := redisstore.NewStore(rdb, redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Orders: ordersKey})
				if p.witness {
					store = store.WithWitness(witness.NewEtcd(cli, "/bench/witness"), 0)
				}
				if err := store.Reset(b.Context(), redisstore.MaxStock); err != nil {
					b.Fatal(err)
				}
				if err := store.LoadScripts(b.Context()); err != nil {
					b.Fatal(err)
				}
				svc := stock.NewService(stock.ServiceConfig{Store: store, Locker: locallock.New(), Mode: stock.ModeAtomic,
					Backend: "local", LockKey: "seckill:lock"})
				if buyers == 1 {
					for b.Loop() {
						if _, err := svc.ReduceFor(b.Context(), stock.Buyer{}); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					procs := runtime.GOMAXPROCS(0)
					b.SetParallelism((buyers + procs - 1) / procs)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := svc.ReduceFor(b.Context(), stock.Buyer{}); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.StopTimer()
				// The next run starts from an empty Redis (and a short AOF).
				if err := rdb.FlushAll(b.Context()).Err(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
