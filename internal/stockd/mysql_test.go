package stockd

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/api"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// switchable is a TCP front for a MySQL server that first stalls (accepts
// connections and never answers, as a paused or black-holed server does),
// or with refuse set closes them at once (a server that is down), and,
// once forward is set, relays new connections to the server.
type switchable struct {
	ln      net.Listener
	target  string
	forward atomic.Bool
	refuse  atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func newSwitchable(t *testing.T, target string) *switchable {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &switchable{ln: ln, target: target}
	go s.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			_ = c.Close()
		}
	})
	return s
}

func (s *switchable) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		if !s.forward.Load() {
			if s.refuse.Load() {
				_ = c.Close()
			}
			continue // held open, silent
		}
		up, err := net.Dial("tcp", s.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		s.mu.Lock()
		s.conns = append(s.conns, up)
		s.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
		go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
	}
}

// An unreachable MySQL neither keeps stockd from starting nor hangs a
// request: /readyz and the sale answer 503 JSON within their bounds, while
// the server stalls every connection. Once it answers, the lazily opened
// lock sells without a restart.
func TestMySQLUnreachableAnswers503(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	db := mariadb(t)
	front := newSwitchable(t, db.Addr())
	bin := stockdBinary(t)
	rds := servertest.Redis(t)
	addr, err := servers.LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"mysql", "mysql-row"} {
		t.Run(backend, func(t *testing.T) {
			front.forward.Store(false)
			began := time.Now()
			p, err := servers.Start(t.Context(), servers.Spec{
				Name: "stockd", Path: bin, Dir: t.TempDir(), Addr: addr,
				Env: []string{
					"STOCKD_REDIS_ADDR=" + rds.Addr(),
					"STOCKD_HTTP_ADDR=" + addr,
					"STOCKD_ADMIN_TOKEN=" + testAdminToken,
					"STOCKD_LOCK_BACKEND=" + backend,
					"STOCKD_LOCK_WAIT_TIMEOUT=2s",
					"STOCKD_MYSQL_DSN=" + servers.MariaDBDSN(front.ln.Addr().String()),
				},
				Ready:        servers.HTTPReady("/healthz"),
				ReadyTimeout: 30 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
			// Starting is being ready (Start's wait): a start that waited
			// for the stalled MySQL would never be. How long it took is
			// noted.
			d := time.Since(began)
			note := ""
			if d > 15*time.Second {
				note = " (SLOW)"
			}
			t.Logf("started in %v with MySQL stalled%s", d.Round(time.Millisecond), note)
			base := "http://" + addr
			reset := func() (int, map[string]any) {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/stock/reset", strings.NewReader(`{"stock":5}`))
				req.Header.Set("X-Admin-Token", testAdminToken)
				return sendJSON(t, req)
			}
			if code, body := reset(); code != http.StatusOK {
				t.Fatalf("reset: %d %v", code, body)
			}

			t0 := time.Now()
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/readyz", nil)
			code, body := sendJSON(t, req)
			if code != http.StatusServiceUnavailable || body["lock"] == "ok" || body["redis"] != "ok" {
				t.Errorf("readyz with MySQL stalled: %d %v, want 503 naming the lock", code, body)
			}
			t1 := time.Now()
			req, _ = http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/stock/reduce", nil)
			code, body = sendJSON(t, req)
			if code != http.StatusServiceUnavailable || body["result"] != string(api.Error) {
				t.Errorf("sale with MySQL stalled: %d %v, want 503 result error", code, body)
			}
			// Answered at all is the bound: without one, a request would
			// wait on the stalled MySQL until the client's 30s (sendJSON),
			// and fail the test there. How long they took is noted.
			d1, d2 := t1.Sub(t0), time.Since(t1)
			note = ""
			if d1 > 3*time.Second || d2 > 6*time.Second {
				note = " (SLOW)"
			}
			t.Logf("answers took %v (readyz) and %v (sale), bounded by the probe and lock.wait_timeout%s", d1.Round(time.Millisecond), d2.Round(time.Millisecond), note)

			front.forward.Store(true)
			answering := time.Now()
			until := testwait.Until(t)
			for {
				req, _ = http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/stock/reduce", nil)
				code, body = sendJSON(t, req)
				if code == http.StatusOK && body["result"] == string(api.Sold) {
					break
				}
				if until.Err() != nil {
					t.Fatalf("no sale %v after MySQL answered: last %d %v\n%s", time.Since(answering).Round(time.Second), code, body, p.LogTail(20))
				}
				time.Sleep(200 * time.Millisecond) // polling a remote's recovery: no event to wait on
			}
			req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/readyz", nil)
			if code, body := sendJSON(t, req); code != http.StatusOK {
				t.Errorf("readyz after recovery: %d %v", code, body)
			}
		})
	}
}

func sendJSON(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("%s %s: %d, body not JSON: %v", req.Method, req.URL.Path, resp.StatusCode, err)
	}
	return resp.StatusCode, body
}
