package stockd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// The findings of "time only moves forward", run from outside as they
// were found: three stockd replicas on one Redis 7.0 whose clock the test
// steps (servers.ShiftedClock). A failover to a replica whose clock is
// off is, to an item's window, a primary whose clock stepped: the steps
// stand in for it.
func TestBinaryTimeOnlyMovesForward(t *testing.T) {
	srv, clock := servertest.RedisOnClock(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	var replicas []*servers.Process
	for i := range 3 {
		replicas = append(replicas, stockdOn(t, srv.Addr(), "STOCKD_STOCK_MODE=atomic",
			fmt.Sprintf("STOCKD_REPLICA=clock-%d", i), "STOCKD_STOCK_KEY=clock"))
	}
	admin := func(method, path, body string) (int, api.Item) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, "http://"+replicas[0].Addr()+path, strings.NewReader(body))
		req.Header.Set("X-Admin-Token", testAdminToken)
		code, raw := send(t, req)
		var it api.Item
		_ = json.Unmarshal(raw, &it)
		return code, it
	}
	// buy sends n sales of item id round the replicas, with key if set,
	// and counts the answers by result.
	buy := func(id string, n int, key string) map[api.Result]int {
		t.Helper()
		got := map[api.Result]int{}
		for i := range n {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+replicas[i%3].Addr()+"/items/"+id+"/reduce", nil)
			if key != "" {
				req.Header.Set("Idempotency-Key", key)
			}
			_, raw := send(t, req)
			var s api.Sale
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatalf("sale of %s: %s: %v", id, raw, err)
			}
			got[s.Result]++
		}
		return got
	}
	// readyzSays waits until replica 1's /readyz warns of the clock, or
	// stops warning: it reads the primary's clock fresh (at most a second
	// old), so this is a second's wait, bounded by the test's deadline.
	readyzSays := func(warns bool) {
		t.Helper()
		for {
			if _, r, _ := readyz(t, replicas[1]); (r.Clock != "") == warns {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// untilEnded waits for item id's end by every clock (its sales are
	// refused as ended): an event, bounded by the test's deadline.
	untilEnded := func(id string, ends time.Time) {
		t.Helper()
		for time.Now().Before(ends) {
			time.Sleep(time.Until(ends))
		}
		for {
			if got := buy(id, 1, ""); got[api.Ended] == 1 {
				return
			} else if got[api.Sold] > 0 {
				t.Fatalf("item %s sold after its end: %v", id, got)
			}
		}
	}

	// 1. An item ended, then Redis's clock stepped back 6 s (and 30 s): it
	// sold 54 units 4–6 s after the end, and went back to upcoming.
	ends := time.Now().Add(1500 * time.Millisecond)
	if code, _ := admin(http.MethodPost, "/items", fmt.Sprintf(`{"id":"back","stock":500,"ends_at":%d}`, ends.UnixMilli())); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if got := buy("back", 6, ""); got[api.Sold] != 6 {
		t.Fatalf("sales in the window: %v, want 6 sold", got)
	}
	untilEnded("back", ends)
	for _, step := range []time.Duration{-6 * time.Second, -30 * time.Second} {
		if err := clock.Set(step); err != nil {
			t.Fatal(err)
		}
		if got := buy("back", 60, ""); got[api.Ended] != 60 {
			t.Fatalf("Redis's clock %s after the end: %v; want 60 ended, none sold", step, got)
		}
		if code, it := admin(http.MethodGet, "/items/back", ""); code != http.StatusOK || it.State != "ended" || it.Lucky != 6 {
			t.Fatalf("item after a %s step: %d %+v; want ended, 6 sold", step, code, it)
		}
	}
	if err := clock.Set(0); err != nil {
		t.Fatal(err)
	}

	// 2. Redis's clock jumped past stock.idempotency_ttl (24 h): one key
	// bought a second unit.
	if code, _ := admin(http.MethodPost, "/items", `{"id":"keyed","stock":10}`); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if got := buy("keyed", 1, "k-once"); got[api.Sold] != 1 {
		t.Fatalf("keyed sale: %v", got)
	}
	if err := clock.Set(25 * time.Hour); err != nil {
		t.Fatal(err)
	}
	got := buy("keyed", 3, "k-once")
	if err := clock.Set(0); err != nil {
		t.Fatal(err)
	}
	got2 := buy("keyed", 3, "k-once")
	if _, it := admin(http.MethodGet, "/items/keyed", ""); got[api.Sold] != 3 || got2[api.Sold] != 3 || it.Lucky != 1 {
		t.Fatalf("the key after a 25 h jump: %v, and back: %v, lucky %d; want every answer the replay of one unit", got, got2, it.Lucky)
	}

	// 3. A failover to a replica 60 s ahead ended a sale early for good,
	// and one to a replica 60 s behind sold after the end.
	ends = time.Now().Add(30 * time.Second)
	if code, _ := admin(http.MethodPost, "/items", fmt.Sprintf(`{"id":"ahead","stock":500,"ends_at":%d}`, ends.UnixMilli())); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if err := clock.Set(time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := buy("ahead", 30, ""); got[api.ClockSkew] != 30 {
		t.Fatalf("30 s before the end on a primary 60 s ahead: %v; want 30 clock_skew (refused, not ended)", got)
	}
	if err := clock.Set(0); err != nil {
		t.Fatal(err)
	}
	if got := buy("ahead", 30, ""); got[api.Sold] != 30 {
		t.Fatalf("the clock right again before the end: %v; want 30 sold (the sale was not ended for good)", got)
	}
	ends = time.Now().Add(1500 * time.Millisecond)
	if code, _ := admin(http.MethodPost, "/items", fmt.Sprintf(`{"id":"behind","stock":500,"ends_at":%d}`, ends.UnixMilli())); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if err := clock.Set(-time.Minute); err != nil {
		t.Fatal(err)
	}
	readyzSays(true)
	for time.Now().Before(ends) {
		time.Sleep(time.Until(ends))
	}
	if got := buy("behind", 60, ""); got[api.ClockSkew] != 60 {
		t.Fatalf("after the end on a primary 60 s behind: %v; want 60 clock_skew, none sold", got)
	}
	if err := clock.Set(0); err != nil {
		t.Fatal(err)
	}
	if got := buy("behind", 6, ""); got[api.Ended] != 6 {
		t.Fatalf("after the end, the clock right again: %v; want 6 ended", got)
	}
	if _, it := admin(http.MethodGet, "/items/behind", ""); it.Lucky != 0 || it.State != "ended" {
		t.Fatalf("item behind: %+v; want 0 sold, ended", it)
	}
	readyzSays(false)
}
