package nginx_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"seckill/internal/localcluster"
	"seckill/internal/servers"
)

// upstream stands in for stockd: it answers every request 200 and records
// the forwarding headers nginx sent.
type upstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	xff []string
	xri []string
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.xff = append(u.xff, r.Header.Get("X-Forwarded-For"))
		u.xri = append(u.xri, r.Header.Get("X-Real-IP"))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"result":"sold"}`)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// startCompose runs the compose nginx.conf for real, adapted only where a
// test must: loopback addresses instead of compose's names, private paths,
// the limits file given. edit, if set, changes the text further.
func startCompose(t *testing.T, limits string, edit func(string) string) (base string, up *upstream) {
	t.Helper()
	bin, err := localcluster.NginxPath()
	if err != nil {
		t.Skip(err)
	}
	up = newUpstream(t)
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
		{"server stockd:8080;", "server " + strings.TrimPrefix(up.srv.URL, "http://") + ";"},
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
	return "http://" + listen, up
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
		t.Run(tc.limits, func(t *testing.T) {
			base, _ := startCompose(t, tc.limits, nil)
			ok, limited := 0, 0
			for range n {
				switch code := post(t, base+"/stock/reduce"); code {
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

// /stock/reset and /metrics answer the allow list only; the public
// endpoints answer everyone.
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
			if got := post(t, base+"/stock/reset"); got != tc.wantAdmin {
				t.Fatalf("POST /stock/reset: got %d, want %d", got, tc.wantAdmin)
			}
			resp, err := http.Get(base + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantAdmin {
				t.Fatalf("GET /metrics: got %d, want %d", resp.StatusCode, tc.wantAdmin)
			}
			if got := post(t, base+"/stock/reduce"); got != http.StatusOK {
				t.Fatalf("POST /stock/reduce: got %d, want 200", got)
			}
		})
	}
}

// nginx appends the real peer to X-Forwarded-For and drops a client's
// X-Real-IP, so stockd (trusting nginx only) logs the real address.
func TestForwardingHeaders(t *testing.T) {
	base, up := startCompose(t, "limits-off.conf", nil)
	if got := post(t, base+"/stock/reduce", "X-Forwarded-For", "10.9.9.9", "X-Real-IP", "6.6.6.6"); got != http.StatusOK {
		t.Fatalf("got %d, want 200", got)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.xff) != 1 || up.xff[0] != "10.9.9.9, 127.0.0.1" || up.xri[0] != "" {
		t.Fatalf("upstream got X-Forwarded-For %q, X-Real-IP %q; want [\"10.9.9.9, 127.0.0.1\"] and none", up.xff, up.xri)
	}
}
