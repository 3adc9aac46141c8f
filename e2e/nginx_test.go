package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"seckill/internal/lab/loadgen"
)

// A reduce that reached a replica which then dies must fail at the client
// (502/504), never be replayed on another replica: the dead one may have
// sold before dying, so a replay is a double sale. The replica is frozen
// (SIGSTOP) so requests queue on it, then killed (SIGKILL) while they wait.
func TestNginxDoesNotReplayReduce(t *testing.T) {
	// A correct backend, so the stock read back counts exactly the sales.
	c := onBackend(t, "redis")
	client := &http.Client{Timeout: 30 * time.Second}
	if err := loadgen.Reset(t.Context(), client, c.URL(), c.AdminToken(), 100); err != nil {
		t.Fatal(err)
	}
	victim := c.Replica(0)
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever happened, leave the shared cluster whole for later tests.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = victim.Resume()
		if err := c.SetBackend(ctx, "redis", testEnv); err != nil {
			shared.backend = ""
			t.Errorf("restore cluster: %v", err)
		}
	})

	// nginx's round robin with one worker hands n consecutive requests to
	// the replicas strictly in turn: a third of them go to the frozen one.
	const n = 9
	type result struct {
		status int
		body   string
	}
	results := make(chan result, n)
	for range n {
		go func() {
			// A sale is POST only. nginx does not replay a POST by default
			// either; "proxy_next_upstream off" keeps it so even if someone
			// adds "non_idempotent".
			resp, err := client.Post(c.URL()+"/stock/reduce", "", nil)
			if err != nil {
				results <- result{body: err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- result{resp.StatusCode, string(b)}
		}()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	recv := func() result {
		t.Helper()
		select {
		case r := <-results:
			return r
		case <-ctx.Done():
			t.Fatalf("requests did not complete: %v\n%s", ctx.Err(), c.Logs(10))
			return result{}
		}
	}
	// The healthy replicas answer their share; the frozen one's requests wait.
	for range n - n/3 {
		if r := recv(); r.status != http.StatusOK {
			t.Fatalf("healthy replica answered %d %s, want 200", r.status, r.body)
		}
	}
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	for range n / 3 {
		r := recv()
		if r.status != http.StatusBadGateway && r.status != http.StatusGatewayTimeout {
			t.Fatalf("request stuck on the killed replica got %d %s, want 502 or 504 (a 200 means nginx replayed it)", r.status, r.body)
		}
	}

	// Only the answered sales happened: nothing was sold twice or elsewhere.
	stock, err := loadgen.GetStock(t.Context(), client, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(n - n/3); stock.Lucky != want || stock.Stock != 100-want {
		got, _ := json.Marshal(stock)
		t.Fatalf("got %s, want lucky %d stock %d", got, want, 100-want)
	}
}
