package handler_test

import (
	"net/http"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/handler"
	"seckill/internal/health"
	"seckill/internal/lock/locallock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
)

// policyEnv is newEnv's API with /readyz reading the maxmemory-policy of
// the stock Redis and of a second one standing for the lock's.
func policyEnv(t *testing.T, allow bool) (e *env, lockRDB *redis.Client) {
	t.Helper()
	e = newEnv(t, 1, nil, nil)
	lockSrv := servertest.Redis(t)
	lockRDB = redis.NewClient(&redis.Options{Addr: lockSrv.Addr()})
	t.Cleanup(func() { _ = lockRDB.Close() })
	svc := stock.NewService(stock.ServiceConfig{Store: e.store, Locker: locallock.New(), Backend: "local", LockKey: "k"})
	e.h = handler.New(handler.Config{Replica: replica, AdminToken: token},
		handler.Deps{Seller: svc, Inventory: e.store, Metrics: e.metrics, Health: health.New(health.Config{
			AllowEviction: allow, Policies: []health.Policy{{Redis: e.rdb}, {Name: "lock redis", Redis: lockRDB}},
		})})
	return e, lockRDB
}

func setPolicy(t *testing.T, rdb *redis.Client, policy string) {
	t.Helper()
	if err := rdb.ConfigSet(t.Context(), "maxmemory-policy", policy).Err(); err != nil {
		t.Fatal(err)
	}
}

// A Redis whose policy turns evicting while the replica runs (a CONFIG
// SET, a managed service's parameter change) makes /readyz fail, naming
// the policy; back to noeviction, it is ready again.
func TestReadyzRefusesEvictingPolicy(t *testing.T) {
	e, lockRDB := policyEnv(t, false)
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusOK || r.body["redis"] != "ok" || r.body["eviction"] != nil {
		t.Fatalf("noeviction: got %d %s, want 200 redis ok, no eviction field", r.code, r.raw)
	}
	setPolicy(t, e.rdb, "volatile-lru")
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusServiceUnavailable || r.body["redis"] != "evicting: maxmemory-policy volatile-lru" {
		t.Fatalf("stock Redis volatile-lru: got %d %s, want 503 redis %q", r.code, r.raw, "evicting: maxmemory-policy volatile-lru")
	}
	setPolicy(t, e.rdb, "noeviction")
	setPolicy(t, lockRDB, "allkeys-lru")
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusServiceUnavailable || r.body["redis"] != "lock redis: evicting: maxmemory-policy allkeys-lru" {
		t.Fatalf("lock Redis allkeys-lru: got %d %s, want 503 naming the lock Redis's policy", r.code, r.raw)
	}
	setPolicy(t, lockRDB, "noeviction")
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusOK || r.body["redis"] != "ok" {
		t.Fatalf("back to noeviction: got %d %s, want 200", r.code, r.raw)
	}
}

// stock.allow_eviction: the replica stays ready, and /readyz says which
// Redis may evict and under which policy.
func TestReadyzAllowsEvictionWhenOptedOut(t *testing.T) {
	e, lockRDB := policyEnv(t, true)
	setPolicy(t, e.rdb, "allkeys-lru")
	setPolicy(t, lockRDB, "volatile-ttl")
	r := e.do(t, http.MethodGet, "/readyz", "")
	const want = "allowed: maxmemory-policy allkeys-lru; lock redis: allowed: maxmemory-policy volatile-ttl"
	if r.code != http.StatusOK || r.body["redis"] != "ok" || r.body["eviction"] != want {
		t.Fatalf("got %d %s, want 200 redis ok eviction %q", r.code, r.raw, want)
	}
}

// Under noeviction a Redis at its maxmemory refuses the sale's script with
// OOM: nothing was written, so the buyer gets a definite 503 error (the
// service cannot sell now), not "unconfirmed, ask the receipt", which the
// OOM reply used to be taken for.
func TestReduceOutOfMemoryIsDefinite503(t *testing.T) {
	for _, mode := range []stock.Mode{stock.ModeAtomic, stock.ModeLocked} {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t, 5, nil, nil)
			svc := stock.NewService(stock.ServiceConfig{
				Store: e.store, Locker: locallock.New(), Backend: "local", LockKey: "k", Mode: mode, Fencing: true,
			})
			e.h = handler.New(handler.Config{Replica: replica, AdminToken: token},
				handler.Deps{Seller: svc, Inventory: e.store, Metrics: e.metrics})
			if err := e.rdb.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
				t.Fatal(err)
			}
			r := e.do(t, http.MethodPost, "/stock/reduce", "")
			if r.code != http.StatusServiceUnavailable || r.body["result"] != "error" || r.body["error"] != "stock service unavailable" || r.body["attempt"] != nil {
				t.Fatalf("got %d %s, want 503 error \"stock service unavailable\" with no attempt", r.code, r.raw)
			}
			if err := e.rdb.ConfigSet(t.Context(), "maxmemory", "0").Err(); err != nil {
				t.Fatal(err)
			}
			e.wantStock(t, stock.Status{Stock: 5, Lucky: 0})
			if got := counter(t, e.metrics, "unconfirmed"); got != 0 {
				t.Fatalf("got %v unconfirmed sales, want 0", got)
			}
		})
	}
}
