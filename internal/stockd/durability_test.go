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

	"seckill/internal/api"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

func info(t *testing.T, p *servers.Process) (api.Info, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+p.Addr()+"/info", nil)
	code, body := send(t, req)
	var i api.Info
	if err := json.Unmarshal(body, &i); code != http.StatusOK || err != nil {
		t.Fatalf("GET /info: %d %v: %s", code, err, body)
	}
	return i, string(body)
}

// stock.require_aof on a Redis without an AOF: exit status 2, naming the
// key, what a 200 would promise, and the fix.
func TestBinaryRequireAOFRefusesRedisWithoutAOF(t *testing.T) {
	srv := servertest.Redis(t)
	addr, err := servers.LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, stockdBinary(t))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "STOCKD_HTTP_ADDR=" + addr, "STOCKD_ADMIN_TOKEN=" + testAdminToken,
		"STOCKD_REDIS_ADDR=" + srv.Addr(), "STOCKD_STOCK_REQUIRE_AOF=true"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitConfig {
		t.Fatalf("got %v, want exit status 2; stderr:\n%s", err, stderr.String())
	}
	for _, want := range []string{"stock.require_aof is on", "a Redis restart loses it (no AOF)", "CONFIG SET appendonly yes", "stock.require_aof: false"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not contain %q:\n%s", want, stderr.String())
		}
	}
}

// The promise at start: INFO on a Redis with an AOF (which
// stock.require_aof accepts), WARN on one without, and GET /info says the
// same.
func TestBinaryReportsDurability(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     []string
		log     string
		aof     bool
		promise string
	}{
		{"AOF everysec, required", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, []string{"STOCKD_STOCK_REQUIRE_AOF=true"},
			`level=INFO msg="stock redis durability"`, true,
			"a 200 survives a Redis process crash (AOF, fsync everysec: up to 1 s of sales may be lost on a machine crash)"},
		{"no AOF", nil, nil,
			`level=WARN msg="stock redis durability"`, false,
			"a 200 is in one Redis's memory only: a Redis restart loses it (no AOF)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := servertest.RedisWith(t, tc.args...)
			p := stockdOn(t, srv.Addr(), tc.env...)
			i, raw := info(t, p)
			if i.Durability == nil || i.Durability.AOF != tc.aof || i.Durability.Promise != tc.promise {
				t.Fatalf("GET /info: %s, want durability aof %v promise %q", raw, tc.aof, tc.promise)
			}
			logs, err := os.ReadFile(p.LogPath())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(logs, []byte(tc.log)) || !bytes.Contains(logs, []byte(`promise="`+tc.promise+`"`)) {
				t.Fatalf("no %s with the promise at start:\n%s", tc.log, logs)
			}
		})
	}
}
