// Package servertest starts real servers for tests and stops them in
// t.Cleanup. A missing binary skips the test with the install command, except
// under CI (CI set in the environment), where it fails: CI must never pass by
// skipping the real thing.
package servertest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"seckill/internal/servers"
)

// Redis starts a redis-server on a free loopback port.
func Redis(t testing.TB) *servers.Process {
	t.Helper()
	return start(t, servers.StartRedis, "redis-server")
}

// RedisWith starts a redis-server with more arguments after the harness's
// own (servers.RedisWith): "--appendonly", "yes" for one with an AOF.
func RedisWith(t testing.TB, args ...string) *servers.Process {
	t.Helper()
	return start(t, servers.RedisWith(args...), "redis-server")
}

// RedisOnClock starts a redis-server whose wall clock the test steps with
// the returned clock (servers.ShiftedClock), with more arguments as
// RedisWith.
func RedisOnClock(t testing.TB, args ...string) (*servers.Process, *servers.ShiftedClock) {
	t.Helper()
	clock, err := servers.NewShiftedClock(t.TempDir())
	if errors.Is(err, servers.ErrNoCompiler) {
		SkipOrFail(t, err, "gcc")
	}
	if err != nil {
		t.Fatal(err)
	}
	return start(t, servers.RedisOnClock(clock, args...), "redis-server"), clock
}

// Etcd starts a single-member etcd on a free loopback port.
func Etcd(t testing.TB) *servers.Process {
	t.Helper()
	return start(t, servers.StartEtcd, "etcd-server")
}

// ZooKeeper starts a standalone ZooKeeper on a free loopback port.
func ZooKeeper(t testing.TB) *servers.Process {
	t.Helper()
	return start(t, servers.StartZooKeeper, "zookeeper default-jre-headless")
}

// MariaDB starts a mariadbd with a fresh data directory on a free loopback
// port; servers.MariaDBDSN(p.Addr()) connects to it.
func MariaDB(t testing.TB) *servers.Process {
	t.Helper()
	return start(t, servers.StartMariaDB, "mariadb-server")
}

type starter func(ctx context.Context, dir, addr string) (*servers.Process, error)

func start(t testing.TB, fn starter, pkgs string) *servers.Process {
	t.Helper()
	addr, err := servers.LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := fn(ctx, t.TempDir(), addr)
	if errors.Is(err, servers.ErrNotInstalled) {
		SkipOrFail(t, err, pkgs)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
	return p
}

// SkipOrFail skips t because a dependency is missing, or fails it under CI.
func SkipOrFail(t testing.TB, err error, pkgs string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%v (CI must have it: apt-get install %s, or run scripts/install-deps.sh)", err, pkgs)
	}
	t.Skipf("%v: install with `sudo apt-get install %s` or `make deps`", err, pkgs)
}
