package nginx_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"seckill/internal/lab/localcluster"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// upstream stands in for a stockd replica: it answers every request 200
// and records the forwarding headers nginx sent; a broken one closes every
// connection without an answer, as a replica that crashed mid-sale.
type upstream struct {
	srv    *httptest.Server
	hits   atomic.Int64
	broken bool
	mu     sync.Mutex
	xff    []string
	xri    []string
	xuser  []string
}

// newUpstream listens on addr ("127.0.0.1:0" for any port): replicas behind
// one name share a port on different addresses, as in compose.
func newUpstream(t testing.TB, addr string, broken bool) *upstream {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	u := &upstream{broken: broken}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		if u.broken {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		u.mu.Lock()
		u.xff = append(u.xff, r.Header.Get("X-Forwarded-For"))
		u.xri = append(u.xri, r.Header.Get("X-Real-IP"))
		u.xuser = append(u.xuser, r.Header.Values("X-User")...)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"result":"sold"}`)
	}))
	u.srv.Listener.Close()
	u.srv.Listener = l
	u.srv.Start()
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) ip() string {
	return strings.Split(strings.TrimPrefix(u.srv.URL, "http://"), ":")[0]
}
func (u *upstream) port() string {
	return strings.Split(strings.TrimPrefix(u.srv.URL, "http://"), ":")[1]
}

// fakeDNS stands in for Docker's embedded DNS: it answers A queries for
// "stockd" with the addresses set last, and NXDOMAIN for anything else.
type fakeDNS struct {
	pc      net.PacketConn
	mu      sync.Mutex
	addrs   []string
	queries atomic.Int64
}

func newFakeDNS(t testing.TB, addrs ...string) *fakeDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDNS{pc: pc, addrs: addrs}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var q dnsmessage.Message
			if q.Unpack(buf[:n]) != nil || len(q.Questions) != 1 {
				continue
			}
			d.queries.Add(1)
			qq := q.Questions[0]
			a := dnsmessage.Message{Header: dnsmessage.Header{ID: q.ID, Response: true, Authoritative: true}, Questions: q.Questions}
			if !strings.EqualFold(qq.Name.String(), "stockd.") {
				a.RCode = dnsmessage.RCodeNameError
			} else if qq.Type == dnsmessage.TypeA {
				d.mu.Lock()
				for _, ip := range d.addrs {
					a.Answers = append(a.Answers, dnsmessage.Resource{
						Header: dnsmessage.ResourceHeader{Name: qq.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 600},
						Body:   &dnsmessage.AResource{A: netip.MustParseAddr(ip).As4()},
					})
				}
				d.mu.Unlock()
			}
			b, err := a.Pack()
			if err == nil {
				_, _ = pc.WriteTo(b, from)
			}
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
	return d
}

func (d *fakeDNS) set(addrs ...string) {
	d.mu.Lock()
	d.addrs = addrs
	d.mu.Unlock()
}

// startCompose runs the compose nginx.conf for real, adapted only where a
// test must: a fake of Docker's DNS answering "stockd" with one upstream's
// loopback address, private paths, the limits file given. edit, if set,
// changes the text further.
func startCompose(t *testing.T, limits string, edit func(string) string) (base string, up *upstream) {
	t.Helper()
	up = newUpstream(t, "127.0.0.1:0", false)
	dns := newFakeDNS(t, up.ip())
	return startNginx(t, limits, dns, up.port(), edit), up
}

// startNginx runs the compose nginx.conf with dns as Docker's DNS and port
// as stockd's.
func startNginx(t testing.TB, limits string, dns *fakeDNS, port string, edit func(string) string) (base string) {
	t.Helper()
	bin, err := localcluster.NginxPath()
	if err != nil {
		servertest.SkipOrFail(t, err, "nginx")
	}
	dir := t.TempDir()
	listen, err := servers.LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	lim, err := os.ReadFile(limits)
	if err != nil {
		t.Fatal(err)
	}
	limPath := filepath.Join(dir, "limits.conf")
	if err := os.WriteFile(limPath, lim, 0o644); err != nil {
		t.Fatal(err)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n"
	}
	text := string(conf)
	for _, r := range [][2]string{
		{"include /etc/nginx/seckill-limits.conf;", "include " + limPath + ";"},
		{"resolver 127.0.0.11 ", "resolver " + dns.pc.LocalAddr().String() + " "},
		{"set $stockd stockd:8080;", "set $stockd stockd:" + port + ";"},
		{"listen 80;", "listen " + listen + ";"},
		{"pid /tmp/nginx.pid;", user + "daemon off;\npid " + dir + "/nginx.pid;"},
		{"error_log /dev/stderr warn;", "error_log " + dir + "/error.log warn;"},
		{"access_log /dev/stdout;", fmt.Sprintf("access_log off;\n    client_body_temp_path %[1]s/cb;\n    proxy_temp_path %[1]s/px;\n    fastcgi_temp_path %[1]s/fc;\n    uwsgi_temp_path %[1]s/uw;\n    scgi_temp_path %[1]s/sc;", dir)},
	} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("nginx.conf no longer contains %q; adapt the test", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	if edit != nil {
		text = edit(text)
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := servers.Start(t.Context(), servers.Spec{
		Name: "nginx", Path: bin, Args: []string{"-p", dir + "/", "-c", confPath, "-e", filepath.Join(dir, "error.log")},
		Dir: dir, Addr: listen, Ready: servers.HTTPReady("/nginx-health"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(5e9) })
	return "http://" + listen
}

func post(t *testing.T, url string, headers ...string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// With limits-public.conf one client address gets its burst (20) and then
// 429s; with limits-off.conf (compose's default, for the lab and tests) it
// is never limited.
func TestReduceLimitPerClient(t *testing.T) {
	const n = 100
	for _, tc := range []struct {
		limits string
		want   func(ok, limited int) bool
		what   string
	}{
		{"limits-public.conf", func(ok, limited int) bool { return ok >= 20 && limited > 0 }, "at least the burst of 20 sold, then 429s"},
		{"limits-off.conf", func(ok, limited int) bool { return ok == n && limited == 0 }, "every request passed"},
	} {
		for _, path := range []string{"/stock/reduce", "/items/x/reduce"} {
			t.Run(tc.limits+path, func(t *testing.T) {
				base, _ := startCompose(t, tc.limits, nil)
				ok, limited := 0, 0
				for range n {
					switch code := post(t, base+path); code {
					case http.StatusOK:
						ok++
					case http.StatusTooManyRequests:
						limited++
					default:
						t.Fatalf("got %d, want 200 or 429", code)
					}
				}
				if !tc.want(ok, limited) {
					t.Fatalf("%d requests from one address: got %d passed, %d limited; want %s", n, ok, limited, tc.what)
				}
			})
		}
	}
}

// /stock/reset, /metrics and the items' admin writes answer the allow
// list only; the public endpoints answer everyone.
func TestAdminAllowList(t *testing.T) {
	cases := []struct {
		name      string
		loopback  string // geo value for 127.0.0.0/8
		wantAdmin int
	}{
		{"allowed source", "1", http.StatusOK},
		{"other source", "0", http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := startCompose(t, "limits-off.conf", func(s string) string {
				return strings.Replace(s, "127.0.0.0/8     1;", "127.0.0.0/8     "+tc.loopback+";", 1)
			})
			for _, path := range []string{"/stock/reset", "/stock/witness/adopt", "/stock/reconcile", "/items", "/items/x/reset", "/items/x/unlatch"} {
				if got := post(t, base+path); got != tc.wantAdmin {
					t.Fatalf("POST %s: got %d, want %d", path, got, tc.wantAdmin)
				}
			}
			if resp, err := http.Get(base + "/items"); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /items, the public list: got %v, %v; want 200", resp, err)
			} else {
				resp.Body.Close()
			}
			resp, err := http.Get(base + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantAdmin {
				t.Fatalf("GET /metrics: got %d, want %d", resp.StatusCode, tc.wantAdmin)
			}
			for _, path := range []string{"/stock/reduce", "/items/x/reduce"} {
				if got := post(t, base+path); got != http.StatusOK {
					t.Fatalf("POST %s: got %d, want 200", path, got)
				}
			}
		})
	}
}

// nginx appends the real peer to X-Forwarded-For and drops a client's
// X-Real-IP, so stockd (trusting nginx only) logs the real address; and it
// drops a client's X-User, which a replica trusting nginx would take for
// the buyer.
func TestForwardingHeaders(t *testing.T) {
	base, up := startCompose(t, "limits-off.conf", nil)
	if got := post(t, base+"/stock/reduce", "X-Forwarded-For", "10.9.9.9", "X-Real-IP", "6.6.6.6", "X-User", "bob"); got != http.StatusOK {
		t.Fatalf("got %d, want 200", got)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.xff) != 1 || up.xff[0] != "10.9.9.9, 127.0.0.1" || up.xri[0] != "" {
		t.Fatalf("upstream got X-Forwarded-For %q, X-Real-IP %q; want [\"10.9.9.9, 127.0.0.1\"] and none", up.xff, up.xri)
	}
	if len(up.xuser) != 0 {
		t.Fatalf("upstream got X-User %q, want none", up.xuser)
	}
}

// twoReplicas is two upstreams behind "stockd" on one port, as compose's
// replicas: 127.0.0.1 and 127.0.0.2 (all of 127/8 is loopback on Linux).
func twoReplicas(t *testing.T, secondBroken bool) (a, b *upstream) {
	t.Helper()
	a = newUpstream(t, "127.0.0.1:0", false)
	b = newUpstream(t, "127.0.0.2:"+a.port(), secondBroken)
	return a, b
}

// until sends POST /stock/reduce until cond holds, or fails the test at its
// deadline (testwait.Until: what cond waits for must happen); it returns how
// many it sent.
func until(t *testing.T, base string, what string, cond func() bool) int {
	t.Helper()
	deadline := testwait.Until(t)
	for n := 1; ; n++ {
		if got := post(t, base+"/stock/reduce"); got != http.StatusOK {
			t.Fatalf("POST /stock/reduce: %d, want 200", got)
		}
		if cond() {
			return n
		}
		if deadline.Err() != nil {
			t.Fatalf("%s: not after %d requests", what, n)
		}
		time.Sleep(20 * time.Millisecond) // pacing only: valid=2s bounds the wait, not this
	}
}

// After `docker compose up --scale stockd=N` Docker's DNS answers with one
// more address; nginx, never reloaded, sends sales to the new replica once
// its cached answer (valid=2s) runs out, and stops sending to a replica
// gone from the answer.
func TestReResolvesStockd(t *testing.T) {
	a, b := twoReplicas(t, false)
	dns := newFakeDNS(t, a.ip())
	base := startNginx(t, "limits-off.conf", dns, a.port(), nil)
	for range 20 {
		if got := post(t, base+"/stock/reduce"); got != http.StatusOK {
			t.Fatalf("POST /stock/reduce: %d, want 200", got)
		}
	}
	if a.hits.Load() != 20 || b.hits.Load() != 0 {
		t.Fatalf("one replica in DNS: hits %d and %d, want 20 and 0", a.hits.Load(), b.hits.Load())
	}
	q0 := dns.queries.Load()

	dns.set(a.ip(), b.ip()) // scaled up
	until(t, base, "the added replica got a sale", func() bool { return b.hits.Load() > 0 })
	if dns.queries.Load() == q0 {
		t.Fatal("the added replica got traffic without nginx asking the DNS again")
	}
	// Both are used, not only the newest.
	a0 := a.hits.Load()
	until(t, base, "both replicas get sales", func() bool { return a.hits.Load() > a0 })

	dns.set(b.ip()) // the first one stopped
	var aLast int64
	streak := 0
	until(t, base, "20 sales in a row on the remaining replica", func() bool {
		if h := a.hits.Load(); h != aLast {
			aLast, streak = h, 0
			return false
		}
		streak++
		return streak >= 20
	})
}

// A sale (and an admin reset) is never replayed on another replica: with
// one replica dropping every connection without an answer, a request that
// reached it is answered 502 and reached no other; reads are retried on
// the other replica and all succeed.
func TestSaleNeverRetried(t *testing.T) {
	a, b := twoReplicas(t, true) // b breaks every connection
	dns := newFakeDNS(t, a.ip(), b.ip())
	base := startNginx(t, "limits-off.conf", dns, a.port(), nil)
	for _, path := range []string{"/stock/reduce", "/stock/reset", "/stock/witness/adopt", "/stock/reconcile", "/items/x/reduce", "/items/x/reset", "/items/x/unlatch", "/items"} {
		a0, b0 := a.hits.Load(), b.hits.Load()
		const n = 40
		failed := 0
		for range n {
			switch got := post(t, base+path); got {
			case http.StatusOK:
			case http.StatusBadGateway:
				failed++
			default:
				t.Fatalf("POST %s: %d, want 200 or 502", path, got)
			}
		}
		da, db := a.hits.Load()-a0, b.hits.Load()-b0
		if da+db != n {
			t.Fatalf("POST %s x%d reached the replicas %d+%d times: a request was replayed", path, n, da, db)
		}
		if db == 0 || int64(failed) != db {
			t.Fatalf("POST %s: %d reached the broken replica, %d answered 502; want equal and > 0 (random pick over %d)", path, db, failed, n)
		}
	}
	b0 := b.hits.Load()
	for range 40 {
		resp, err := http.Get(base + "/stock")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /stock: %d, want 200 (retried on the other replica)", resp.StatusCode)
		}
	}
	if b.hits.Load() == b0 {
		t.Fatal("no read reached the broken replica: the retry was not exercised")
	}
}

// The price of re-resolving: no upstream block, so no keepalive pool and a
// connection per request to the replica. Side by side, the shipped
// configuration against the same one with the former keepalive upstream
// block (go test -run '^$' -bench Proxy ./nginx).
func BenchmarkProxy(b *testing.B) {
	for _, tc := range []struct {
		name string
		edit func(port string) func(string) string
	}{
		{"resolver-per-request", func(string) func(string) string { return nil }},
		{"upstream-keepalive", func(port string) func(string) string {
			return func(s string) string {
				s = strings.Replace(s, "    server {\n", "    upstream pool {\n        server 127.0.0.1:"+port+";\n        keepalive 64;\n        keepalive_timeout 15s;\n    }\n\n    server {\n", 1)
				s = strings.Replace(s, "set $stockd stockd:"+port+";", "set $stockd pool;\n        proxy_set_header Connection \"\";", 1)
				return s
			}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			up := newUpstream(b, "127.0.0.1:0", false)
			dns := newFakeDNS(b, up.ip())
			base := startNginx(b, "limits-off.conf", dns, up.port(), tc.edit(up.port()))
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Post(base+"/stock/reduce", "", nil)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}
