package redislock_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/redislock"
	"seckill/internal/servers"
)

func ExampleLocker() {
	// A throwaway redis-server for the example; a service gets its client
	// from its configuration instead.
	dir, _ := os.MkdirTemp("", "redislock-example")
	defer os.RemoveAll(dir)
	addr, _ := servers.LoopbackAddr()
	srv, err := servers.StartRedis(context.Background(), dir, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop(5 * time.Second)

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker := redislock.New(rdb, redislock.Options{TTL: 5 * time.Second})
	defer locker.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	lease, err := locker.Acquire(ctx, "sku:42")
	if err != nil {
		log.Fatal(err) // errors.Is(err, lock.ErrNotObtained) when busy past ctx, lock.ErrUnavailable when Redis is down
	}
	// Pass the token to the store so it can refuse writes from an older holder.
	// It is the lock's acquisition count in Redis shifted left 16 bits, plus
	// the passes within this process since (1<<16 | 0 here).
	fmt.Println("holding", lease.Key(), "with token", lease.Token())
	select {
	case <-lease.Done():
		fmt.Println("lost:", lease.Err()) // stop: the lock is no longer ours
	default:
		// ... the critical section ...
	}
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", lease.Err())
	// Output:
	// holding sku:42 with token 65536
	// released: lock: released
}
