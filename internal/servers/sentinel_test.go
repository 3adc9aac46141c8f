package servers_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// The harness's whole point: SIGKILL the primary, Sentinel promotes the
// replica, a go-redis FailoverClient follows it and finds what was
// replicated; the old primary, started again, comes back as a replica.
func TestSentinelFailover(t *testing.T) {
	set := servertest.Sentinels(t, servers.SentinelOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	master, err := set.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if master != set.Primary.Addr() {
		t.Fatalf("sentinels name master %s, want the primary %s", master, set.Primary.Addr())
	}
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    set.MasterName,
		SentinelAddrs: set.SentinelAddrs(),
		MaxRetries:    -1,
	})
	defer rdb.Close()
	if err := rdb.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: got %d, %v; want 1 replica", n, err)
	}

	switched, err := set.WatchSwitch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := set.Primary.Kill(); err != nil {
		t.Fatal(err)
	}
	var promoted string
	select {
	case promoted = <-switched:
	case <-ctx.Done():
		t.Fatal("no +switch-master within a minute")
	}
	t.Logf("failover: +switch-master %v after SIGKILL", time.Since(killed).Round(time.Millisecond))
	if promoted != set.Replica.Addr() {
		t.Fatalf("promoted %s, want the replica %s", promoted, set.Replica.Addr())
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "before" {
		t.Fatalf("through the FailoverClient after failover: got %q, %v; want %q", got, err, "before")
	}
	if err := rdb.Set(ctx, "k", "after", 0).Err(); err != nil {
		t.Fatalf("write after failover: %v", err)
	}

	restarted := time.Now()
	if err := set.Rejoin(ctx, set.Primary); err != nil {
		t.Fatalf("the old primary did not rejoin as a replica: %v\n%s", err, set.Primary.LogTail(10))
	}
	t.Logf("old primary back as a synced replica %v after its restart", time.Since(restarted).Round(time.Millisecond))
	if err := set.WaitReplicated(ctx, 1); err != nil {
		t.Fatalf("the new primary has no replica after the rejoin: %v", err)
	}
	// One kill, one failover: every Sentinel adopted the same one (a
	// split vote may take the failover to epoch 2, never to differing
	// epochs) and names the promoted replica still (a second failover would
	// promote the old primary).
	epochs, err := set.ConfigEpochs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range epochs {
		if e < 1 || e != epochs[0] {
			t.Errorf("sentinel %d: config epoch %d after one failover (all: %v)", i+1, e, epochs)
		}
	}
	if master, err := set.Master(ctx); err != nil || master != promoted {
		t.Errorf("after the rejoin the sentinels name %s (%v), want %s", master, err, promoted)
	}
}

// A split, not a crash: the primary is cut off from the Sentinels and the
// replica, never from its client, which writes on to it after the
// Sentinels promote the replica (both nodes are masters then). Healed,
// Sentinel makes the old primary a replica of the new, and what it took
// alone is gone: the loss min-replicas-to-write and replica acks exist to
// prevent. With MinReplicasToWrite 1 the isolated primary refuses writes
// once it has not heard from its replica for min-replicas-max-lag.
func TestSentinelSplit(t *testing.T) {
	set := servertest.Sentinels(t, servers.SentinelOptions{Splittable: true})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	master, err := set.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if master != set.Front.Addr() || set.Node(master) != set.Primary {
		t.Fatalf("sentinels name master %s, want the primary's front %s", master, set.Front.Addr())
	}
	// The client of the old primary's side: it stays on it.
	old := redis.NewClient(&redis.Options{Addr: master, MaxRetries: -1})
	defer old.Close()
	if err := old.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := old.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: got %d, %v; want 1 replica", n, err)
	}
	switched, err := set.WatchSwitch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	heal, err := set.Isolate()
	if err != nil {
		t.Fatal(err)
	}
	var promoted string
	select {
	case promoted = <-switched:
	case <-ctx.Done():
		t.Fatalf("no +switch-master within two minutes of the split\n%s\n%s", set.Sentinels[0].LogTail(30), set.Replica.LogTail(15))
	}
	if promoted != set.Replica.Addr() {
		t.Fatalf("promoted %s, want the replica %s", promoted, set.Replica.Addr())
	}
	// Two masters: the isolated one still takes its client's writes.
	if err := old.Set(ctx, "k", "alone", 0).Err(); err != nil {
		t.Fatalf("the isolated primary refused a write: %v", err)
	}
	if n, err := old.Wait(ctx, 1, 200*time.Millisecond).Result(); err != nil || n != 0 {
		t.Fatalf("WAIT on the isolated primary: got %d, %v; want 0 replicas", n, err)
	}
	heal()
	// Sentinel demotes it (its next look, within seconds), and it resyncs
	// from the new primary, dropping what it took alone.
	if err := set.WaitReplicated(ctx, 1); err != nil {
		t.Fatalf("the old primary never replicated from the new one: %v\n%s", err, servers.NodeState(ctx, set.Primary.Addr()))
	}
	nu := redis.NewClient(&redis.Options{Addr: promoted, MaxRetries: -1})
	defer nu.Close()
	if got, err := nu.Get(ctx, "k").Result(); err != nil || got != "before" {
		t.Fatalf("on the new primary: got %q, %v; want %q (the write taken alone is lost)", got, err, "before")
	}
	if got, err := old.Get(ctx, "k").Result(); err != nil || got != "before" {
		t.Fatalf("on the demoted old primary: got %q, %v; want %q", got, err, "before")
	}
}
