package handler_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"seckill/internal/handler"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// fakeReservations answers pay and cancel as canned, and records the
// payment id it was given.
type fakeReservations struct {
	end    redisstore.Ending
	err    error
	gotPID string
}

func (f *fakeReservations) Pay(_ context.Context, _, pid string) (redisstore.Ending, error) {
	f.gotPID = pid
	return f.end, f.err
}

func (f *fakeReservations) Cancel(context.Context, string) (redisstore.Ending, error) {
	return f.end, f.err
}

// Every answer of POST /orders/:id/pay and /cancel, byte for byte: the
// state that won, a refund owed as a 200, a reused payment id 409, an
// order sold without a window 404, a bad body 400, and another buyer's
// order no order at all.
func TestPayAndCancelAnswers(t *testing.T) {
	orders := func() *fakeOrders { return &fakeOrders{orders: map[string]stock.Order{"p-1": order1}} }
	paid := &fakeReservations{end: redisstore.Ending{State: redisstore.StatePaid}}
	late := &fakeReservations{end: redisstore.Ending{State: redisstore.StateExpired, Refund: true}}
	reused := &fakeReservations{err: fmt.Errorf("x: %w", redisstore.ErrPaymentReused)}
	final := &fakeReservations{err: fmt.Errorf("x: %w", redisstore.ErrNoReservation)}
	down := &fakeReservations{err: fmt.Errorf("%w: refused", stock.ErrUnavailable)}
	const body = `{"payment_id":"pay-9"}`
	cases := []struct {
		name string
		res  handler.Reservations
		path string
		body string
		user string // X-User, without the admin token; "" the admin
		code int
		want string
	}{
		{"paid", paid, "/orders/p-1/pay", body, "alice", 200, `{"replica":"r-test","order":"p-1","state":"paid"}`},
		{"late", late, "/orders/p-1/pay", body, "", 200, `{"replica":"r-test","order":"p-1","state":"expired","refund":true}`},
		{"reused", reused, "/orders/p-1/pay", body, "alice", 409, `{"error":"the payment id already paid another order","replica":"r-test"}`},
		{"final", final, "/orders/p-1/pay", body, "alice", 404,
			`{"error":"order p-1 has no reservation: it was sold without a payment window, and is final","replica":"r-test"}`},
		{"another buyer's", paid, "/orders/p-1/pay", body, "bob", 404, `{"error":"no such order: p-1","replica":"r-test"}`},
		{"no such order", paid, "/orders/p-2/cancel", "", "alice", 404, `{"error":"no such order: p-2","replica":"r-test"}`},
		{"bad body", paid, "/orders/p-1/pay", `{"payment_id":"a b"}`, "alice", 400,
			`{"error":"want {\"payment_id\":\"\u003cthe payment's id\u003e\"}: \"payment_id\" must be 1..255 printable ASCII, no spaces","replica":"r-test"}`},
		{"unknown field", paid, "/orders/p-1/pay", `{"payment_id":"x","amount":3}`, "alice", 400, ""},
		{"cancelled", &fakeReservations{end: redisstore.Ending{State: redisstore.StateCancelled}}, "/orders/p-1/cancel", "", "alice", 200,
			`{"replica":"r-test","order":"p-1","state":"cancelled"}`},
		{"cancel lost to a payment", paid, "/orders/p-1/cancel", "", "alice", 200, `{"replica":"r-test","order":"p-1","state":"paid"}`},
		{"redis down", down, "/orders/p-1/cancel", "", "alice", 503, `{"error":"stock service unavailable","replica":"r-test"}`},
		{"reservations off", nil, "/orders/p-1/cancel", "", "alice", 404,
			`{"error":"order p-1 has no reservation: orders.payment_window is 0, a unit sold is final","replica":"r-test"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := handler.New(handler.Config{Replica: replica, Backend: "local", AdminToken: token, Buyers: gateway},
				handler.Deps{Inventory: &cannedInventory{}, Orders: orders(), Reservations: tc.res})
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, tc.path, strings.NewReader(tc.body))
			if tc.user == "" {
				req.Header.Set("X-Admin-Token", token)
			} else {
				req.Header.Set("X-User", tc.user)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code || (tc.want != "" && rec.Body.String() != tc.want) {
				t.Fatalf("POST %s: got %d %s, want %d %s", tc.path, rec.Code, rec.Body, tc.code, tc.want)
			}
		})
	}
	if paid.gotPID != "pay-9" {
		t.Fatalf("the payment id reached the store as %q, want pay-9", paid.gotPID)
	}
}
