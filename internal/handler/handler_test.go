package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"seckill/internal/handler"
	"seckill/internal/lock"
	"seckill/internal/lock/locallock"
	"seckill/internal/metrics"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

const (
	replica = "r-test"
	token   = "s3cret-token-2b7f"
)

// sellerFunc lets a test decide what a sale returns.
type sellerFunc func(ctx context.Context) (stock.Sale, error)

func (f sellerFunc) ReduceFor(ctx context.Context, _ stock.Buyer) (stock.Sale, error) { return f(ctx) }

type pingerFunc func(ctx context.Context) error

func (f pingerFunc) Ping(ctx context.Context) error { return f(ctx) }

type env struct {
	rdb     *redis.Client
	store   *redisstore.Store
	metrics *metrics.Metrics
	h       http.Handler
}

// newEnv builds the API over a real Redis holding n units. seller nil means
// the real Service with the in-process lock.
func newEnv(t *testing.T, n int64, seller handler.Seller, pinger lock.Pinger) *env {
	t.Helper()
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	e := &env{
		rdb:     rdb,
		store:   redisstore.NewStore(rdb, redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "fence"}),
		metrics: metrics.New(prometheus.Labels{"replica": replica}),
	}
	if err := e.store.Reset(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	if seller == nil {
		seller = stock.NewService(stock.ServiceConfig{Store: e.store, Locker: locallock.New(), Backend: "local", LockKey: "k"})
	}
	e.h = handler.New(handler.Config{
		Replica: replica, Backend: "local", Mode: "locked", Version: "v-test", AdminToken: token,
	}, handler.Deps{Seller: seller, Inventory: e.store, LockPinger: pinger, Metrics: e.metrics})
	return e
}

type response struct {
	code   int
	header http.Header
	body   map[string]any
	raw    string
}

func (e *env) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	r := response{code: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") && path != "/metrics" {
		t.Fatalf("%s %s: got Content-Type %q, want JSON; body %s", method, path, ct, r.raw)
	}
	if path != "/metrics" {
		if err := json.Unmarshal(rec.Body.Bytes(), &r.body); err != nil {
			t.Fatalf("%s %s: body is not a JSON object: %v: %s", method, path, err, r.raw)
		}
		if r.body["replica"] != replica || r.header.Get("X-Replica") != replica {
			t.Fatalf("%s %s: got replica %v / X-Replica %q, want %q in both", method, path,
				r.body["replica"], r.header.Get("X-Replica"), replica)
		}
	}
	return r
}

func (e *env) wantStock(t *testing.T, want stock.Status) {
	t.Helper()
	got, err := e.store.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("got stock %+v, want %+v", got, want)
	}
}

func TestReduceSellsThenSoldOut(t *testing.T) {
	e := newEnv(t, 2, nil, nil)
	for i := range 2 {
		r := e.do(t, http.MethodPost, "/stock/reduce", "")
		if r.code != http.StatusOK || r.body["result"] != "sold" || r.body["stock"] != float64(1-i) || r.body["token"] == nil {
			t.Fatalf("sale %d: got %d %s, want 200 sold stock %d with a token", i, r.code, r.raw, 1-i)
		}
	}
	r := e.do(t, http.MethodPost, "/stock/reduce", "")
	if r.code != http.StatusConflict || r.body["result"] != "sold_out" {
		t.Fatalf("got %d %s, want 409 sold_out", r.code, r.raw)
	}
	e.wantStock(t, stock.Status{Stock: 0, Lucky: 2})
	if got := counter(t, e.metrics, "sold"); got != 2 {
		t.Fatalf("got seckill_reduce_total{result=sold} %v, want 2", got)
	}
	if got := counter(t, e.metrics, "sold_out"); got != 1 {
		t.Fatalf("got seckill_reduce_total{result=sold_out} %v, want 1", got)
	}
}

