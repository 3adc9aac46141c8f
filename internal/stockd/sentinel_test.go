package stockd

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// stockd with redis.sentinel.* (and so min_replica_acks 1 by default):
// a sale is sold while the replica acknowledges, 503 unconfirmed while it
// is frozen (its receipt 503 until it thaws, then sold), and the sale
// goes on after a SIGKILL of the primary, on the promoted replica, with
// every 200 sold answer in the new primary's lucky.
func TestBinaryBehindSentinel(t *testing.T) {
	set := servertest.Sentinels(t, servers.SentinelOptions{})
	p := startStockd(t,
		"STOCKD_REDIS_SENTINEL_MASTER="+set.MasterName,
		"STOCKD_REDIS_SENTINEL_ADDRS="+strings.Join(set.SentinelAddrs(), ","),
		"STOCKD_LOCK_BACKEND=redis",
		// A step that must be acknowledged waits no longer than its ack;
		// the bound is for the frozen replica, which cannot ack at all,
		// and is long so that a busy machine's slow one still makes it.
		"STOCKD_REDIS_TIMEOUT=3s",
		"STOCKD_STOCK_REPLICA_ACK_TIMEOUT=2s",
		"STOCKD_STOCK_CONFIRM_TIMEOUT=5s",
	)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	base := "http://" + p.Addr()
	post := func(path, body string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("X-Admin-Token", testAdminToken)
		req.Header.Set("Content-Type", "application/json")
		return send(t, req)
	}
	reduce := func() (int, api.Sale) {
		code, body := post("/stock/reduce", "")
		var sale api.Sale
		if err := json.Unmarshal(body, &sale); err != nil {
			t.Fatalf("reduce: %d %s: %v", code, body, err)
		}
		return code, sale
	}
	receipt := func(attempt string) (int, api.Receipt) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/stock/receipts/"+attempt, nil)
		code, body := send(t, req)
		var r api.Receipt
		_ = json.Unmarshal(body, &r)
		return code, r
	}

	if code, body := post("/stock/reset", `{"stock":100}`); code != http.StatusOK {
		t.Fatalf("reset: %d %s", code, body)
	}
	sold := 0
	if code, sale := reduce(); code != http.StatusOK || sale.Result != api.Sold {
		t.Fatalf("reduce with the replica up: %d %+v, want 200 sold", code, sale)
	}
	sold++

	if err := set.Replica.Pause(); err != nil {
		t.Fatal(err)
	}
	code, sale := reduce()
	if code != http.StatusServiceUnavailable || sale.Result != api.Unconfirmed || sale.Attempt == "" {
		_ = set.Replica.Resume()
		t.Fatalf("reduce with the replica stopped: %d %+v, want 503 unconfirmed with its attempt", code, sale)
	}
	if code, r := receipt(sale.Attempt); code != http.StatusServiceUnavailable {
		_ = set.Replica.Resume()
		t.Fatalf("receipt while the replica is stopped: %d %+v, want 503 (not settled)", code, r)
	}
	if err := set.Replica.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := set.WaitReplicated(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if code, r := receipt(sale.Attempt); code != http.StatusOK || !r.Sold {
		t.Fatalf("receipt after the replica resumed: %d %+v, want 200 sold", code, r)
	}
	sold++ // settled

	switched, err := set.WatchSwitch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := set.Primary.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-switched:
	case <-ctx.Done():
		t.Fatal("no failover")
	}
	if err := set.Rejoin(ctx, set.Primary); err != nil {
		t.Fatal(err)
	}
	// The first sale answered after the failover: no event says when
	// stockd's client has followed it, so ask until one sells.
	for {
		code, sale := reduce()
		if code == http.StatusOK && sale.Result == api.Sold {
			sold++
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no sale after the failover; last %d %+v", code, sale)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("first sale %v after the SIGKILL", time.Since(killed).Round(time.Millisecond))

	master, err := set.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: master})
	defer rdb.Close()
	lucky, err := rdb.Get(ctx, "lucky").Int()
	if err != nil || lucky < sold {
		t.Fatalf("lucky on the promoted primary: %d, %v; want at least the %d sales answered or settled sold", lucky, err, sold)
	}
}
