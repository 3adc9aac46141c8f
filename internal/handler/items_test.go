package handler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"seckill/internal/auth"
	"seckill/internal/handler"
	"seckill/internal/lock/locallock"
	"seckill/internal/metrics"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// itemsEnv is the API with real items (redisstore.Items: fenced locked sales
// over the in-process lock, the ledger on) on a fresh Redis, buyers named
// by a trusted gateway's X-User.
func itemsEnv(t *testing.T) *env {
	t.Helper()
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	items := redisstore.NewItems(redisstore.ItemsConfig{
		Redis: rdb, Base: redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}.Derive(true),
		Service: stock.ServiceConfig{Locker: locallock.New(), Backend: "local", LockKey: "k", Fencing: true, Replica: replica},
	})
	return itemsAPI(t, rdb, items, gateway)
}

func itemsAPI(t *testing.T, rdb *redis.Client, items handler.Items, buyers *auth.Identity) *env {
	t.Helper()
	e := &env{rdb: rdb, metrics: metrics.New(prometheus.Labels{"replica": replica})}
	e.h = handler.New(handler.Config{Replica: replica, Backend: "local", Mode: "locked", AdminToken: token, Buyers: buyers},
		handler.Deps{
			Seller:    sellerFunc(func(context.Context) (stock.Sale, error) { return stock.Sale{}, errors.New("not this sale") }),
			Inventory: &cannedInventory{},
			Items:     items,
			Metrics:   e.metrics,
		})
	return e
}

func (e *env) admin(t *testing.T, method, path, body string) response {
	t.Helper()
	return e.do(t, method, path, body, "X-Admin-Token", token)
}

func wantAnswer(t *testing.T, what string, r response, code int, fields map[string]any) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: got %d %s, want %d", what, r.code, r.raw, code)
	}
	for k, v := range fields {
		if r.body[k] != v {
			t.Fatalf("%s: got %s=%v in %s, want %v", what, k, r.body[k], r.raw, v)
		}
	}
}

