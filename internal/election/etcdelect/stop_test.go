package etcdelect_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"

	"seckill/internal/election"
	"seckill/internal/election/etcdelect"
	"seckill/internal/etcdsess"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// A follower waiting in its campaign must stop while etcd is unreachable:
// its cleanup has its own bounded deadline, not the client's lifetime
// (which ends only after the election stopped, as in stockd's shutdown).
func TestFollowerStopsWhileEtcdUnreachable(t *testing.T) {
	etcd := servertest.Etcd(t)
	admin := dial(t, etcd.Addr())
	path := "/test/" + t.Name() + "/"

	lm := etcdsess.New(admin, ttl)
	leader := etcdelect.New(lm, etcdelect.Options{Prefix: path, ID: "leader"})
	t.Cleanup(func() { _ = lm.Close() })
	t.Cleanup(func() { _ = leader.Close() })
	ctx := testwait.Until(t)
	if _, err := leader.Campaign(ctx); err != nil {
		t.Fatal(err)
	}

	// This etcd is the test's own: its only watcher so far is the
	// leader's, registered asynchronously; the follower's comes next.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	waitWatchers := func(n int, what string) {
		t.Helper()
		for watchers(t, etcd.Addr()) < n {
			select {
			case <-tick.C:
			case <-ctx.Done():
				t.Fatal(what)
			}
		}
	}
	waitWatchers(1, "the leader did not watch its key")

	follower, proxy, fcli := proxiedElector(t, etcd.Addr(), path, "follower")
	runner := election.NewRunner(election.RunnerConfig{
		Elector: follower,
		Job:     func(context.Context, uint64) error { return nil },
	})
	rctx, stop := context.WithCancel(context.Background())
	defer stop()
	exited := make(chan error, 1)
	go func() { exited <- runner.Run(rctx) }()

	// The follower waits in Campaign once it watches the leader's key.
	// etcd offers no event for another client's watch: poll its gauge.
	waitWatchers(2, "the follower did not start waiting in its campaign")

	// Stop once the follower's client knows the link is down, so no
	// request can slip out on the dying connection: from here on, only a
	// cleanup with its own deadline can end.
	conn := fcli.ActiveConnection()
	proxy.Cut()
	for st := conn.GetState(); st == connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			t.Fatal("the follower's connection still looked up after the cut")
		}
	}
	stop()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-ctx.Done():
		t.Fatal("the follower's Run did not return after its ctx ended while etcd was unreachable")
	}
	if st := runner.Status(); st.Leading {
		t.Fatalf("follower status = %+v, want not leading", st)
	}
	closed := make(chan error, 1)
	go func() { closed <- follower.Close() }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the follower's Close did not return while etcd was unreachable")
	}
}

// watchers reads etcd's gauge of open watchers from its /metrics page.
func watchers(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "etcd_debugging_mvcc_watcher_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(f)
		}
	}
	t.Fatalf("no etcd_debugging_mvcc_watcher_total in %s/metrics", addr)
	return 0
}
