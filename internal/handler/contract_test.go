package handler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"seckill/internal/handler"
	"seckill/internal/stock"
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
		inv          *cannedInventory
		method, path string
		body         string
		code         int
		want         string
	}{
		{"sold, last unit", sold, &cannedInventory{}, "POST", "/stock/reduce", "", 200,
			`{"attempt":"a1","replica":"r-test","result":"sold","stock":0,"token":7}`},
		{"sold out", failing(stock.ErrSoldOut), &cannedInventory{}, "POST", "/stock/reduce", "", 409,
			`{"replica":"r-test","result":"sold_out"}`},
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
		{"receipt sold", nil, &cannedInventory{status: stock.Status{Stock: 0}, sold: true}, "GET", "/stock/receipts/a3", "", 200,
			`{"attempt":"a3","replica":"r-test","sold":true,"stock":0}`},
		{"receipt not sold", nil, &cannedInventory{}, "GET", "/stock/receipts/a4", "", 200,
			`{"attempt":"a4","replica":"r-test","sold":false}`},
		{"receipt id too long", nil, &cannedInventory{}, "GET", "/stock/receipts/" + strings.Repeat("a", 65), "", 400,
			`{"error":"attempt id too long","replica":"r-test"}`},
		{"reset", nil, &cannedInventory{}, "POST", "/stock/reset", `{"stock":300}`, 200,
			`{"lucky":0,"replica":"r-test","stock":300}`},
		{"healthz", nil, &cannedInventory{}, "GET", "/healthz", "", 200,
			`{"replica":"r-test","status":"ok"}`},
		{"readyz", nil, &cannedInventory{}, "GET", "/readyz", "", 200,
			`{"fence":"ok","lock":"ok","redis":"ok","replica":"r-test"}`},
		{"info", nil, &cannedInventory{}, "GET", "/info", "", 200,
			`{"backend":"local","fencing":true,"mode":"locked","replica":"r-test","version":"v-test"}`},
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