// Every item route, through an item's life: created upcoming, refused
// before its window, reset open, sold out, ended; its receipts and list.
func TestItemRoutes(t *testing.T) {
	e := itemsEnv(t)
	now := time.Now()
	starts := now.Add(time.Hour).UTC().Truncate(time.Millisecond)
	body := fmt.Sprintf(`{"id":"x","stock":3,"starts_at":%q,"per_user_limit":0}`, starts.Format(time.RFC3339Nano))

	wantAnswer(t, "create without the token", e.do(t, http.MethodPost, "/items", body), http.StatusUnauthorized, nil)
	r := e.admin(t, http.MethodPost, "/items", body)
	wantAnswer(t, "create", r, http.StatusCreated, map[string]any{
		"id": "x", "stock": float64(3), "initial": float64(3), "lucky": float64(0), "state": "upcoming",
		"starts_at": float64(starts.UnixMilli()), "ends_at": float64(0), "sold_out": false, "per_user_limit": float64(0),
	})
	if r.body["now"].(float64) <= 0 {
		t.Fatalf("create: no Redis clock in %s", r.raw)
	}
	wantAnswer(t, "create again", e.admin(t, http.MethodPost, "/items", body), http.StatusConflict, nil)
	wantAnswer(t, "read", e.do(t, http.MethodGet, "/items/x", ""), http.StatusOK, map[string]any{"state": "upcoming", "stock": float64(3)})

	r = e.do(t, http.MethodPost, "/items/x/reduce", "")
	wantAnswer(t, "sale before the window", r, http.StatusConflict, map[string]any{
		"result": "not_started", "starts_at": float64(starts.UnixMilli()),
	})
	if counter(t, e.metrics, "not_started") != 1 {
		t.Fatal("the refused sale was not counted")
	}

	wantAnswer(t, "reset", e.admin(t, http.MethodPost, "/items/x/reset", `{"stock":2,"per_user_limit":5}`), http.StatusOK, map[string]any{
		"id": "x", "stock": float64(2), "state": "open", "starts_at": float64(0), "per_user_limit": float64(5),
	})
	var attempt string
	for i := range 2 {
		r = e.do(t, http.MethodPost, "/items/x/reduce", "", handler.HeaderUser, "ann", handler.HeaderIdempotencyKey, fmt.Sprintf("k%d", i))
		wantAnswer(t, "sale", r, http.StatusOK, map[string]any{"result": "sold", "stock": float64(1 - i)})
		attempt, _ = r.body["attempt"].(string)
	}
	r = e.do(t, http.MethodPost, "/items/x/reduce", "", handler.HeaderUser, "ann", handler.HeaderIdempotencyKey, "k1")
	wantAnswer(t, "replayed key", r, http.StatusOK, map[string]any{"result": "sold", "replayed": true})
	wantAnswer(t, "sold out", e.do(t, http.MethodPost, "/items/x/reduce", ""), http.StatusConflict, map[string]any{"result": "sold_out"})
	wantAnswer(t, "receipt", e.do(t, http.MethodGet, "/items/x/receipts/"+attempt, ""), http.StatusOK, map[string]any{"sold": true, "stock": float64(0)})
	wantAnswer(t, "read sold out", e.do(t, http.MethodGet, "/items/x", ""), http.StatusOK, map[string]any{"sold_out": true, "lucky": float64(2)})

	// The item's order ledger, read as the default sale's is: its orders
	// by id and by buyer, and its counts.
	wantAnswer(t, "item order", e.do(t, http.MethodGet, "/items/x/orders/"+attempt, "", handler.HeaderUser, "ann"), http.StatusOK,
		map[string]any{"id": attempt, "user": "ann", "unit": float64(2)})
	wantAnswer(t, "item order, another buyer", e.do(t, http.MethodGet, "/items/x/orders/"+attempt, "", handler.HeaderUser, "bob"), http.StatusNotFound, nil)
	r = e.do(t, http.MethodGet, "/items/x/orders", "", handler.HeaderUser, "ann")
	wantAnswer(t, "item orders", r, http.StatusOK, map[string]any{"user": "ann", "total": float64(2)})
	wantAnswer(t, "item ledger without the token", e.do(t, http.MethodGet, "/items/x/ledger", ""), http.StatusUnauthorized, nil)
	wantAnswer(t, "item ledger", e.admin(t, http.MethodGet, "/items/x/ledger", ""), http.StatusOK,
		map[string]any{"lucky": float64(2), "orders": float64(2), "buyers": float64(1)})
	wantAnswer(t, "no such item's ledger", e.admin(t, http.MethodGet, "/items/nope/ledger", ""), http.StatusNotFound, nil)
	wantAnswer(t, "the default sale's ledger", e.admin(t, http.MethodGet, "/ledger", ""), http.StatusNotFound, nil)

	// Ended: a window that closed at 1970's first millisecond.
	wantAnswer(t, "reset ended", e.admin(t, http.MethodPost, "/items/x/reset", `{"stock":2,"ends_at":1}`), http.StatusOK, map[string]any{"state": "ended"})
	r = e.do(t, http.MethodPost, "/items/x/reduce", "")
	wantAnswer(t, "sale after the window", r, http.StatusConflict, map[string]any{"result": "ended"})
	if _, has := r.body["starts_at"]; has {
		t.Fatalf("an ended answer carries starts_at: %s", r.raw)
	}

	wantAnswer(t, "second item", e.admin(t, http.MethodPost, "/items", `{"id":"a1","stock":0}`), http.StatusCreated, map[string]any{"sold_out": true})
	r = e.do(t, http.MethodGet, "/items", "")
	items, _ := r.body["items"].([]any)
	if r.code != http.StatusOK || len(items) != 2 || items[0].(map[string]any)["id"] != "a1" || items[1].(map[string]any)["ends_at"] != float64(1) {
		t.Fatalf("list: got %d %s, want a1 then x", r.code, r.raw)
	}

	for _, tc := range []struct {
		method, path, body string
		code               int
	}{
		{http.MethodGet, "/items/nope", "", http.StatusNotFound},
		{http.MethodPost, "/items/nope/reduce", "", http.StatusNotFound},
		{http.MethodPost, "/items/nope/reset", `{"stock":1}`, http.StatusNotFound},
		{http.MethodGet, "/items/nope/receipts/a1", "", http.StatusNotFound},
		{http.MethodGet, "/items/No_Such", "", http.StatusBadRequest},
		{http.MethodPost, "/items/-x/reduce", "", http.StatusBadRequest},
		{http.MethodPost, "/items/X/reset", `{"stock":1}`, http.StatusBadRequest},
		{http.MethodGet, "/items/x/reduce", "", http.StatusMethodNotAllowed},
	} {
		r := e.admin(t, tc.method, tc.path, tc.body)
		if msg, _ := r.body["error"].(string); r.code != tc.code || msg == "" {
			t.Errorf("%s %s: got %d %s, want %d with an error", tc.method, tc.path, r.code, r.raw, tc.code)
		}
	}
	if r := e.do(t, http.MethodGet, "/items/x/reduce", ""); !strings.Contains(r.raw, "a sale is POST /items/x/reduce") {
		t.Errorf("GET of a sale: got %s, want the hint", r.raw)
	}
}

