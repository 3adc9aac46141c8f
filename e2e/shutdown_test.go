package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"seckill/internal/lab"
	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// shutdownTimeout is stockd's http.shutdown_timeout in these tests, and
// shutdownSlack what the rest of the shutdown (resigning, closing the
// locker and the sessions, each bounded on its own) may add to it: about
// 3 s with etcd cut off on a quiet machine, 5.0-5.4 s in full -race runs
// on 2 cores, more under a CPU hog. What the test tells apart is a
// shutdown bounded by its own deadlines from one that waits for a lease or
// session to run out, so every lease here (leaseTTL) is set well past the
// bound rather than the bound squeezed under the default 10 s leases.
const (
	shutdownTimeout = 3 * time.Second
	shutdownSlack   = 15 * time.Second
	leaseTTL        = 40 * time.Second
)

// TestShutdownBounded: a stockd told to stop (SIGTERM) while its lock
// server — or every server — is unreachable exits within
// http.shutdown_timeout plus a small slack, for every backend with a
// server, with the leader election on for etcd and ZooKeeper. Sales are in
// flight when the signal arrives. A replica that overstays is dumped with
// SIGQUIT (its goroutines land in its log) and the test fails with the
// stacks of stockd's own code.
func TestShutdownBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("shutdown: seconds of real processes")
	}
	cfg := lab.ClusterConfig()
	cfg.Replicas = 1
	cfg.Stockd = stockdPath(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	c, err := localcluster.Start(ctx, cfg)
	cancel()
	if errors.Is(err, servers.ErrNotInstalled) {
		servertest.SkipOrFail(t, err, "redis-server nginx-light")
	}
	if err != nil {
		t.Fatalf("start fault cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Logf("close fault cluster: %v", err)
		}
	})

	for _, backend := range []string{"redis", "redisson", "etcd", "zookeeper"} {
		for _, cut := range []struct {
			name  string
			links []localcluster.Link
		}{
			{"LockServerCut", []localcluster.Link{localcluster.LinkLock}},
			{"AllServersCut", []localcluster.Link{localcluster.LinkLock, localcluster.LinkStock}},
		} {
			t.Run(backend+"/"+cut.name, func(t *testing.T) {
				took := stopWhileCut(t, c, backend, cut.links)
				t.Logf("%s exited %v after SIGTERM (bound %v)", backend, took.Round(time.Millisecond), shutdownTimeout+shutdownSlack)
			})
		}
	}
}

// stopWhileCut switches c's replica to backend, cuts its links, puts sales
// in flight, sends SIGTERM and returns how long the replica took to exit.
// It fails the test when that is beyond the bound.
func stopWhileCut(t *testing.T, c *localcluster.Cluster, backend string, links []localcluster.Link) time.Duration {
	t.Helper()
	env := map[string]string{
		// Leases and sessions longer than the bound: a shutdown must not
		// wait for one to run out.
		"http.shutdown_timeout":     shutdownTimeout.String(),
		"lock.ttl":                  leaseTTL.String(),
		"redisson.watchdog":         leaseTTL.String(),
		"etcd.session_ttl":          leaseTTL.String(),
		"zookeeper.session_timeout": leaseTTL.String(),
		// A lock of its own per subtest: the previous subtest's replica was
		// stopped with its servers cut off, so its lock stays held for a
		// whole lease. (The reset below clears the fence, so the new lock's
		// identity is accepted at once.)
		"lock.key":          "seckill:lock:shutdown:" + strings.ReplaceAll(t.Name(), "/", ":"),
		"lock.wait_timeout": "10s",
		"log.level":         "info",
		"work.delay":        "1500ms",
	}
	if backend == "etcd" || backend == "zookeeper" {
		env["election.backend"] = backend
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := c.SetBackend(ctx, backend, env); err != nil {
		t.Fatalf("switch to %s: %v\n%s", backend, err, c.Logs(20))
	}
	client := loadgen.NewClient(8, 30*time.Second)
	defer client.CloseIdleConnections()
	if err := loadgen.Reset(ctx, client, c.URL(), c.AdminToken(), 100); err != nil {
		t.Fatalf("reset stock: %v", err)
	}

	// One sale that succeeds proves the lock is free: the sales put in
	// flight below then queue behind each other, not behind a dead holder
	// (which would let them time out before the signal, leaving nothing in
	// flight).
	acquired := firstSale(t, client, c.ReplicaURL(0))

	// A sale holds the lock (in its critical section, work.delay long) and
	// the others queue behind it when the servers become unreachable.
	inFlight(t, client, c.ReplicaURL(0)+"/stock/reduce", 4)
	waitLocked(t, client, c.ReplicaURL(0)+"/metrics", acquired)
	for _, link := range links {
		restore, err := c.Cut(0, link)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := restore(); err != nil {
				t.Errorf("restore %s: %v", link, err)
			}
		})
	}

	p := c.Replica(0)
	start := time.Now()
	if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM %s: %v", p.Name(), err)
	}
	bound := shutdownTimeout + shutdownSlack
	select {
	case <-p.Exited():
		took := time.Since(start)
		// A stop with the servers unreachable is still a clean stop: what
		// could not be released expires with its lease or session.
		if code := p.ExitCode(); code != 0 {
			t.Errorf("%s (%s, links %v cut) exited with status %d after SIGTERM, want 0:\n%s", p.Name(), backend, links, code, p.LogTail(15))
		}
		return took
	//testwait:ok the bound is what is tested (exit within http.shutdown_timeout + slack), and the goroutine dump needs stockd still running at it
	case <-time.After(bound):
	}
	// Still running: dump its goroutines (SIGQUIT: the Go runtime prints
	// every stack to stderr, the replica's log, and exits).
	_ = syscall.Kill(p.Pid(), syscall.SIGQUIT)
	select {
	case <-p.Exited():
	case <-testwait.Until(t).Done():
		_ = p.Kill()
	}
	t.Errorf("%s (%s, links %v cut) still running %v after SIGTERM, want exit within http.shutdown_timeout %v + %v; goroutine dump in %s; stockd's stacks:\n%s",
		p.Name(), backend, links, bound, shutdownTimeout, shutdownSlack, p.LogPath(), ownStacks(p.LogPath()))
	return time.Since(start)
}