func TestReduceErrorStatuses(t *testing.T) {
	cases := []struct {
		err       error
		code      int
		result    string
		wantError bool
	}{
		{fmt.Errorf("x: %w", stock.ErrSoldOut), 409, "sold_out", false},
		{fmt.Errorf("x: %w", stock.ErrFenced), 409, "fenced", true},
		{fmt.Errorf("x: %w", stock.ErrMixedBackends), 409, "mixed_backends", true},
		{fmt.Errorf("x: %w", stock.ErrLimitReached), 409, "limit_reached", false},
		{fmt.Errorf("%w: %w", stock.ErrBusy, lock.ErrNotObtained), 503, "busy", false},
		{fmt.Errorf("%w: %w", stock.ErrLockLost, lock.ErrLost), 503, "lock_lost", true},
		{fmt.Errorf("%w: dial tcp: refused", stock.ErrUnavailable), 503, "error", true},
		{fmt.Errorf("%w: etcd down", lock.ErrUnavailable), 503, "error", true},
		{fmt.Errorf("stock: sale abandoned: %w", context.Canceled), 503, "error", true},
		{errors.New("something unexpected"), 500, "error", true},
	}
	for _, tc := range cases {
		t.Run(tc.result+"/"+tc.err.Error(), func(t *testing.T) {
			e := newEnv(t, 5, sellerFunc(func(context.Context) (stock.Sale, error) { return stock.Sale{}, tc.err }), nil)
			r := e.do(t, http.MethodPost, "/stock/reduce", "")
			if r.code != tc.code || r.body["result"] != tc.result {
				t.Fatalf("got %d %s, want %d result %q", r.code, r.raw, tc.code, tc.result)
			}
			if _, has := r.body["error"]; has != tc.wantError {
				t.Fatalf("error field present %v, want %v: %s", has, tc.wantError, r.raw)
			}
			// Finding 9: the text is generic; no internals (addresses,
			// wrapped error chains) reach an anonymous client.
			if msg, _ := r.body["error"].(string); msg != "" && (strings.Contains(msg, "dial") || strings.Contains(msg, "x:") ||
				strings.Contains(msg, "etcd") || strings.Contains(msg, "unexpected") || strings.Contains(msg, "canceled")) {
				t.Fatalf("error text leaks the internal error: %s", r.raw)
			}
			if got := counter(t, e.metrics, tc.result); got != 1 {
				t.Fatalf("got counter{result=%s} %v, want 1", tc.result, got)
			}
			e.wantStock(t, stock.Status{Stock: 5})
		})
	}
}

// A busy answer says when to come back: a shed buyer the estimated wait,
// rounded up to whole seconds; a wait that ran out 1 s. Other answers
// carry no Retry-After.
func TestBusyCarriesRetryAfter(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{&stock.BusyError{Queued: 90, RetryAfter: 2300 * time.Millisecond, Wait: time.Second}, "3"},
		{fmt.Errorf("%w: %w", stock.ErrBusy, lock.ErrNotObtained), "1"},
		{fmt.Errorf("x: %w", stock.ErrSoldOut), ""},
	}
	for _, tc := range cases {
		e := newEnv(t, 5, sellerFunc(func(context.Context) (stock.Sale, error) { return stock.Sale{}, tc.err }), nil)
		r := e.do(t, http.MethodPost, "/stock/reduce", "")
		if got := r.header.Get("Retry-After"); got != tc.want {
			t.Errorf("%v: Retry-After %q, want %q (%d %s)", tc.err, got, tc.want, r.code, r.raw)
		}
	}
}

func TestPanicIsA500JSON(t *testing.T) {
	e := newEnv(t, 5, sellerFunc(func(context.Context) (stock.Sale, error) { panic("boom") }), nil)
	r := e.do(t, http.MethodPost, "/stock/reduce", "")
	if r.code != http.StatusInternalServerError || r.body["error"] != "internal error" {
		t.Fatalf("got %d %s, want 500 internal error", r.code, r.raw)
	}
}

func TestStockAndReset(t *testing.T) {
	e := newEnv(t, 7, nil, nil)
	if r := e.do(t, http.MethodGet, "/stock", ""); r.code != 200 || r.body["stock"] != 7.0 || r.body["lucky"] != 0.0 {
		t.Fatalf("GET /stock: got %d %s, want 200 stock 7 lucky 0", r.code, r.raw)
	}
	e.do(t, http.MethodPost, "/stock/reduce", "")
	for _, hdr := range [][]string{{"X-Admin-Token", token}, {"Authorization", "Bearer " + token}} {
		r := e.do(t, http.MethodPost, "/stock/reset", `{"stock":300}`, hdr...)
		if r.code != 200 || r.body["stock"] != 300.0 || r.body["lucky"] != 0.0 {
			t.Fatalf("reset with %s: got %d %s, want 200 stock 300 lucky 0", hdr[0], r.code, r.raw)
		}
		e.wantStock(t, stock.Status{Stock: 300})
		e.do(t, http.MethodPost, "/stock/reduce", "")
	}
}

