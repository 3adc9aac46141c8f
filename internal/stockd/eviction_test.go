package stockd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// policyRedis starts a Redis with the given maxmemory-policy and returns
// it with a client.
func policyRedis(t *testing.T, policy string) (*servers.Process, *redis.Client) {
	t.Helper()
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.ConfigSet(t.Context(), "maxmemory-policy", policy).Err(); err != nil {
		t.Fatal(err)
	}
	return srv, rdb
}

// stockdOn runs the binary against the Redis at redisAddr, with env over a
// minimal valid configuration, and waits until /readyz answers 200.
func stockdOn(t *testing.T, redisAddr string, env ...string) *servers.Process {
	t.Helper()
	addr, err := servers.LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	base := []string{
		"STOCKD_REDIS_ADDR=" + redisAddr,
		"STOCKD_HTTP_ADDR=" + addr,
		"STOCKD_ADMIN_TOKEN=" + testAdminToken,
		"STOCKD_REPLICA=eviction-test",
	}
	p, err := servers.Start(t.Context(), servers.Spec{
		Name: "stockd", Path: stockdBinary(t), Env: append(base, env...), Dir: t.TempDir(), Addr: addr,
		Ready: servers.HTTPReady("/readyz"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
	return p
}

func readyz(t *testing.T, p *servers.Process) (int, api.Ready, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+p.Addr()+"/readyz", nil)
	code, body := send(t, req)
	var r api.Ready
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("readyz: %v: %s", err, body)
	}
	return code, r, string(body)
}

// A Redis that may evict keys is refused at start, exit status 2, with the
// policy and the fix in the message: the stock Redis under allkeys-lru, and
// a lock Redis of its own (lock.redis_addr) under volatile-lru.
func TestBinaryRefusesEvictingRedis(t *testing.T) {
	bin := stockdBinary(t)
	stockSrv, _ := policyRedis(t, "allkeys-lru")
	okSrv, _ := policyRedis(t, "noeviction")
	lockSrv, _ := policyRedis(t, "volatile-lru")
	cases := []struct {
		name string
		env  []string
		want []string
	}{
		{"stock redis allkeys-lru", []string{"STOCKD_REDIS_ADDR=" + stockSrv.Addr()},
			[]string{"stock redis: evicting: maxmemory-policy allkeys-lru", "CONFIG SET maxmemory-policy noeviction", "stock.allow_eviction"}},
		{"lock redis volatile-lru", []string{"STOCKD_REDIS_ADDR=" + okSrv.Addr(), "STOCKD_LOCK_REDIS_ADDR=" + lockSrv.Addr()},
			[]string{"lock redis: evicting: maxmemory-policy volatile-lru", "CONFIG SET maxmemory-policy noeviction"}},
		{"redisson, lock redis volatile-lru", []string{"STOCKD_REDIS_ADDR=" + okSrv.Addr(), "STOCKD_LOCK_BACKEND=redisson", "STOCKD_LOCK_REDIS_ADDR=" + lockSrv.Addr()},
			[]string{"lock redis: evicting: maxmemory-policy volatile-lru"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, err := servers.LoopbackAddr()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "STOCKD_HTTP_ADDR=" + addr, "STOCKD_ADMIN_TOKEN=" + testAdminToken}, tc.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err = cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != exitConfig {
				t.Fatalf("got %v, want exit status 2; stderr:\n%s", err, stderr.String())
			}
			for _, want := range tc.want {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr does not contain %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}

// Under noeviction the binary starts and is ready; a policy changed to an
// evicting one while it runs makes /readyz 503, naming the policy.
func TestBinaryReadinessFollowsPolicy(t *testing.T) {
	srv, rdb := policyRedis(t, "noeviction")
	p := stockdOn(t, srv.Addr())
	if code, r, raw := readyz(t, p); code != http.StatusOK || r.Redis != api.OK || r.Eviction != "" {
		t.Fatalf("noeviction: got %d %s, want 200 redis ok", code, raw)
	}
	if err := rdb.ConfigSet(t.Context(), "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	const want = "evicting: maxmemory-policy volatile-lru"
	if code, r, raw := readyz(t, p); code != http.StatusServiceUnavailable || r.Redis != want {
		t.Fatalf("after CONFIG SET volatile-lru: got %d %s, want 503 redis %q", code, raw, want)
	}
}

// stock.allow_eviction: the binary starts on an allkeys-lru Redis, warns
// loudly, and stays ready with the policy in /readyz's "eviction".
func TestBinaryAllowEviction(t *testing.T) {
	srv, _ := policyRedis(t, "allkeys-lru")
	p := stockdOn(t, srv.Addr(), "STOCKD_STOCK_ALLOW_EVICTION=true")
	const want = "allowed: maxmemory-policy allkeys-lru"
	if code, r, raw := readyz(t, p); code != http.StatusOK || r.Redis != api.OK || r.Eviction != want {
		t.Fatalf("got %d %s, want 200 redis ok eviction %q", code, raw, want)
	}
	logs, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(logs, []byte("level=WARN msg=\"REDIS MAY EVICT THE SALE'S KEYS")) || !bytes.Contains(logs, []byte("maxmemory_policy=allkeys-lru")) {
		t.Fatalf("no loud warning naming the policy at start:\n%s", logs)
	}
}
