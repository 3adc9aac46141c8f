package handler_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"seckill/internal/handler"
	"seckill/internal/health"
	"seckill/internal/lock/locallock"
	"seckill/internal/metrics"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// durabilityEnv is the API over a Redis with an AOF (fsync everysec),
// whose persistence /info reports, read again by /readyz at most every
// minute of a clock the test moves.
func durabilityEnv(t *testing.T, requireAOF bool) (e *env, clock *time.Time) {
	t.Helper()
	srv := servertest.RedisWith(t, "--appendonly", "yes", "--appendfsync", "everysec")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	e = &env{rdb: rdb, store: redisstore.NewStore(rdb, redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "fence"}),
		metrics: metrics.New(prometheus.Labels{"replica": replica})}
	if err := e.store.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock = &t0
	t.Cleanup(handler.SetNow(func() time.Time { return *clock }))
	svc := stock.NewService(stock.ServiceConfig{Store: e.store, Locker: locallock.New(), Mode: stock.ModeAtomic, Backend: "local", LockKey: "k"})
	e.h = handler.New(handler.Config{Replica: replica, AdminToken: token},
		handler.Deps{Seller: svc, Inventory: e.store, Metrics: e.metrics,
			Health: health.New(health.Config{Now: func() time.Time { return *clock }, RequireAOF: requireAOF,
				Durability: &health.DurabilityCheck{Redis: rdb, ReplicaAcks: 1, Every: time.Minute}})})
	return e, clock
}

// infoCalls is how many INFO commands the Redis had served before this
// one, which counts once it is answered.
func infoCalls(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	stats, err := rdb.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(stats, "\r\n") {
		if v, ok := strings.CutPrefix(line, "cmdstat_info:calls="); ok {
			calls, _, _ := strings.Cut(v, ",")
			n, err := strconv.Atoi(calls)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// GET /info says what a 200 promises once the Redis has been read, by
// /readyz and no more often than DurabilityCheck.Every: sales and /info
// cost the Redis no INFO, and a changed fsync policy shows after the next
// due probe.
func TestInfoReportsDurability(t *testing.T) {
	e, clock := durabilityEnv(t, false)
	if r := e.do(t, http.MethodGet, "/info", ""); r.body["durability"] != nil {
		t.Fatalf("before any reading: got %s, want no durability", r.raw)
	}
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusOK {
		t.Fatalf("readyz: got %d %s", r.code, r.raw)
	}
	const everysec = `"durability":{"aof":true,"fsync":"everysec","promise":"a 200 survives a Redis process crash ` +
		`(AOF, fsync everysec: up to 1 s of sales may be lost on a machine crash), and survives a failover to a ` +
		`replica that acknowledged it","redis_version":"7.`
	if r := e.do(t, http.MethodGet, "/info", ""); !strings.Contains(r.raw, everysec) {
		t.Fatalf("got %s, want it to contain %s", r.raw, everysec)
	}

	before := infoCalls(t, e.rdb)
	for range 5 {
		e.do(t, http.MethodPost, "/stock/reduce", "")
		e.do(t, http.MethodGet, "/info", "")
		e.do(t, http.MethodGet, "/readyz", "") // not due: the reading is younger than a minute
	}
	if after := infoCalls(t, e.rdb); after != before+1 { // +1: the INFO that counted before
		t.Fatalf("INFO calls went from %d to %d over sales, /info and early probes, want only the count's own", before, after)
	}

	if err := e.rdb.ConfigSet(t.Context(), "appendfsync", "always").Err(); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(time.Minute)
	e.do(t, http.MethodGet, "/readyz", "")
	if r := e.do(t, http.MethodGet, "/info", ""); !strings.Contains(r.raw, `"fsync":"always","promise":"a 200 survives a Redis process crash and a machine crash (AOF, fsync always)`) {
		t.Fatalf("after CONFIG SET appendfsync always and a due probe: got %s", r.raw)
	}
}

// stock.require_aof: ready while the Redis keeps an AOF; once it is turned
// off (CONFIG SET appendonly no), the next due probe answers 503, naming
// the key; back on, ready again.
func TestReadyzRequiresAOF(t *testing.T) {
	e, clock := durabilityEnv(t, true)
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusOK || r.body["redis"] != "ok" {
		t.Fatalf("AOF on: got %d %s, want 200", r.code, r.raw)
	}
	if err := e.rdb.ConfigSet(t.Context(), "appendonly", "no").Err(); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(time.Minute)
	const want = "no AOF: stock.require_aof refuses a Redis that keeps sales in memory only (appendonly no)"
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusServiceUnavailable || r.body["redis"] != want {
		t.Fatalf("AOF turned off: got %d %s, want 503 redis %q", r.code, r.raw, want)
	}
	if r := e.do(t, http.MethodGet, "/info", ""); !strings.Contains(r.raw, `"durability":{"aof":false,"promise":"a 200 is in the memory of the primary and 1 replica`) {
		t.Fatalf("AOF turned off: /info %s", r.raw)
	}
	if err := e.rdb.ConfigSet(t.Context(), "appendonly", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(time.Minute)
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusOK {
		t.Fatalf("AOF back on: got %d %s, want 200", r.code, r.raw)
	}
}
