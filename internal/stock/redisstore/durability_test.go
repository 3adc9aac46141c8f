package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locallock"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

func client(t *testing.T, srv *servers.Process) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// The promise held to a real failure: sales answered sold, then the Redis
// process SIGKILLed and started again on the same directory. With an AOF
// every sale is back; without one the sale is gone (the control). A kill
// leaves what Redis wrote in the kernel's page cache, which reaches the
// file, so this cannot tell fsync everysec from always: a machine crash,
// where they differ, is argued in the README, not exercised.
func TestAcknowledgedSalesSurviveRedisKill(t *testing.T) {
	const initial, sales = 50, 20
	for _, tc := range []struct {
		name string
		args []string
		kept bool
	}{
		{"no AOF (control)", nil, false},
		{"AOF everysec", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, true},
		{"AOF always", []string{"--appendonly", "yes", "--appendfsync", "always"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := servertest.RedisWith(t, tc.args...)
			rdb := client(t, srv)
			store := redisstore.NewStore(rdb, redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Orders: ordersKey})
			if err := store.Reset(t.Context(), initial); err != nil {
				t.Fatal(err)
			}
			svc := stock.NewService(stock.ServiceConfig{Store: store, Locker: locallock.New(), Mode: stock.ModeAtomic,
				Backend: "local", LockKey: "seckill:lock"})
			for range sales {
				if _, err := svc.ReduceFor(t.Context(), stock.Buyer{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if err := srv.Start(ctx); err != nil {
				t.Fatal(err)
			}
			// A new client: the old one's connections died with the server.
			got, err := client(t, srv).MGet(ctx, "stock", "lucky").Result()
			if err != nil {
				t.Fatal(err)
			}
			if tc.kept {
				if got[0] != "30" || got[1] != "20" {
					t.Fatalf("after kill -9 and restart: stock, lucky = %v, want 30, 20 (every sale answered sold)", got)
				}
				return
			}
			if got[0] != nil || got[1] != nil {
				t.Fatalf("control: stock, lucky = %v after a restart without AOF, want both gone", got)
			}
		})
	}
}
