package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// faultCluster starts two redis-backed replicas with the fault layer on.
func faultCluster(t *testing.T) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, Config{Replicas: 2, Backend: "redis", Faults: true})
	if errors.Is(err, servers.ErrNotInstalled) {
		servertest.SkipOrFail(t, err, "redis-server nginx-light")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func getJSON(ctx context.Context, method, url string) (int, map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var body map[string]any
	err = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body, err
}

// A cut stock link makes that replica, and only it, unready; restoring it
// makes it ready again without a restart.
func TestCutAndRestoreStockLink(t *testing.T) {
	c := faultCluster(t)
	ctx := t.Context()
	restore, err := c.Cut(0, LinkStock)
	if err != nil {
		t.Fatal(err)
	}
	st, body, err := getJSON(ctx, http.MethodGet, c.ReplicaURL(0)+"/readyz")
	if err != nil || st != http.StatusServiceUnavailable || body["redis"] == "ok" {
		t.Fatalf("cut replica: /readyz = %d %v (%v), want 503 with a redis error", st, body, err)
	}
	if st, _, err := getJSON(ctx, http.MethodGet, c.ReplicaURL(1)+"/readyz"); err != nil || st != http.StatusOK {
		t.Fatalf("other replica: /readyz = %d (%v), want 200", st, err)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	// The replica redials on its next command; go-redis may first hand out
	// a pooled connection the cut closed, so allow a few probes. It must
	// come back: the wait is bounded by the test's deadline.
	until := testwait.Until(t)
	for {
		st, body, err = getJSON(ctx, http.MethodGet, c.ReplicaURL(0)+"/readyz")
		if st == http.StatusOK {
			break
		}
		if until.Err() != nil {
			t.Fatalf("restored replica: /readyz = %d %v (%v), want 200", st, body, err)
		}
		time.Sleep(100 * time.Millisecond) // no event to wait on from outside the replica
	}
}

// A holding Watch stops a sale's write inside the proxy: the request does
// not finish until Release, and then it sells.
func TestWatchHoldsWriteUntilRelease(t *testing.T) {
	c := faultCluster(t)
	ctx := t.Context()
	if st, _, err := resetStock(ctx, c, 5); err != nil || st != http.StatusOK {
		t.Fatalf("reset: %d %v", st, err)
	}
	w, err := c.Watch(func(b []byte) bool { return bytes.Contains(b, []byte("lucky")) }, true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	type result struct {
		status int
		body   map[string]any
		err    error
	}
	done := make(chan result, 1)
	go func() {
		st, body, err := getJSON(ctx, http.MethodPost, c.ReplicaURL(1)+"/stock/reduce")
		done <- result{st, body, err}
	}()
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := w.Held(hctx)
	if err != nil || got != 1 {
		t.Fatalf("Held = %d, %v; want replica 1", got, err)
	}
	select {
	case r := <-done:
		t.Fatalf("sale finished while its write was held: %d %v", r.status, r.body)
	default:
	}
	w.Release()
	r := <-done
	if r.err != nil || r.status != http.StatusOK || r.body["result"] != "sold" {
		t.Fatalf("after release: %d %v (%v), want 200 sold", r.status, r.body, r.err)
	}
}

func resetStock(ctx context.Context, c *Cluster, n int) (int, map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL()+"/stock/reset",
		bytes.NewReader([]byte(`{"stock":`+itoa(n)+`}`)))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-Admin-Token", c.AdminToken())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var body map[string]any
	err = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body, err
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// MariaDB starts on the first SetBackend that needs it, the replicas get
// its DSN through their own proxies (so a Cut of the lock link isolates one
// replica from it), and a restart of the lock server keeps its data: the
// tokens after it are above those before.
func TestMySQLBackendStartsMariaDBOnFirstNeed(t *testing.T) {
	c := faultCluster(t)
	ctx := t.Context()
	if c.MariaDB() != nil {
		t.Fatal("MariaDB started for a redis cluster")
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err := c.SetBackend(sctx, "mysql", map[string]string{"mysql.session_ttl": "2s"})
	cancel()
	if errors.Is(err, servers.ErrNotInstalled) {
		servertest.SkipOrFail(t, err, "mariadb-server")
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, c.Logs(20))
	}
	db := c.MariaDB()
	if db == nil || c.LockServer() != db {
		t.Fatalf("LockServer %v, MariaDB %v: want MariaDB", c.LockServer(), db)
	}
	if st, _, err := resetStock(ctx, c, 10); err != nil || st != http.StatusOK {
		t.Fatalf("reset: %d %v", st, err)
	}
	sell := func(url string) float64 {
		t.Helper()
		st, body, err := getJSON(ctx, http.MethodPost, url+"/stock/reduce")
		if err != nil || st != http.StatusOK || body["result"] != "sold" {
			t.Fatalf("reduce: %d %v (%v), want sold\n%s", st, body, err, c.Logs(20))
		}
		tok, _ := body["token"].(float64)
		return tok
	}
	before := sell(c.URL())

	restore, err := c.Cut(0, LinkLock)
	if err != nil {
		t.Fatal(err)
	}
	if st, body, err := getJSON(ctx, http.MethodGet, c.ReplicaURL(0)+"/readyz"); err != nil || st != http.StatusServiceUnavailable || body["lock"] == "ok" {
		t.Errorf("replica cut from MySQL: /readyz = %d %v (%v), want 503 naming the lock", st, body, err)
	}
	if st, body, err := getJSON(ctx, http.MethodGet, c.ReplicaURL(1)+"/readyz"); err != nil || st != http.StatusOK {
		t.Errorf("other replica: /readyz = %d %v (%v), want 200", st, body, err)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}

	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := db.Restart(rctx); err != nil {
		t.Fatal(err)
	}
	// The replicas reconnect on their next acquisition; a pooled session
	// the restart closed may fail the first one. A sale must come: the
	// wait is bounded by the test's deadline.
	until := testwait.Until(t)
	for {
		st, body, err := getJSON(ctx, http.MethodPost, c.ReplicaURL(1)+"/stock/reduce")
		if err == nil && st == http.StatusOK && body["result"] == "sold" {
			if after, _ := body["token"].(float64); after <= before {
				t.Fatalf("token %v after the restart, %v before: the counter did not survive", after, before)
			}
			break
		}
		if until.Err() != nil {
			t.Fatalf("no sale after the MariaDB restart: %d %v (%v)\n%s", st, body, err, c.Logs(20))
		}
		time.Sleep(200 * time.Millisecond) // the replica's reconnect has no event to wait on from here
	}
}
