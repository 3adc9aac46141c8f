package handler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"seckill/internal/api"
	"seckill/internal/handler"
	"seckill/internal/health"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// cannedInventory answers from fixed values, with no server.
type cannedInventory struct {
	status stock.Status
	sold   bool
	err    error
}

func (f *cannedInventory) Status(context.Context) (stock.Status, error) { return f.status, f.err }
func (f *cannedInventory) Reset(_ context.Context, n int64) error {
	f.status = stock.Status{Stock: n}
	return f.err
}
func (f *cannedInventory) Ping(context.Context) error { return f.err }

// checkedInventory is a cannedInventory that can check its counters, as
// *redisstore.Store can: /readyz then reports "stock".
type checkedInventory struct {
	cannedInventory
	counters error
}

func (f *checkedInventory) CheckCounters(context.Context) error { return f.counters }
func (f *cannedInventory) Receipt(context.Context, string) (int64, bool, error) {
	return f.status.Stock, f.sold, f.err
}

// Every body stockd answers, byte for byte: other tools and scripts parse
// them (scripts/compose-test.sh greps "is_leader":true), so a change of a
// field name, a value or an omitted field must be deliberate.
func TestResponseBodiesExact(t *testing.T) {
	sold := sellerFunc(func(context.Context) (stock.Sale, error) {
		return stock.Sale{StockAfter: 0, Token: 7, Attempt: "a1"}, nil
	})
	failing := func(err error) handler.Seller {
		return sellerFunc(func(context.Context) (stock.Sale, error) { return stock.Sale{}, err })
	}
	cases := []struct {
		name         string
		seller       handler.Seller
		inv          handler.Inventory
		method, path string
		body         string
		code         int
		want         string
	}{
		{"sold, last unit", sold, &cannedInventory{}, "POST", "/stock/reduce", "", 200,
			`{"attempt":"a1","replica":"r-test","result":"sold","stock":0,"token":7}`},
		{"sold out", failing(stock.ErrSoldOut), &cannedInventory{}, "POST", "/stock/reduce", "", 409,
			`{"replica":"r-test","result":"sold_out"}`},
		{"limit reached", failing(stock.ErrLimitReached), &cannedInventory{}, "POST", "/stock/reduce", "", 409,
			`{"replica":"r-test","result":"limit_reached"}`},
		{"busy", failing(stock.ErrBusy), &cannedInventory{}, "POST", "/stock/reduce", "", 503,
			`{"replica":"r-test","result":"busy"}`},
		{"fenced", failing(stock.ErrFenced), &cannedInventory{}, "POST", "/stock/reduce", "", 409,
			`{"error":"sale refused: stale fencing token","replica":"r-test","result":"fenced"}`},
		{"unconfirmed", failing(&stock.UnconfirmedError{Attempt: "a2", Err: fmt.Errorf("%w: x", stock.ErrUnavailable)}),
			&cannedInventory{}, "POST", "/stock/reduce", "", 503,
			`{"attempt":"a2","error":"sale outcome unconfirmed; ask GET /stock/receipts/\u003cattempt\u003e","replica":"r-test","result":"unconfirmed"}`},
		{"internal error", failing(errors.New("boom")), &cannedInventory{}, "POST", "/stock/reduce", "", 500,
			`{"error":"internal error","replica":"r-test","result":"error"}`},
		{"stock", nil, &cannedInventory{status: stock.Status{Stock: 3, Lucky: 4}}, "GET", "/stock", "", 200,
			`{"lucky":4,"replica":"r-test","stock":3}`},
		{"stock, redis down", nil, &cannedInventory{err: stock.ErrUnavailable}, "GET", "/stock", "", 503,
			`{"error":"stock service unavailable","replica":"r-test"}`},
		// Added when a missing stock key stopped reading as 0 left: the
		// sale's own answer, never {"stock":0}.
		{"stock, sale lost or never reset", nil, &cannedInventory{err: fmt.Errorf("stock: status: %w: key \"stock\" is missing", stock.ErrStoreLost)},
			"GET", "/stock", "", 503,
			`{"error":"the sale is not in the stock Redis (lost, or never reset): nothing sold until an operator resets it","replica":"r-test","result":"store_lost"}`},
		{"receipt sold", nil, &cannedInventory{status: stock.Status{Stock: 0}, sold: true}, "GET", "/stock/receipts/a3", "", 200,
			`{"attempt":"a3","replica":"r-test","sold":true,"stock":0}`},
		{"receipt not sold", nil, &cannedInventory{}, "GET", "/stock/receipts/a4", "", 200,
			`{"attempt":"a4","replica":"r-test","sold":false}`},
		{"receipt id too long", nil, &cannedInventory{}, "GET", "/stock/receipts/" + strings.Repeat("a", 65), "", 400,
			`{"error":"attempt id too long","replica":"r-test"}`},
		{"reset", nil, &cannedInventory{}, "POST", "/stock/reset", `{"stock":300}`, 200,
			`{"lucky":0,"replica":"r-test","stock":300}`},
		// Added with the reset's replica wait : the admin is
		// told what the 503 means and what to do.
		{"reset not replicated", nil, &cannedInventory{err: fmt.Errorf("%w: %w", stock.ErrUnavailable, redisstore.ErrNotReplicated)},
			"POST", "/stock/reset", `{"stock":300}`, 503,
			`{"error":"reset not acknowledged by enough replicas in time (stock.min_replica_acks); a failover could bring back the old sale: reset again","replica":"r-test"}`},
		{"reset, redis down", nil, &cannedInventory{err: stock.ErrUnavailable}, "POST", "/stock/reset", `{"stock":300}`, 503,
			`{"error":"stock service unavailable","replica":"r-test"}`},
		{"healthz", nil, &cannedInventory{}, "GET", "/healthz", "", 200,
			`{"replica":"r-test","status":"ok"}`},
		{"readyz", nil, &cannedInventory{}, "GET", "/readyz", "", 200,
			`{"fence":"ok","lock":"ok","redis":"ok","replica":"r-test"}`},
		// Added with the counter check: "stock" comes after the
		// existing fields, which are unchanged.
		{"readyz, counters checked", nil, &checkedInventory{}, "GET", "/readyz", "", 200,
			`{"fence":"ok","lock":"ok","redis":"ok","replica":"r-test","stock":"ok"}`},
		{"readyz, stock not an integer", nil, &checkedInventory{counters: fmt.Errorf("stock: status: %w: \"stock\"", stock.ErrNotInteger)},
			"GET", "/readyz", "", 503,
			`{"fence":"ok","lock":"ok","redis":"ok","replica":"r-test","stock":"stock: status: stock key holds a non-integer: \"stock\""}`},
		{"stock not an integer", failing(fmt.Errorf("stock: fenced read: %w: \"stock\"", stock.ErrNotInteger)),
			&cannedInventory{}, "POST", "/stock/reduce", "", 500,
			`{"error":"stock key holds a non-integer","replica":"r-test","result":"error"}`},
		{"info", nil, &cannedInventory{}, "GET", "/info", "", 200,
			`{"backend":"local","fencing":true,"min_replica_acks":0,"mode":"locked","replica":"r-test","version":"v-test"}`},
		{"no route", nil, &cannedInventory{}, "GET", "/nope", "", 404,
			`{"error":"no such route: /nope","replica":"r-test"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := handler.New(handler.Config{
				Replica: replica, Backend: "local", Fencing: true, Mode: "locked", Version: "v-test", AdminToken: token,
			}, handler.Deps{Seller: tc.seller, Inventory: tc.inv})
			req := httptest.NewRequestWithContext(t.Context(), tc.method, tc.path, strings.NewReader(tc.body))
			req.Header.Set("X-Admin-Token", token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if got := rec.Body.String(); rec.Code != tc.code || got != tc.want {
				t.Fatalf("%s %s: got %d %s, want %d %s", tc.method, tc.path, rec.Code, got, tc.code, tc.want)
			}
		})
	}
}

// GET /info with the stock Redis's durability read: "durability" after
// "backend", the existing fields unchanged.
func TestInfoBodyWithDurability(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    health.Durability
		want string
	}{
		{"no AOF", health.Durability{Version: "7.0.15"},
			`{"backend":"local","durability":{"aof":false,"promise":"a 200 is in one Redis's memory only: a Redis restart loses it (no AOF)","redis_version":"7.0.15"},"fencing":true,"min_replica_acks":0,"mode":"locked","replica":"r-test","version":"v-test"}`},
		{"AOF everysec, WAITAOF", health.Durability{AOF: true, Fsync: health.FsyncEverysec, WaitAOF: true, Version: "7.2.4"},
			`{"backend":"local","durability":{"aof":true,"fsync":"everysec","promise":"a 200 survives a Redis process crash (AOF, fsync everysec: up to 1 s of sales may be lost on a machine crash)","redis_version":"7.2.4","waitaof":true},"fencing":true,"min_replica_acks":0,"mode":"locked","replica":"r-test","version":"v-test"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := handler.New(handler.Config{Replica: replica, Backend: "local", Fencing: true, Mode: "locked", Version: "v-test", AdminToken: token},
				handler.Deps{Inventory: &cannedInventory{}, Health: health.New(health.Config{Durability: &health.DurabilityCheck{Known: &tc.d}})})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/info", nil))
			if got := rec.Body.String(); rec.Code != 200 || got != tc.want {
				t.Fatalf("GET /info: got %d %s, want 200 %s", rec.Code, got, tc.want)
			}
		})
	}
}

