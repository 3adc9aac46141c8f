package stockd

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"seckill/internal/api"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// The binary, started while its Redis does not answer (refused: nothing
// listens; silent: the process is stopped, its socket still accepting)
// with redis.timeout 200ms, is left for /readyz: it serves, unready and
// naming redis, and is ready once the Redis answers. A silent Redis
// ended such a start with exit 1 before unanswered covered a check's own
// deadline.
func TestRedisNotAnsweringAtStartIsLeftForReadyz(t *testing.T) {
	for _, tc := range []struct {
		name     string
		down, up func(context.Context, *servers.Process) error
	}{
		{"refused",
			func(_ context.Context, p *servers.Process) error { return p.Stop(5 * time.Second) },
			func(ctx context.Context, p *servers.Process) error { return p.Start(ctx) }},
		{"silent",
			func(_ context.Context, p *servers.Process) error { return p.Pause() },
			func(_ context.Context, p *servers.Process) error { return p.Resume() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rds := servertest.Redis(t)
			if err := tc.down(t.Context(), rds); err != nil {
				t.Fatal(err)
			}
			addr, err := servers.LoopbackAddr()
			if err != nil {
				t.Fatal(err)
			}
			// Ready at /healthz: a start refused (exit 1 or 2) fails here.
			p, err := servers.Start(t.Context(), servers.Spec{
				Name: "stockd", Path: stockdBinary(t), Dir: t.TempDir(), Addr: addr,
				Env: []string{
					"STOCKD_REDIS_ADDR=" + rds.Addr(), "STOCKD_HTTP_ADDR=" + addr, "STOCKD_REDIS_TIMEOUT=200ms",
					"STOCKD_ADMIN_TOKEN=" + testAdminToken, "STOCKD_REPLICA=unanswered-test",
				},
				Ready: servers.HTTPReady("/healthz"),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
			if code, r, body := readyz(t, p); code != http.StatusServiceUnavailable || r.Redis == api.OK {
				t.Fatalf("/readyz with the Redis down: %d %s, want 503 naming redis", code, body)
			}
			if err := tc.up(t.Context(), rds); err != nil {
				t.Fatal(err)
			}
			for until := testwait.Until(t); ; {
				code, _, body := readyz(t, p)
				if code == http.StatusOK {
					break
				}
				if until.Err() != nil {
					t.Fatalf("/readyz after the Redis came back: %d %s, want 200\n%s", code, body, p.LogTail(20))
				}
				time.Sleep(100 * time.Millisecond) // polling the replica's probe: no event to wait on
			}
			logs, err := os.ReadFile(p.LogPath())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(logs), "stock redis not reachable yet") {
				t.Fatalf("no log line saying the Redis was not reachable yet:\n%s", logs)
			}
		})
	}
}