// Bad bodies are 4xx JSON with a message, and change nothing.
func TestItemBadBodies(t *testing.T) {
	e := itemsEnv(t)
	wantAnswer(t, "create", e.admin(t, http.MethodPost, "/items", `{"id":"x","stock":5}`), http.StatusCreated, nil)
	for _, tc := range []struct {
		path, body string
		code       int
		says       string
	}{
		{"/items", `{"id":"y","stock":5,"colour":"red"}`, 400, `unknown field "colour"`},
		{"/items", `{"id":"y","stock":5,"stock":6}`, 400, `duplicate field "stock"`},
		{"/items", `{"id":"y","stock":-1}`, 400, `"stock" must be an integer`},
		{"/items", `{"id":"y","stock":1.5}`, 400, `"stock" must be an integer`},
		{"/items", `{"id":"y"}`, 400, `"stock" is required`},
		{"/items", `{"stock":5}`, 400, `"id" is required`},
		{"/items", `{"id":"Y!","stock":5}`, 400, `id "Y!"`},
		{"/items", `{"id":5,"stock":5}`, 400, `"id" must be a string`},
		{"/items", `{"id":"y","stock":5,"starts_at":20,"ends_at":10}`, 400, "not after starts_at"},
		{"/items", `{"id":"y","stock":5,"starts_at":10,"ends_at":10}`, 400, "not after starts_at"},
		{"/items", `{"id":"y","stock":5,"starts_at":"tomorrow"}`, 400, `"starts_at" must be unix ms or an RFC 3339 time`},
		{"/items", `{"id":"y","stock":5,"ends_at":-5}`, 400, `"ends_at" must be unix ms`},
		{"/items", `{"id":"y","stock":5,"per_user_limit":-1}`, 400, `"per_user_limit" must be an integer`},
		{"/items", `{"id":"y","stock":5}{}`, 400, "unexpected data"},
		{"/items", `[]`, 400, "want a JSON object"},
		{"/items/x/reset", `{"id":"x","stock":5}`, 400, `unknown field "id"`},
		{"/items/x/reset", `{"stock":5,"ends_at":"2030-01-02T10:00:00"}`, 400, `"ends_at" must be unix ms or an RFC 3339 time`},
		{"/items/x/reset", strings.Repeat(" ", 5000) + `{"stock":5}`, 413, "larger than"},
	} {
		r := e.admin(t, http.MethodPost, tc.path, tc.body)
		if msg, _ := r.body["error"].(string); r.code != tc.code || !strings.Contains(msg, tc.says) {
			t.Errorf("POST %s %.60s: got %d %s, want %d saying %q", tc.path, tc.body, r.code, r.raw, tc.code, tc.says)
		}
	}
	r := e.do(t, http.MethodPost, "/items", `{"id":"y","stock":5}`, "X-Admin-Token", token, "Content-Type", "text/plain")
	wantAnswer(t, "text/plain", r, http.StatusUnsupportedMediaType, nil)
	wantAnswer(t, "after the refusals", e.do(t, http.MethodGet, "/items/x", ""), http.StatusOK, map[string]any{"stock": float64(5)})
	wantAnswer(t, "never created", e.do(t, http.MethodGet, "/items/y", ""), http.StatusNotFound, nil)
}

// fakeItems answers every call with err.
type fakeItems struct{ err error }

func (f fakeItems) Create(context.Context, redisstore.Item) (redisstore.ItemStatus, error) {
	return redisstore.ItemStatus{}, f.err
}
func (f fakeItems) Reset(context.Context, redisstore.Item) (redisstore.ItemStatus, error) {
	return redisstore.ItemStatus{}, f.err
}
func (f fakeItems) Status(context.Context, string) (redisstore.ItemStatus, error) {
	return redisstore.ItemStatus{}, f.err
}
func (f fakeItems) List(context.Context) ([]redisstore.Item, error) { return nil, f.err }
func (f fakeItems) ReduceFor(context.Context, string, stock.Buyer) (stock.Sale, error) {
	return stock.Sale{}, f.err
}
func (f fakeItems) Receipt(context.Context, string, string) (int64, bool, error) {
	return 0, false, f.err
}
func (f fakeItems) Orders(context.Context, string) (stock.OrderReader, error) { return nil, f.err }
func (f fakeItems) Archive(context.Context, string) (redisstore.ItemStatus, error) {
	return redisstore.ItemStatus{}, f.err
}
func (f fakeItems) Unlatch(context.Context, string, string) (redisstore.ItemStatus, error) {
	return redisstore.ItemStatus{}, f.err
}