// Every bad request leaves the stock as it was.
func TestBadRequestsChangeNothing(t *testing.T) {
	// A minute passes between cases so the wrong-token ones do not spend
	// the admin bound for the rest (TestAdminBoundIsGlobal tests that).
	clock := time.Unix(1000, 0)
	defer handler.SetNow(func() time.Time { clock = clock.Add(time.Minute); return clock })()
	e := newEnv(t, 42, nil, nil)
	auth := []string{"X-Admin-Token", token}
	cases := []struct {
		name, method, path, body string
		headers                  []string
		code                     int
		errContains              string
	}{
		{"no token", "POST", "/stock/reset", `{"stock":1}`, nil, 401, "admin token"},
		{"bad token", "POST", "/stock/reset", `{"stock":1}`, []string{"X-Admin-Token", "wrong"}, 401, "admin token"},
		{"token prefix", "POST", "/stock/reset", `{"stock":1}`, []string{"X-Admin-Token", token[:5]}, 401, "admin token"},
		{"bad bearer", "POST", "/stock/reset", `{"stock":1}`, []string{"Authorization", "Bearer nope"}, 401, "admin token"},
		{"basic auth", "POST", "/stock/reset", `{"stock":1}`, []string{"Authorization", "Basic " + token}, 401, "admin token"},
		{"malformed JSON", "POST", "/stock/reset", `{"stock":`, auth, 400, "JSON object"},
		{"empty body", "POST", "/stock/reset", ``, auth, 400, "JSON object"},
		{"missing stock", "POST", "/stock/reset", `{}`, auth, 400, "required"},
		{"null stock", "POST", "/stock/reset", `{"stock":null}`, auth, 400, "integer"},
		{"negative", "POST", "/stock/reset", `{"stock":-1}`, auth, 400, "negative"},
		{"fraction", "POST", "/stock/reset", `{"stock":1.5}`, auth, 400, "integer"},
		{"exponent", "POST", "/stock/reset", `{"stock":1e3}`, auth, 400, "integer"},
		{"string", "POST", "/stock/reset", `{"stock":"300"}`, auth, 400, "integer"},
		{"overflow", "POST", "/stock/reset", `{"stock":99999999999999999999}`, auth, 400, "integer"},
		{"unknown field", "POST", "/stock/reset", `{"stock":1,"lucky":5}`, auth, 400, "unknown field"},
		// Was accepted, the last one winning.
		{"duplicate field", "POST", "/stock/reset", `{"stock":5,"stock":7}`, auth, 400, `duplicate field "stock"`},
		{"trailing data", "POST", "/stock/reset", `{"stock":1} {"stock":2}`, auth, 400, "after the JSON"},
		{"array", "POST", "/stock/reset", `[300]`, auth, 400, "JSON object"},
		// 413 (was 400: too large is not malformed).
		{"huge body", "POST", "/stock/reset", `{"stock":1,"x":"` + strings.Repeat("a", 8<<10) + `"}`, auth, 413, "larger than"},
		{"form post", "POST", "/stock/reset", `stock=1`, append([]string{"Content-Type", "application/x-www-form-urlencoded"}, auth...), 415, "Content-Type"},
		{"text/plain", "POST", "/stock/reset", `{"stock":1}`, append([]string{"Content-Type", "text/plain"}, auth...), 415, "Content-Type"},
		{"UTF-16", "POST", "/stock/reset", `{"stock":1}`, append([]string{"Content-Type", "application/json; charset=utf-16"}, auth...), 415, "charset"},
		{"gzip", "POST", "/stock/reset", `{"stock":1}`, append([]string{"Content-Encoding", "gzip"}, auth...), 415, "Content-Encoding"},
		{"trailing slash", "POST", "/stock/reduce/", ``, nil, 404, "no such route"},
		{"GET trailing slash", "GET", "/stock/", ``, nil, 404, "no such route"},
		{"GET reset", "GET", "/stock/reset", ``, auth, 405, "not allowed"},
		{"DELETE stock", "DELETE", "/stock", ``, auth, 405, "not allowed"},
		{"PUT reduce", "PUT", "/stock/reduce", ``, nil, 405, "not allowed"},
		{"GET reduce", "GET", "/stock/reduce", ``, nil, 405, "a sale is POST /stock/reduce"},
		{"HEAD reduce", "HEAD", "/stock/reduce", ``, nil, 405, "not allowed"},
		{"unknown route", "POST", "/stock/steal", ``, nil, 404, "no such route"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, tc.method, tc.path, tc.body, tc.headers...)
			msg, _ := r.body["error"].(string)
			if r.code != tc.code || !strings.Contains(msg, tc.errContains) {
				t.Fatalf("got %d %s, want %d with an error containing %q", r.code, r.raw, tc.code, tc.errContains)
			}
			e.wantStock(t, stock.Status{Stock: 42})
		})
	}
}