// inFlight starts n sales on url and returns once each request has been
// written to the replica's socket; their answers (or errors) are not
// waited for: the replica is about to be stopped under them.
func inFlight(t *testing.T, client *http.Client, url string, n int) {
	t.Helper()
	wrote := make(chan struct{}, n)
	for range n {
		trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote <- struct{}{} }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			if resp, err := client.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}()
	}
	until := testwait.Until(t)
	for range n {
		select {
		case <-wrote:
		case <-until.Done():
			t.Fatalf("sales not sent to %s", url)
		}
	}
}

// firstSale sells until one sale succeeds on the replica at base (each
// attempt waits up to lock.wait_timeout for the lock) and returns the lock
// wait count after it. The lock is a fresh one, so nothing holds it: a
// sale must come, and the wait is bounded by the test's deadline.
func firstSale(t *testing.T, client *http.Client, base string) float64 {
	t.Helper()
	until := testwait.Until(t)
	for last := ""; ; {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/stock/reduce", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
		} else {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return metric(t, client, base+"/metrics", "seckill_lock_wait_seconds_count")
			}
			last = resp.Status + " " + string(b)
		}
		if until.Err() != nil {
			t.Fatalf("no sale on %s succeeded (last answer: %s)", base, last)
		}
	}
}

// waitLocked waits until the replica whose metrics are at url has
// acquired the lock for one more sale than the after sales it had (the
// lock wait histogram counts past after). The metric is state, not an
// event: it is polled with a short backoff.
func waitLocked(t *testing.T, client *http.Client, url string, after float64) {
	t.Helper()
	until := testwait.Until(t)
	for backoff := time.Millisecond; ; backoff = min(2*backoff, 50*time.Millisecond) {
		if n := metric(t, client, url, "seckill_lock_wait_seconds_count"); n > after {
			return
		}
		if until.Err() != nil {
			t.Fatalf("no sale acquired the lock (%s)", url)
		}
		time.Sleep(backoff)
	}
}

// metric reads one sample's value from a Prometheus text page; 0 if absent.
func metric(t *testing.T, client *http.Client, url, name string) float64 {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && (f[0] == name || strings.HasPrefix(f[0], name+"{")) {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", url, line, err)
			}
			return v
		}
	}
	return 0
}

// ownStacks returns the goroutines of a Go dump in path that run this
// module's code (the runtime's and libraries' idle goroutines left out).
func ownStacks(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	s := string(b)
	if i := strings.Index(s, "SIGQUIT"); i >= 0 {
		s = s[i:]
	}
	var out []string
	for _, g := range strings.Split(s, "\n\n") {
		if strings.HasPrefix(g, "goroutine ") && strings.Contains(g, "seckill/") {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		return "(no goroutine of seckill's code in the dump)"
	}
	return strings.Join(out, "\n\n")
}