// What the items answer when they fail, route by route.
func TestItemErrors(t *testing.T) {
	unsupported := fmt.Errorf("%w: segmented stock (4 segments)", stock.ErrItemsUnsupported)
	down := fmt.Errorf("%w: dial tcp 10.0.0.1:6379: refused", stock.ErrUnavailable)
	for _, tc := range []struct {
		name         string
		err          error
		method, path string
		code         int
		says         string
	}{
		{"unsupported create", unsupported, http.MethodPost, "/items", 501, "segmented stock"},
		{"unsupported sale", unsupported, http.MethodPost, "/items/x/reduce", 501, "segmented stock"},
		{"reset not replicated", fmt.Errorf("%w: %w", stock.ErrUnavailable, redisstore.ErrNotReplicated), http.MethodPost, "/items/x/reset", 503, "replicas"},
		{"read, Redis down", down, http.MethodGet, "/items/x", 503, "stock service unavailable"},
		{"list, Redis down", down, http.MethodGet, "/items", 503, "stock service unavailable"},
		{"read, sale lost", stock.ErrStoreLost, http.MethodGet, "/items/x", 503, "not in the stock Redis"},
		{"sale unconfirmed", &stock.UnconfirmedError{Attempt: "a-1", Err: down}, http.MethodPost, "/items/x/reduce", 503, "GET /items/x/receipts/<attempt>"},
		{"sale, Redis down", down, http.MethodPost, "/items/x/reduce", 503, "stock service unavailable"},
		{"sale, a closed window", &stock.WindowError{EndsAt: 5, Err: stock.ErrEnded}, http.MethodPost, "/items/x/reduce", 409, ""},
		{"sale, clocks apart at an edge", fmt.Errorf("stock: peek: %w", &stock.ClockSkewError{Skew: time.Minute}), http.MethodPost, "/items/x/reduce", 503, "clock"},
		{"unlatch, ended by Redis's clock", fmt.Errorf("%w: item x", redisstore.ErrWindowEnded), http.MethodPost, "/items/x/unlatch", 409, "ended"},
		{"unlatch, archived", fmt.Errorf("%w: x", stock.ErrItemArchived), http.MethodPost, "/items/x/unlatch", 410, "archived"},
		{"unsupported ledger", unsupported, http.MethodGet, "/items/x/ledger", 501, "segmented stock"},
		{"orders, no item", fmt.Errorf("%w: x", stock.ErrNoItem), http.MethodGet, "/items/x/orders/o-1", 404, "no such item"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := itemsAPI(t, nil, fakeItems{err: tc.err}, nil)
			body := ""
			if tc.method == http.MethodPost && !strings.HasSuffix(tc.path, "/reduce") {
				body = `{"id":"x","stock":1}`
				if strings.HasSuffix(tc.path, "/reset") {
					body = `{"stock":1}`
				}
				if strings.HasSuffix(tc.path, "/unlatch") {
					body = `{"by":"ops"}`
				}
			}
			r := e.admin(t, tc.method, tc.path, body)
			if msg, _ := r.body["error"].(string); r.code != tc.code || !strings.Contains(msg, tc.says) {
				t.Fatalf("got %d %s, want %d saying %q", r.code, r.raw, tc.code, tc.says)
			}
			if strings.Contains(r.raw, "10.0.0.1") {
				t.Fatalf("the answer leaks the Redis address: %s", r.raw)
			}
		})
	}
}

// A per-user limit needs named buyers; without any (auth.buyers none) it
// is refused. Without items, every item route is a 404 JSON.
func TestItemLimitNeedsBuyersAndItemsOff(t *testing.T) {
	e := itemsAPI(t, nil, fakeItems{}, nil)
	r := e.admin(t, http.MethodPost, "/items", `{"id":"x","stock":1,"per_user_limit":2}`)
	wantAnswer(t, "limit without buyers", r, http.StatusBadRequest, nil)
	if !strings.Contains(r.raw, "named buyers") {
		t.Fatalf("got %s, want it to say the limit needs named buyers", r.raw)
	}
	off := itemsAPI(t, nil, nil, nil)
	for _, p := range []string{"/items", "/items/x"} {
		wantAnswer(t, "items off: GET "+p, off.do(t, http.MethodGet, p, ""), http.StatusNotFound, nil)
	}
	wantAnswer(t, "items off: sale", off.do(t, http.MethodPost, "/items/x/reduce", ""), http.StatusNotFound, nil)
}