func TestHealthReadyInfo(t *testing.T) {
	var lockErr error
	e := newEnv(t, 1, nil, pingerFunc(func(context.Context) error { return lockErr }))
	if r := e.do(t, "GET", "/healthz", ""); r.code != 200 || r.body["status"] != "ok" {
		t.Fatalf("healthz: got %d %s", r.code, r.raw)
	}
	if r := e.do(t, "GET", "/readyz", ""); r.code != 200 || r.body["redis"] != "ok" || r.body["lock"] != "ok" {
		t.Fatalf("readyz: got %d %s, want 200 redis ok lock ok", r.code, r.raw)
	}
	lockErr = errors.New("etcd: no leader")
	if r := e.do(t, "GET", "/readyz", ""); r.code != 503 || r.body["redis"] != "ok" || r.body["lock"] != "etcd: no leader" {
		t.Fatalf("readyz with lock down: got %d %s, want 503 naming the lock error", r.code, r.raw)
	}
	r := e.do(t, "GET", "/info", "")
	if r.code != 200 || r.body["backend"] != "local" || r.body["fencing"] != false || r.body["mode"] != "locked" || r.body["version"] != "v-test" {
		t.Fatalf("info: got %d %s", r.code, r.raw)
	}
	e.do(t, "POST", "/stock/reduce", "")
	m := e.do(t, "GET", "/metrics", "")
	for _, want := range []string{`seckill_reduce_total{replica="r-test",result="sold"} 1`, "seckill_lock_wait_seconds_count", "seckill_sale_duration_seconds_count"} {
		if m.code != 200 || !strings.Contains(m.raw, want) {
			t.Fatalf("metrics: got %d, want a line containing %q", m.code, want)
		}
	}
}

// With Redis gone, the API answers 503 rather than hanging or 500.
func TestRedisDown(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	store := redisstore.NewStore(rdb, redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "fence"})
	svc := stock.NewService(stock.ServiceConfig{Store: store, Locker: locallock.New(), Backend: "local", LockKey: "k"})
	e := &env{store: store, h: handler.New(handler.Config{Replica: replica, AdminToken: token},
		handler.Deps{Seller: svc, Inventory: store})}
	if err := srv.Stop(5e9); err != nil {
		t.Fatal(err)
	}
	if r := e.do(t, "POST", "/stock/reduce", ""); r.code != 503 || r.body["result"] != "error" || r.body["error"] == nil {
		t.Fatalf("reduce: got %d %s, want 503 error", r.code, r.raw)
	}
	if r := e.do(t, "GET", "/stock", ""); r.code != 503 {
		t.Fatalf("stock: got %d %s, want 503", r.code, r.raw)
	}
	if r := e.do(t, "POST", "/stock/reset", `{"stock":1}`, "X-Admin-Token", token); r.code != 503 {
		t.Fatalf("reset: got %d %s, want 503", r.code, r.raw)
	}
	if r := e.do(t, "GET", "/readyz", ""); r.code != 503 || r.body["redis"] == "ok" {
		t.Fatalf("readyz: got %d %s, want 503 with a redis error", r.code, r.raw)
	}
}

