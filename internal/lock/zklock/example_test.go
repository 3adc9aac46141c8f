package zklock_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"testing"

	"seckill/internal/lock/zklock"
	"seckill/internal/servers"
	"seckill/internal/zksess"
)

// exampleZK is a ZooKeeper started on first use by the Example, which,
// unlike a test, cannot call servertest.
var exampleZK struct {
	once sync.Once
	proc *servers.Process
	dir  string
}

func exampleServer() string {
	exampleZK.once.Do(func() {
		dir, err := os.MkdirTemp("", "zklock-example")
		if err != nil {
			panic(err)
		}
		addr, err := servers.LoopbackAddr()
		if err != nil {
			panic(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if exampleZK.proc, err = servers.StartZooKeeper(ctx, dir, addr); err != nil {
			panic(err)
		}
		exampleZK.dir = dir
	})
	return exampleZK.proc.Addr()
}

// TestMain skips the package, as servertest skips a test, when ZooKeeper is
// not installed outside CI: the Example could not run without it.
func TestMain(m *testing.M) {
	_, javaErr := exec.LookPath("java")
	_, jarErr := os.Stat(servers.ZooKeeperJar)
	if (javaErr != nil || jarErr != nil) && os.Getenv("CI") == "" {
		fmt.Println("zklock: ZooKeeper not installed (apt-get install zookeeper default-jre-headless); skipping")
		os.Exit(0)
	}
	code := m.Run()
	if exampleZK.proc != nil {
		_ = exampleZK.proc.Stop(5 * time.Second)
		_ = os.RemoveAll(exampleZK.dir)
	}
	os.Exit(code)
}

func ExampleLocker() {
	addrs := []string{exampleServer()} // started first: a JVM's start must not eat ctx's budget
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// One session per process, shared with the leader election.
	sess, err := zksess.Dial(ctx, addrs, 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	locker := zklock.New(sess, zklock.Options{Root: "/example/locks"})
	defer locker.Close()

	l, err := locker.Acquire(ctx, "sku-42")
	if err != nil {
		fmt.Println(err) // errors.Is(err, lock.ErrUnavailable) → answer 503
		return
	}
	select {
	case <-l.Done():
		fmt.Println("lost before writing:", l.Err()) // never write then
	default:
		// Pass l.Token() to the store, which rejects stale tokens.
		fmt.Println("holding", l.Key(), "with a fencing token:", l.Token() > 0)
	}
	if err := l.Release(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println(l.Err())
	// Output:
	// holding sku-42 with a fencing token: true
	// lock: released
}
