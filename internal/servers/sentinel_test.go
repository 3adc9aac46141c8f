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
		MasterName:    servers.SentinelMaster,
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