// counter reads seckill_reduce_total{result} from the registry.
func counter(t *testing.T, m *metrics.Metrics, result string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "seckill_reduce_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A sale needs no body and no particular Content-Type: load tools (hey, ab,
// wrk, JMeter) send an empty POST with whatever type they default to.
func TestReduceAcceptsAnyEmptyPOST(t *testing.T) {
	types := []string{"", "text/plain", "application/x-www-form-urlencoded", "application/json", "multipart/form-data; boundary=x"}
	e := newEnv(t, int64(len(types)), nil, nil)
	for _, ct := range types {
		var headers []string
		if ct != "" {
			headers = []string{"Content-Type", ct}
		}
		if r := e.do(t, http.MethodPost, "/stock/reduce", "", headers...); r.code != http.StatusOK || r.body["result"] != "sold" {
			t.Fatalf("Content-Type %q: got %d %s, want 200 sold", ct, r.code, r.raw)
		}
	}
	e.wantStock(t, stock.Status{Stock: 0, Lucky: int64(len(types))})
}

// The texts anonymous clients see are stable: tools and people can match
// them, and they do not change with the failing dependency's address.
func TestReduceErrorTextsAreStable(t *testing.T) {
	cases := []struct {
		err         error
		result, msg string
	}{
		{fmt.Errorf("%w: read: dial tcp 127.0.0.1:16391: connect: connection refused", stock.ErrUnavailable), "error", "stock service unavailable"},
		{fmt.Errorf("NOSCRIPT a108db5f: %w", errors.New("ERR invalid expire time")), "error", "internal error"},
		{fmt.Errorf("stock:fence key %w", stock.ErrFenced), "fenced", "sale refused: stale fencing token"},
	}
	for _, tc := range cases {
		e := newEnv(t, 1, sellerFunc(func(context.Context) (stock.Sale, error) { return stock.Sale{}, tc.err }), nil)
		r := e.do(t, http.MethodPost, "/stock/reduce", "")
		if r.body["result"] != tc.result || r.body["error"] != tc.msg {
			t.Fatalf("%v: got %s, want result %q error %q", tc.err, r.raw, tc.result, tc.msg)
		}
	}
}

// A stock above 2^53-1 was accepted, and then every sale answered sold_out:
// the scripts read the stock as a Lua double, and 2^63-1 came back as -2^63.
// The reset refuses it with a 400 naming the limit; the limit itself sells
// exactly.
func TestResetRefusesStockAboveTwoTo53(t *testing.T) {
	e := newEnv(t, 5, nil, nil)
	auth := []string{"X-Admin-Token", token}
	for _, n := range []string{"9223372036854775807", "9007199254740992"} {
		r := e.do(t, http.MethodPost, "/stock/reset", `{"stock":`+n+`}`, auth...)
		msg, _ := r.body["error"].(string)
		if r.code != http.StatusBadRequest || !strings.Contains(msg, "at most 9007199254740991 (2^53-1)") {
			t.Fatalf("reset to %s: got %d %s, want 400 naming the limit 2^53-1", n, r.code, r.raw)
		}
		e.wantStock(t, stock.Status{Stock: 5})
	}
	if r := e.do(t, http.MethodPost, "/stock/reset", `{"stock":9007199254740991}`, auth...); r.code != http.StatusOK {
		t.Fatalf("reset to 2^53-1: got %d %s, want 200", r.code, r.raw)
	}
	r := e.do(t, http.MethodPost, "/stock/reduce", "")
	if r.code != http.StatusOK || !strings.Contains(r.raw, `"stock":9007199254740990`) {
		t.Fatalf("sale from 2^53-1: got %d %s, want 200 sold with stock 9007199254740990", r.code, r.raw)
	}
	e.wantStock(t, stock.Status{Stock: 9007199254740990, Lucky: 1})
}

// A stock key holding a non-integer made a sale answer 500 "internal
// error" (the log: "unexpected reply [0]"), GET /stock the same, and
// /readyz 200. Now each says what is wrong, and /readyz fails on it.
func TestNonIntegerStockKey(t *testing.T) {
	e := newEnv(t, 5, nil, nil)
	e.rdb.Set(t.Context(), "stock", "abc", 0)
	const want = "stock key holds a non-integer"
	r := e.do(t, http.MethodPost, "/stock/reduce", "")
	if r.code != http.StatusInternalServerError || r.body["error"] != want || r.body["result"] != "error" {
		t.Fatalf("reduce: got %d %s, want 500 error %q", r.code, r.raw, want)
	}
	if r := e.do(t, http.MethodGet, "/stock", ""); r.code != http.StatusInternalServerError || r.body["error"] != want {
		t.Fatalf("GET /stock: got %d %s, want 500 %q", r.code, r.raw, want)
	}
	r = e.do(t, http.MethodGet, "/readyz", "")
	if st, _ := r.body["stock"].(string); r.code != http.StatusServiceUnavailable || !strings.Contains(st, want) || r.body["redis"] != "ok" {
		t.Fatalf("readyz: got %d %s, want 503 with stock %q and redis ok", r.code, r.raw, want)
	}
	// A reset repairs it.
	if r := e.do(t, http.MethodPost, "/stock/reset", `{"stock":2}`, "X-Admin-Token", token); r.code != http.StatusOK {
		t.Fatalf("reset: got %d %s", r.code, r.raw)
	}
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusOK || r.body["stock"] != "ok" {
		t.Fatalf("readyz after reset: got %d %s, want 200 stock ok", r.code, r.raw)
	}
}

// A reset in JSON is accepted with no Content-Type or application/json in
// UTF-8, however spelt.
func TestResetContentTypes(t *testing.T) {
	e := newEnv(t, 1, nil, nil)
	for _, ct := range []string{"", "application/json", "application/json; charset=UTF-8", "Application/JSON;charset=utf-8"} {
		r := e.do(t, http.MethodPost, "/stock/reset", `{"stock":3}`, "X-Admin-Token", token, "Content-Type", ct)
		if r.code != http.StatusOK {
			t.Fatalf("Content-Type %q: got %d %s, want 200", ct, r.code, r.raw)
		}
	}
}
