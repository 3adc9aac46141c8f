package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"seckill/internal/api"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/stockd"
	"seckill/internal/stockd/stockdtest"
	"seckill/internal/testwait"
)

var testAdminToken = stockdtest.AdminToken

func stockdBinary(t *testing.T) string { return stockdtest.Binary(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	stockdtest.Cleanup()
	os.Exit(code)
}

func TestBinaryRefusesBadConfig(t *testing.T) {
	bin := stockdBinary(t)
	cases := []struct {
		name    string
		args    []string
		env     []string
		wantErr string
	}{
		{"unknown backend", nil, []string{"STOCKD_LOCK_BACKEND=redsi"}, `config: lock.backend: unknown backend "redsi"`},
		{"bad duration", nil, []string{"STOCKD_LOCK_WAIT_TIMEOUT=-1s"}, "config: lock.wait_timeout:"},
		{"empty token", nil, []string{"STOCKD_ADMIN_TOKEN="}, "config: admin.token:"},
		{"no token", nil, nil, "config: admin.token: must be set"},
		{"placeholder token", nil, []string{"STOCKD_ADMIN_TOKEN=change-me"}, "config: admin.token: too weak"},
		{"short token", nil, []string{"STOCKD_ADMIN_TOKEN=tok"}, "config: admin.token: too weak"},
		{"a repeated word", nil, []string{"STOCKD_ADMIN_TOKEN=changeme-changeme"}, "config: admin.token: too weak"},
		{"a weak jwt secret", nil, []string{"STOCKD_AUTH_BUYERS=jwt", "STOCKD_AUTH_JWT_ISSUER=shop", "STOCKD_AUTH_JWT_AUDIENCE=seckill",
			"STOCKD_AUTH_JWT_SECRET=" + strings.Repeat("a", 32)}, "config: auth.jwt_secret: too weak"},
		{"trusting every address", nil, []string{"STOCKD_HTTP_TRUSTED_PROXIES=10.0.0.7,0.0.0.0/0"}, `config: http.trusted_proxies: "0.0.0.0/0" covers every address`},
		{"missing file", []string{"--config", "/nonexistent/stockd.yaml"}, nil, "/nonexistent/stockd.yaml"},
		{"bad flag", []string{"--nope"}, nil, "flag provided but not defined"},
		{"bad failpoint", nil, []string{"STOCKD_ADMIN_TOKEN=" + testAdminToken, "STOCKD_LAB_UNSAFE=true", "SECKILL_FAILPOINTS=setnx/afterSetNX=explode"}, "config: SECKILL_FAILPOINTS:"},
		{"nanosecond ttl", nil, []string{"STOCKD_LOCK_TTL=1ns"}, "config: lock.ttl: must be between 100ms and 10m0s, got 1ns"},
		{"endless wait", nil, []string{"STOCKD_LOCK_WAIT_TIMEOUT=87600h"}, "config: lock.wait_timeout:"},
		{"long work", nil, []string{"STOCKD_WORK_DELAY=10m"}, "config: work.delay:"},
		{"nanosecond redis timeout", nil, []string{"STOCKD_REDIS_TIMEOUT=1ns"}, "config: redis.timeout:"},
		{"lab-only backend", nil, []string{"STOCKD_LOCK_BACKEND=none"}, `config: lock.backend: "none" is lab-only`},
		{"unfenced", nil, []string{"STOCKD_STOCK_FENCING=false"}, "config: stock.fencing: false is lab-only"},
		{"armed failpoint", nil, []string{"SECKILL_FAILPOINTS=setnx/afterSetNX=1*exit"}, "config: SECKILL_FAILPOINTS: failpoints are lab-only"},
		{"mysql without dsn", nil, []string{"STOCKD_LOCK_BACKEND=mysql"}, "config: mysql.dsn: must be set"},
		{"bad mysql dsn", nil, []string{"STOCKD_LOCK_BACKEND=mysql-row", "STOCKD_MYSQL_DSN=seckill:pw@mysql:3306"}, "config: mysql.dsn: "},
	}
	if stockd.LabBuild {
		cases = append(cases, struct {
			name    string
			args    []string
			env     []string
			wantErr string
		}{"unknown failpoint", nil, []string{"STOCKD_LAB_UNSAFE=true", "SECKILL_FAILPOINTS=x/y=exit"}, `config: SECKILL_FAILPOINTS: unknown failpoint "x/y"`})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), bin, tc.args...)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, tc.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("got %v, want exit status 2; stderr:\n%s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Fatalf("stderr does not contain %q:\n%s", tc.wantErr, stderr.String())
			}
		})
	}
}

// The binary serves a sale against a real Redis and exits 0 on SIGTERM.
func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	bin := stockdBinary(t)
	rds := servertest.Redis(t)
	addr, err := servers.LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"STOCKD_REDIS_ADDR=" + rds.Addr(),
		"STOCKD_HTTP_ADDR=" + addr,
		"STOCKD_LOCK_BACKEND=redis",
		"STOCKD_ADMIN_TOKEN=" + testAdminToken,
		"STOCKD_REPLICA=bin-test",
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var logs bytes.Buffer
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "stockd starting") {
				once.Do(func() { close(started) })
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	ctx := testwait.Until(t) // every step below must happen
	select {
	case <-started:
	case err := <-exited:
		t.Fatalf("stockd exited before starting: %v\n%s", err, logs.String())
	case <-ctx.Done():
		t.Fatal("stockd did not log its start")
	}
	base := "http://" + addr
	if err := servers.HTTPReady("/readyz")(ctx, addr); err != nil {
		t.Fatalf("readyz: %v", err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/stock/reset", strings.NewReader(`{"stock":1}`))
	req.Header.Set("X-Admin-Token", testAdminToken)
	if code, body := send(t, req); code != 200 {
		t.Fatalf("reset: got %d %s", code, body)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, base+"/stock/reduce", nil)
	code, body := send(t, req)
	var sale api.Sale
	if code != 200 || json.Unmarshal(body, &sale) != nil || sale.Result != api.Sold || sale.Replica != "bin-test" {
		t.Fatalf("reduce: got %d %s, want 200 sold from bin-test", code, body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("got %v after SIGTERM, want exit 0\n%s", err, logs.String())
		}
	case <-ctx.Done():
		t.Fatal("stockd did not exit after SIGTERM")
	}
	if !strings.Contains(logs.String(), "msg=stopped") {
		t.Fatalf("no clean-stop log line:\n%s", logs.String())
	}
}

func send(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// stockd --version says the release, what it runs beside, and its
// formats, and exits 0 without a config.
func TestBinaryVersion(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), stockdBinary(t), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("stockd --version: %v: %s", err, out)
	}
	for _, want := range []string{"stockd " + stockd.Release + " ", "runs beside " + stockd.RunsBeside + " and later", "formats: sale 2 (reads 1 to 2) witness 1"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("stockd --version printed %q, want it to say %q", out, want)
		}
	}
}
