package redissonlock_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/redissonlock"
	"seckill/internal/servers"
)

// A reentrant critical section: the outer and the inner step each take the
// lock through the same Lease, and only the last Release frees it.
func Example() {
	ctx := context.Background()
	// A throwaway redis-server; a service would get its client from cmd/.
	dir, _ := os.MkdirTemp("", "redisson-example")
	defer os.RemoveAll(dir)
	addr, _ := servers.LoopbackAddr()
	srv, err := servers.StartRedis(ctx, dir, addr)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop(5 * time.Second)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()

	locker := redissonlock.New(rdb, redissonlock.Options{}) // 30s watchdog
	defer locker.Close()

	l, err := locker.Acquire(ctx, "sku:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	lease := l.(*redissonlock.Lease)
	fmt.Println("token", lease.Token(), "holds", lease.HoldCount())

	// A nested step that needs the same lock re-enters instead of deadlocking.
	if err := lease.Reacquire(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("holds", lease.HoldCount())

	_ = lease.Release(ctx) // inner step done; still held
	fmt.Println("holds", lease.HoldCount(), "err", lease.Err())
	_ = lease.Release(ctx) // outer step done; freed, waiters woken
	<-lease.Done()
	fmt.Println("holds", lease.HoldCount(), "err", lease.Err())
	fmt.Println("acquire scripts", locker.Stats().AcquireScripts)
	// Output:
	// token 1 holds 1
	// holds 2
	// holds 1 err <nil>
	// holds 0 err lock: released
	// acquire scripts 2
}