// POST /items/:id/unlatch lifts an item's end latch (redisstore.Items.Unlatch,
// whose clock steps are tested in package stock): the admin token and a
// "by" only; the item sells again and says so.
func TestItemUnlatchRoute(t *testing.T) {
	e := itemsEnv(t)
	ends := time.Now().Add(time.Hour).UnixMilli()
	wantAnswer(t, "create", e.admin(t, http.MethodPost, "/items", fmt.Sprintf(`{"id":"x","stock":3,"ends_at":%d}`, ends)), http.StatusCreated, nil)
	// A latch as a sale under a clock stepped ahead would have left it.
	if err := e.rdb.HSet(t.Context(), "{item:x}:stock:window", "end_seen_at", ends).Err(); err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, "sale, latched", e.do(t, http.MethodPost, "/items/x/reduce", ""), http.StatusConflict, map[string]any{"result": "ended"})
	wantAnswer(t, "status, latched", e.do(t, http.MethodGet, "/items/x", ""), http.StatusOK, map[string]any{"state": "ended"})
	wantAnswer(t, "unlatch without the token", e.do(t, http.MethodPost, "/items/x/unlatch", `{"by":"ops"}`), http.StatusUnauthorized, nil)
	wantAnswer(t, "unlatch without a by", e.admin(t, http.MethodPost, "/items/x/unlatch", `{}`), http.StatusBadRequest, nil)
	wantAnswer(t, "unlatch of no item", e.admin(t, http.MethodPost, "/items/nope/unlatch", `{"by":"ops"}`), http.StatusNotFound, nil)
	wantAnswer(t, "unlatch", e.admin(t, http.MethodPost, "/items/x/unlatch", `{"by":"ops"}`), http.StatusOK, map[string]any{"state": "open"})
	wantAnswer(t, "sale after the unlatch", e.do(t, http.MethodPost, "/items/x/reduce", ""), http.StatusOK, map[string]any{"result": "sold"})
}

// DELETE /items/:id archives an item: the admin token only; its buyers
// get 410 and nothing is sold; it reads as archived, its ledger stays,
// a reset is 410 too, and GET /items lists it no more.
func TestItemArchiveRoute(t *testing.T) {
	e := itemsEnv(t)
	if r := e.admin(t, http.MethodPost, "/items", `{"id":"x","stock":3}`); r.code != http.StatusCreated {
		t.Fatalf("create: got %d %s", r.code, r.raw)
	}
	wantAnswer(t, "sale", e.do(t, http.MethodPost, "/items/x/reduce", "", "X-User", "ann"), http.StatusOK, map[string]any{"result": "sold"})
	wantAnswer(t, "archive without the token", e.do(t, http.MethodDelete, "/items/x", ""), http.StatusUnauthorized, nil)
	wantAnswer(t, "sale after a refused archive", e.do(t, http.MethodPost, "/items/x/reduce", ""), http.StatusOK, map[string]any{"result": "sold"})
	r := e.admin(t, http.MethodDelete, "/items/x", "")
	wantAnswer(t, "archive", r, http.StatusOK, map[string]any{"state": "archived", "stock": float64(1), "lucky": float64(2)})
	if at, _ := r.body["archived_at"].(float64); at <= 0 {
		t.Fatalf("archive: got archived_at %v in %s, want its time", r.body["archived_at"], r.raw)
	}
	r = e.do(t, http.MethodPost, "/items/x/reduce", "", "X-User", "bob")
	wantAnswer(t, "sale of an archived item", r, http.StatusGone, nil)
	if msg, _ := r.body["error"].(string); !strings.Contains(msg, "archived") {
		t.Fatalf("sale of an archived item: got %s, want an error saying it is archived", r.raw)
	}
	wantAnswer(t, "status", e.do(t, http.MethodGet, "/items/x", ""), http.StatusOK, map[string]any{"state": "archived", "stock": float64(1), "lucky": float64(2)})
	wantAnswer(t, "ledger", e.admin(t, http.MethodGet, "/items/x/ledger", ""), http.StatusOK, map[string]any{"orders": float64(2), "lucky": float64(2)})
	wantAnswer(t, "reset", e.admin(t, http.MethodPost, "/items/x/reset", `{"stock":9}`), http.StatusGone, nil)
	wantAnswer(t, "archive of an unknown item", e.admin(t, http.MethodDelete, "/items/nope", ""), http.StatusNotFound, nil)
	if r := e.do(t, http.MethodGet, "/items", ""); r.code != http.StatusOK || len(r.body["items"].([]any)) != 0 {
		t.Fatalf("list: got %d %s, want no live item", r.code, r.raw)
	}
}
