package localcluster

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

func TestNginxConfValid(t *testing.T) {
	err := CheckNginxConf(t.Context(), t.TempDir(), []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"})
	if err != nil {
		t.Fatal(err)
	}
}

// upstream counts requests and, when crash is set, drops the connection
// without answering: a replica that died after reading the request.
type upstream struct {
	crash bool
	hits  atomic.Int64
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.hits.Add(1)
	if u.crash {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	_, _ = w.Write([]byte(`{"result":"sold"}`))
}

// startNginx runs the real nginx with the local template in front of the
// given upstreams.
func startNginx(t *testing.T, upstreams ...*httptest.Server) string {
	t.Helper()
	path, err := NginxPath()
	if err != nil {
		servertest.SkipOrFail(t, err, "nginx-light")
	}
	dir := t.TempDir()
	listen, err := servers.LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, u := range upstreams {
		addrs = append(addrs, u.Listener.Addr().String())
	}
	conf, err := renderNginx(dir, nginxConf{Dir: dir, Listen: listen, Replicas: addrs, ReadTimeout: "5s"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := servers.Start(t.Context(), servers.Spec{
		Name: "nginx", Path: path, Args: nginxArgs(dir, conf), Dir: dir, Addr: listen,
		Ready: servers.HTTPReady("/nginx-health"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
	return "http://" + listen
}

// The double-sale guard: a reduce whose replica dies mid-request must come
// back as an error, never be replayed on the healthy replica; a read may be.
func TestNginxRetryPolicy(t *testing.T) {
	for _, tc := range []struct {
		path     string
		wantCode int // status of the request that hit the crashing replica
		replayed bool
	}{
		{"/stock/reduce", http.StatusBadGateway, false},
		{"/stock/reset", http.StatusBadGateway, false},
		{"/items/x/reduce", http.StatusBadGateway, false},
		{"/items/x/reset", http.StatusBadGateway, false},
		{"/items/x/unlatch", http.StatusBadGateway, false},
		{"/stock/witness/adopt", http.StatusBadGateway, false},
		{"/stock/reconcile", http.StatusBadGateway, false},
		{"/items", http.StatusBadGateway, false},
		{"/stock", http.StatusOK, true},
	} {
		t.Run(tc.path, func(t *testing.T) {
			crasher, healthy := &upstream{crash: true}, &upstream{}
			cs, hs := httptest.NewServer(crasher), httptest.NewServer(healthy)
			t.Cleanup(cs.Close)
			t.Cleanup(hs.Close)
			base := startNginx(t, cs, hs)

			// Round robin sends one of the first two requests to each
			// replica; the crash then marks the crasher down, so exactly one
			// request reaches it.
			var codes []int
			for range 4 {
				// GET, because nginx never retries a POST by default: GET is
				// the method a missing "proxy_next_upstream off" would replay.
				resp, err := http.Get(base + tc.path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				codes = append(codes, resp.StatusCode)
			}
			if got := crasher.hits.Load(); got != 1 {
				t.Fatalf("crashing replica saw %d requests, want 1 (codes %v)", got, codes)
			}
			ok := 0
			for _, c := range codes {
				if c == http.StatusOK {
					ok++
				} else if c != tc.wantCode {
					t.Fatalf("status %d, want 200 or %d (codes %v)", c, tc.wantCode, codes)
				}
			}
			if got := healthy.hits.Load(); got != int64(ok) {
				t.Fatalf("healthy replica saw %d requests but %d answers were 200", got, ok)
			}
			wantOK := 3
			if tc.replayed {
				wantOK = 4
			}
			if ok != wantOK {
				t.Fatalf("got %d OK answers, want %d (codes %v)", ok, wantOK, codes)
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{
		"work.delay":            "STOCKD_WORK_DELAY",
		"lock.wait_timeout":     "STOCKD_LOCK_WAIT_TIMEOUT",
		"STOCKD_LOCK_TTL":       "STOCKD_LOCK_TTL",
		"zookeeper.servers":     "STOCKD_ZOOKEEPER_SERVERS",
		"redisson.watchdog":     "STOCKD_REDISSON_WATCHDOG",
		"election.job_interval": "STOCKD_ELECTION_JOB_INTERVAL",
	} {
		if got := EnvName(in); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", in, got, want)
		}
	}
}
