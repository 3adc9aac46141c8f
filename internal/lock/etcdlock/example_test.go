package etcdlock_test

import (
	"context"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"seckill/internal/etcdsess"
	"seckill/internal/lock/etcdlock"
	"seckill/internal/servers"
)

// A process builds one client and one session manager, and lends the
// session to its lockers. Work guarded by the lock stops when Done closes,
// and writes carry the fencing token.
func Example() {
	ctx := context.Background()
	etcd, stop := startEtcd(ctx) // a real etcd on a free loopback port
	defer stop()

	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{etcd},
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()
	sessions := etcdsess.New(cli, 10*time.Second)
	defer sessions.Close() // revokes the lease: held locks are freed at once
	locker := etcdlock.New(sessions, etcdlock.Options{})
	defer locker.Close()

	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lease, err := locker.Acquire(actx, "stock:42")
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	select {
	case <-lease.Done():
		fmt.Println("lost before use:", lease.Err())
	default:
		fmt.Println("holding", lease.Key(), "token>0:", lease.Token() > 0)
	}
	if err := lease.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	fmt.Println("after release:", lease.Err())
	// Output:
	// holding stock:42 token>0: true
	// after release: lock: released
}

func startEtcd(ctx context.Context) (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "etcdlock-example")
	if err != nil {
		panic(err)
	}
	if addr, err = servers.LoopbackAddr(); err != nil {
		panic(err)
	}
	p, err := servers.StartEtcd(ctx, dir, addr)
	if err != nil {
		panic(err)
	}
	return addr, func() { _ = p.Stop(5 * time.Second); _ = os.RemoveAll(dir) }
}
