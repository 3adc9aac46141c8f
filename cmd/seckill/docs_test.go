package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"seckill/internal/docblocks"
	"seckill/internal/lab/dashboard"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/stockd/stockdtest"
	"seckill/internal/testwait"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stockdtest.Cleanup()
	os.Exit(code)
}

// The dashboard's command (docs/dashboard.md), run as written where
// bin/seckill is this build, with the page's three replica URLs and its
// Redis address put for three real replicas and theirs: it prints its
// URL, and its state shows the three up and ready, the books read from
// Redis, until SIGTERM ends it with status 0.
func TestDashboardRunsAsWritten(t *testing.T) {
	block := docblocks.For(t, "docs/dashboard.md")
	if _, err := exec.LookPath("bash"); err != nil {
		servertest.SkipOrFail(t, err, "bash")
	}
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "seckill"), "seckill/cmd/seckill").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rds := servertest.Redis(t)
	swap := []string{"127.0.0.1:6379", rds.Addr()}
	var urls []string
	for i := range 3 {
		p := dashboardReplica(t, rds.Addr(), fmt.Sprintf("dash-%d", i+1))
		urls = append(urls, "http://"+p.Addr())
		swap = append(swap, fmt.Sprintf("http://127.0.0.1:%d", 8081+i), urls[i])
	}
	resetStock(t, urls[0], 5)
	script := strings.NewReplacer(swap...).Replace(block)
	if script == block {
		t.Fatalf("no address of the page's found in the block:\n%s", block)
	}

	printed := regexp.MustCompile(`dashboard: (http://127\.0\.0\.1:\d+/)`)
	var url string
	p, err := servers.Start(t.Context(), servers.Spec{
		Name: "dashboard", Path: "bash", Args: []string{"-euc", script}, Dir: dir,
		Ready: func(context.Context, string) error {
			log, err := os.ReadFile(filepath.Join(dir, "dashboard.log"))
			if m := printed.FindSubmatch(log); m != nil {
				url = string(m[1])
				return nil
			}
			return fmt.Errorf("no URL printed yet (%v): %s", err, log)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })

	var st dashboard.State
	for until := testwait.Until(t); !shows(st, urls, 5); {
		if until.Err() != nil {
			t.Fatalf("the dashboard never showed the three replicas ready and stock 5 from Redis: %+v", st)
		}
		time.Sleep(50 * time.Millisecond) // polling the dashboard's own poller: no event to wait on
		st = dashboardState(t, url)
	}
	if err := p.Stop(stopBound); err != nil {
		t.Fatal(err)
	}
	if code := p.ExitCode(); code != exitOK {
		t.Fatalf("the dashboard exited %d after SIGTERM, want %d:\n%s", code, exitOK, p.LogTail(20))
	}
}

// stopBound is how long Stop waits for the dashboard to stop before
// it kills it (and the exit status says it did not stop).
const stopBound = 30 * time.Second

// shows reports whether st has every replica of urls up and ready and the
// books from Redis at stock.
func shows(st dashboard.State, urls []string, stock int64) bool {
	if len(st.Replicas) != len(urls) || !st.Books.Known || st.Books.Source != "redis" || st.Books.Stock != stock {
		return false
	}
	for i, r := range st.Replicas {
		if r.URL != urls[i] || !r.Up || !r.Ready {
			return false
		}
	}
	return true
}

func dashboardState(t *testing.T, url string) dashboard.State {
	t.Helper()
	var st dashboard.State
	resp, err := http.Get(url + "api/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// dashboardReplica is a stockd on redisAddr, ready.
func dashboardReplica(t *testing.T, redisAddr, name string) *servers.Process {
	t.Helper()
	addr, err := servers.LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	p, err := servers.Start(t.Context(), servers.Spec{
		Name: "stockd", Path: stockdtest.Binary(t), Dir: t.TempDir(), Addr: addr,
		Env: []string{
			"STOCKD_REDIS_ADDR=" + redisAddr, "STOCKD_HTTP_ADDR=" + addr,
			"STOCKD_ADMIN_TOKEN=" + stockdtest.AdminToken, "STOCKD_REPLICA=" + name,
		},
		Ready: servers.HTTPReady("/readyz"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
	return p
}

func resetStock(t *testing.T, base string, stock int) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/stock/reset", strings.NewReader(fmt.Sprintf(`{"stock":%d}`, stock)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Admin-Token", stockdtest.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reset: %d", resp.StatusCode)
	}
}