// segmentedInventory is a cannedInventory whose stock is split.
type segmentedInventory struct {
	cannedInventory
	segments []int64
}

func (f *segmentedInventory) StatusBySegment(context.Context) (stock.Status, []int64, error) {
	return f.status, f.segments, f.err
}

// GET /stock lists the segments when the stock is split, and only then, so
// the one-key body stays byte for byte what it was.
func TestStockBodyWithSegments(t *testing.T) {
	cases := []struct {
		name     string
		segments []int64
		want     string
	}{
		{"split", []int64{2, 0, -1}, `{"lucky":9,"replica":"r-test","segments":[2,0,-1],"stock":1}`},
		{"one segment", []int64{1}, `{"lucky":9,"replica":"r-test","stock":1}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inv := &segmentedInventory{cannedInventory{status: stock.Status{Stock: 1, Lucky: 9}}, tc.segments}
			h := handler.New(handler.Config{Replica: replica, Backend: "local", AdminToken: token},
				handler.Deps{Inventory: inv})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/stock", nil))
			if got := rec.Body.String(); rec.Code != 200 || got != tc.want {
				t.Fatalf("GET /stock: got %d %s, want 200 %s", rec.Code, got, tc.want)
			}
		})
	}
}

// GET /info with the release, what it runs beside and the formats: after
// "version", the existing fields unchanged (an older reader of /info
// ignores them).
func TestInfoBodyWithRelease(t *testing.T) {
	h := handler.New(handler.Config{Replica: replica, Backend: "local", Fencing: true, Mode: "locked", Version: "v-test", AdminToken: token,
		Release: "0.10.0", RunsBeside: "0.9.0", Formats: []api.Format{{Name: "sale", Writes: 1, ReadsFrom: 1}, {Name: "witness", Writes: 1}}},
		handler.Deps{Inventory: &cannedInventory{}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/info", nil))
	want := `{"backend":"local","fencing":true,"min_replica_acks":0,"mode":"locked","replica":"r-test","version":"v-test","release":"0.10.0","runs_beside":"0.9.0",` +
		`"formats":[{"name":"sale","writes":1,"reads_from":1},{"name":"witness","writes":1,"reads_from":0}]}`
	if got := rec.Body.String(); rec.Code != 200 || got != want {
		t.Fatalf("GET /info: got %d %s, want 200 %s", rec.Code, got, want)
	}
}
