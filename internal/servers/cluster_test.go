package servers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

func startCluster(t *testing.T) *servers.RedisCluster {
	t.Helper()
	began := time.Now()
	c := servertest.RedisCluster(t)
	t.Logf("cluster formed in %v", time.Since(began).Round(time.Millisecond))
	if len(c.Masters()) != 3 || len(c.Replicas()) != 3 || len(c.Addrs()) != 6 {
		t.Fatalf("%d masters, %d replicas, %d addrs; want 3, 3, 6", len(c.Masters()), len(c.Replicas()), len(c.Addrs()))
	}
	return c
}

func clusterClient(t *testing.T, c *servers.RedisCluster) *redis.ClusterClient {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:       c.Addrs(),
		DialTimeout: time.Second,
		ReadTimeout: time.Second,
	})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// Keys in many slots are written and read through a ClusterClient and
// spread over all three masters: the slots really are split.
func TestRedisClusterForms(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rdb := clusterClient(t, c)
	const n = 200
	for i := range n {
		key := fmt.Sprintf("{k%d}", i)
		if err := rdb.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
	}
	for i := range n {
		key := fmt.Sprintf("{k%d}", i)
		if got, err := rdb.Get(ctx, key).Int(); err != nil || got != i {
			t.Fatalf("GET %s: got %d, %v; want %d", key, got, err, i)
		}
	}
	var mu sync.Mutex
	sizes := map[string]int64{}
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		size, err := m.DBSize(ctx).Result()
		if err != nil {
			return err
		}
		mu.Lock()
		sizes[m.Options().Addr] = size
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, m := range c.Masters() {
		if sizes[m.Addr()] == 0 {
			t.Errorf("master %s holds no keys (sizes %v)", m.Addr(), sizes)
		}
		total += sizes[m.Addr()]
	}
	if total != n || len(sizes) != 3 {
		t.Errorf("masters hold %v, %d keys in all; want 3 masters and %d", sizes, total, n)
	}
}

// A script's keys must share a slot: a hash tag makes them, and keys of
// different slots are refused with CROSSSLOT.
func TestRedisClusterSlots(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rdb := clusterClient(t, c)
	const script = "redis.call('set',KEYS[1],1) return redis.call('incr',KEYS[2])"
	if got, err := rdb.Eval(ctx, script, []string{"{t}:a", "{t}:b"}).Int(); err != nil || got != 1 {
		t.Fatalf("EVAL on one hash tag: got %d, %v; want 1", got, err)
	}
	slotA, errA := rdb.ClusterKeySlot(ctx, "a").Result()
	slotB, errB := rdb.ClusterKeySlot(ctx, "b").Result()
	if errA != nil || errB != nil || slotA == slotB {
		t.Fatalf("slots of a and b: %d (%v), %d (%v); want two different ones", slotA, errA, slotB, errB)
	}
	err := rdb.Eval(ctx, script, []string{"a", "b"}).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Fatalf("EVAL on two slots: %v; want a CROSSSLOT error", err)
	}
}

// SIGKILL a master: within a few node timeouts its replica is promoted,
// holds what was replicated, and the ClusterClient writes there again.
func TestRedisClusterFailover(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rdb := clusterClient(t, c)
	master := c.Masters()[0]

	// A key of the victim's: the first that it takes without MOVED.
	direct := redis.NewClient(&redis.Options{Addr: master.Addr(), MaxRetries: -1})
	defer direct.Close()
	var key string
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("{f%d}", i)
		err := direct.Set(ctx, k, "before", 0).Err()
		switch {
		case err == nil:
			key = k
		case !strings.HasPrefix(err.Error(), "MOVED"):
			t.Fatalf("SET %s on %s: %v", k, master.Addr(), err)
		}
	}
	if n, err := direct.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: got %d, %v; want 1 replica", n, err)
	}

	killed := time.Now()
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, 15*time.Second)
	defer waitCancel()
	promoted, err := c.WaitPromoted(waitCtx, master)
	if err != nil {
		var states []string
		for _, a := range c.Addrs() {
			states = append(states, servers.NodeState(ctx, a))
		}
		t.Fatalf("%v\n%s", err, strings.Join(states, "\n"))
	}
	t.Logf("replica %s promoted %v after SIGKILL", promoted.Addr(), time.Since(killed).Round(time.Millisecond))
	if promoted != c.ReplicaOf(master) {
		t.Fatalf("promoted %s, want %s's replica", promoted.Addr(), master.Addr())
	}

	on := redis.NewClient(&redis.Options{Addr: promoted.Addr(), MaxRetries: -1})
	defer on.Close()
	if got, err := on.Get(ctx, key).Result(); err != nil || got != "before" {
		t.Fatalf("GET %s on the promoted replica: got %q, %v; want the replicated %q", key, got, err, "before")
	}

	// The client still maps the slot to the dead master until a
	// failed call makes it reload the slots: retry until it has.
	retry := time.NewTicker(50 * time.Millisecond)
	defer retry.Stop()
	for {
		err := rdb.Set(waitCtx, key, "after", 0).Err()
		if err == nil {
			break
		}
		select {
		case <-waitCtx.Done():
			t.Fatalf("SET %s after failover: %v", key, err)
		case <-retry.C:
		}
	}
	t.Logf("ClusterClient wrote %s %v after SIGKILL", key, time.Since(killed).Round(time.Millisecond))
	if got, err := on.Get(ctx, key).Result(); err != nil || got != "after" {
		t.Fatalf("GET %s on the promoted replica: got %q, %v; want %q", key, got, err, "after")
	}
}

// A start that fails half way (here: formation outlasts its deadline,
// after all six processes are up) leaves no process and no directory.
func TestRedisClusterStartFailsClean(t *testing.T) {
	dir := t.TempDir()
	_, err := servers.StartRedisCluster(t.Context(), dir, servers.RedisClusterOptions{FormTimeout: 200 * time.Millisecond})
	if err == nil {
		t.Fatal("a cluster formed within 200ms; the test needs a start that fails")
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("after the failed start %s holds %d entries (%v), want none", dir, len(ents), err)
	}
	if left := processesIn(t, dir); len(left) > 0 {
		t.Errorf("redis-server processes left running in %s: %v", dir, left)
	}
}

// processesIn lists the redis-server processes whose working directory
// is under dir: Redis rewrites its command line, so the directory is
// what tells ours from anyone else's.
func processesIn(t *testing.T, dir string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, p := range procs {
		comm, err := os.ReadFile(filepath.Join(p, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "redis-server" {
			continue // gone meanwhile, or not a redis-server
		}
		stat, err := os.ReadFile(filepath.Join(p, "stat"))
		if err == nil && strings.Contains(string(stat), ") Z ") {
			continue // a zombie awaiting its reaper has run its course
		}
		cwd, err := os.Readlink(filepath.Join(p, "cwd"))
		if err == nil && strings.HasPrefix(cwd, dir) {
			found = append(found, filepath.Base(p)+" "+cwd)
		}
	}
	return found
}
