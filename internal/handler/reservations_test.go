package handler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill/internal/handler"
	"seckill/internal/orders"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// fakeReservations answers pay and cancel as canned, and records the
// payment id it was given.
type fakeReservations struct {
	end    redisstore.Ending
	census redisstore.Census
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

func (f *fakeReservations) Census(context.Context) (redisstore.Census, error) {
	return f.census, f.err
}

func (f *fakeReservations) OrderState(context.Context, string) (string, int64, error) {
	if f.err != nil {
		return "", 0, f.err
	}
	return redisstore.StateReserved, 1_700_000_600_000, nil
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

// A payment provider's callback pays without the buyer's credential when
// signed with orders.payment_secret over its timestamp, path and body;
// a stale timestamp, a body or path other than the signed one, or no
// secret set is 401, and nothing is paid.
func TestPaymentProviderCallback(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	defer handler.SetNow(func() time.Time { return clock })()
	const secret = "4f1c8e0b9a7d2e6f3b5a9c1d7e2f4a6b"
	ts := strconv.FormatInt(clock.Unix(), 10)
	body := `{"payment_id":"psp-1"}`
	sign := func(ts, path, body string) string { return handler.PaymentSignature(secret, ts, path, []byte(body)) }
	cases := []struct {
		name, secret, path, body, ts, sig string
		code                              int
	}{
		{"signed", secret, "/orders/p-1/pay", body, ts, sign(ts, "/orders/p-1/pay", body), 200},
		{"upper-case hex", secret, "/orders/p-1/pay", body, ts, strings.ToUpper(sign(ts, "/orders/p-1/pay", body)), 200},
		{"no secret set", "", "/orders/p-1/pay", body, ts, sign(ts, "/orders/p-1/pay", body), 401},
		{"body changed", secret, "/orders/p-1/pay", `{"payment_id":"psp-2"}`, ts, sign(ts, "/orders/p-1/pay", body), 401},
		{"another order's", secret, "/orders/p-1/pay", body, ts, sign(ts, "/orders/p-2/pay", body), 401},
		{"stale", secret, "/orders/p-1/pay", body, "1699999600", sign("1699999600", "/orders/p-1/pay", body), 401},
		{"no timestamp", secret, "/orders/p-1/pay", body, "", sign("", "/orders/p-1/pay", body), 401},
		{"unknown order", secret, "/orders/p-2/pay", body, ts, sign(ts, "/orders/p-2/pay", body), 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := &fakeReservations{end: redisstore.Ending{State: redisstore.StatePaid}}
			h := handler.New(handler.Config{Replica: replica, Backend: "local", AdminToken: token, Buyers: gateway, PaymentSecret: tc.secret},
				handler.Deps{Inventory: &cannedInventory{}, Orders: &fakeOrders{orders: map[string]stock.Order{"p-1": order1}}, Reservations: res})
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, tc.path, strings.NewReader(tc.body))
			req.Header.Set(handler.HeaderPaymentTimestamp, tc.ts)
			req.Header.Set(handler.HeaderPaymentSignature, tc.sig)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code {
				t.Fatalf("POST %s: got %d %s, want %d", tc.path, rec.Code, rec.Body, tc.code)
			}
			if paid := res.gotPID != ""; paid != (tc.code == 200) {
				t.Fatalf("POST %s answered %d: the store was asked to pay %q", tc.path, rec.Code, res.gotPID)
			}
		})
	}
}

// A sold-out answer while reservations are pending says how many, with
// Retry-After up to the earliest deadline (at least 1 s); none pending, or
// reservations off, answers as before.
func TestSoldOutWithReservationsPending(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	defer handler.SetNow(func() time.Time { return clock })()
	soldOut := sellerFunc(func(context.Context) (stock.Sale, error) { return stock.Sale{}, stock.ErrSoldOut })
	for _, tc := range []struct {
		name    string
		pending func(context.Context) (int64, time.Time, error)
		want    string
		retry   string
	}{
		{"pending", func(context.Context) (int64, time.Time, error) {
			return 2, clock.Add(90*time.Second + time.Millisecond), nil
		},
			`{"replica":"r-test","pending":2,"result":"sold_out"}`, "91"},
		{"deadline passed", func(context.Context) (int64, time.Time, error) { return 1, clock.Add(-time.Second), nil },
			`{"replica":"r-test","pending":1,"result":"sold_out"}`, "1"},
		{"none pending", func(context.Context) (int64, time.Time, error) { return 0, time.Time{}, nil }, `{"replica":"r-test","result":"sold_out"}`, ""},
		{"not read", func(context.Context) (int64, time.Time, error) { return 0, time.Time{}, stock.ErrUnavailable },
			`{"replica":"r-test","result":"sold_out"}`, ""},
		{"reservations off", nil, `{"replica":"r-test","result":"sold_out"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := handler.New(handler.Config{Replica: replica, Backend: "local"},
				handler.Deps{Seller: soldOut, Inventory: &cannedInventory{}, Pending: tc.pending})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/stock/reduce", nil))
			if rec.Code != http.StatusConflict || rec.Body.String() != tc.want || rec.Header().Get("Retry-After") != tc.retry {
				t.Fatalf("got %d %s (Retry-After %q), want 409 %s (Retry-After %q)", rec.Code, rec.Body, rec.Header().Get("Retry-After"), tc.want, tc.retry)
			}
		})
	}
}

// With reservations, GET /orders/:id carries the order's state and, while
// reserved, its pay_by: what a buyer whose sale was replayed needs.
func TestOrderShowsItsReservation(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  *fakeReservations
		code int
		want string
	}{
		{"reserved", &fakeReservations{}, 200, `"state":"reserved","pay_by":1700000600000`},
		{"sold without a window", &fakeReservations{err: redisstore.ErrNoReservation}, 200, `"user":"alice"}`},
		{"redis down", &fakeReservations{err: fmt.Errorf("%w: refused", stock.ErrUnavailable)}, 503, `"stock service unavailable"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := handler.New(handler.Config{Replica: replica, Backend: "local", AdminToken: token},
				handler.Deps{Inventory: &cannedInventory{}, Orders: &fakeOrders{orders: map[string]stock.Order{"p-1": order1}}, Reservations: tc.res})
			code, body := get(t, h, "/orders/p-1")
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("GET /orders/p-1: got %d %s, want %d with %s", code, body, tc.code, tc.want)
			}
		})
	}
}

// GET /stock/reservations is the admin's census, byte for byte: sound, a
// broken invariant named, reservations off, Redis down, no token.
func TestReservationsCensusAnswers(t *testing.T) {
	sound := redisstore.Census{Reserved: 1, Paid: 2, Expired: 1, Stock: 1, Lucky: 4, Returned: 1, Initial: 4}
	broken := sound
	broken.Returned = 2 // a unit back twice
	cases := []struct {
		name  string
		res   handler.Reservations
		admin bool
		code  int
		want  string
	}{
		{"sound", &fakeReservations{census: sound}, true, 200,
			`{"cancelled":0,"expired":1,"replica":"r-test","initial":4,"lucky":4,"ok":true,"paid":2,"problems":[],"reserved":1,"returned":1,"stock":1}`},
		{"broken", &fakeReservations{census: broken}, true, 200,
			`{"cancelled":0,"expired":1,"replica":"r-test","initial":4,"lucky":4,"ok":false,"paid":2,"problems":["cancelled 0 + expired 1 = 1 orders ended unpaid, 2 units returned"],"reserved":1,"returned":2,"stock":1}`},
		{"off", nil, true, 404, `{"error":"no reservations: orders.payment_window is 0, a unit sold is final","replica":"r-test"}`},
		{"redis down", &fakeReservations{err: fmt.Errorf("%w: refused", stock.ErrUnavailable)}, true, 503,
			`{"error":"stock service unavailable","replica":"r-test"}`},
		{"no token", &fakeReservations{census: sound}, false, 401, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := handler.New(handler.Config{Replica: replica, Backend: "local", AdminToken: token, Buyers: gateway},
				handler.Deps{Inventory: &cannedInventory{}, Reservations: tc.res})
			req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/stock/reservations", nil)
			if tc.admin {
				req.Header.Set("X-Admin-Token", token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code || (tc.want != "" && rec.Body.String() != tc.want) {
				t.Fatalf("GET /stock/reservations: got %d %s, want %d %s", rec.Code, rec.Body, tc.code, tc.want)
			}
		})
	}
}

// fakeEnds is MySQL's copy of the ends: it fails with err, and records
// what it was given.
type fakeEnds struct {
	err error
	got []redisstore.End
}

func (f *fakeEnds) Record(_ context.Context, ends []redisstore.End) error {
	f.got = append(f.got, ends...)
	return f.err
}

// With durable orders a payment is answered paid only once MySQL holds
// it: MySQL down is 503 with Retry-After (the same payment sent again
// pays once), MySQL holding another end 409; a refund, and a cancel, wait
// for no MySQL write.
func TestPaidWaitsForMySQL(t *testing.T) {
	const body = `{"payment_id":"pay-9"}`
	paid := &fakeReservations{end: redisstore.Ending{State: redisstore.StatePaid}}
	late := &fakeReservations{end: redisstore.Ending{State: redisstore.StateExpired, Refund: true}}
	cases := []struct {
		name     string
		res      *fakeReservations
		path     string
		mysql    error
		code     int
		want     string
		recorded int
	}{
		{"stored", paid, "/orders/p-1/pay", nil, 200, `{"replica":"r-test","order":"p-1","state":"paid"}`, 1},
		{"mysql down", paid, "/orders/p-1/pay", fmt.Errorf("orders: begin: %w", errors.New("connection refused")), 503,
			`{"error":"order p-1: paid in the stock Redis, not yet stored in MySQL; send the payment again (the same payment_id pays once)","replica":"r-test"}`, 1},
		{"conflict", paid, "/orders/p-1/pay", fmt.Errorf("%w: order p-1 is expired in MySQL", orders.ErrEndConflict), 409,
			`{"error":"order p-1: MySQL holds another end for it (the stock Redis lost state); the operator settles it","replica":"r-test"}`, 1},
		{"refund", late, "/orders/p-1/pay", errors.New("not asked"), 200, `{"replica":"r-test","order":"p-1","state":"expired","refund":true}`, 0},
		{"cancel", &fakeReservations{end: redisstore.Ending{State: redisstore.StateCancelled}}, "/orders/p-1/cancel", errors.New("not asked"), 200,
			`{"replica":"r-test","order":"p-1","state":"cancelled"}`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ends := &fakeEnds{err: tc.mysql}
			h := handler.New(handler.Config{Replica: replica, Backend: "local", AdminToken: token, Buyers: gateway},
				handler.Deps{Inventory: &cannedInventory{}, Orders: &fakeOrders{orders: map[string]stock.Order{"p-1": order1}},
					Reservations: tc.res, Ends: ends})
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, tc.path, strings.NewReader(body))
			req.Header.Set("X-User", "alice")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code || rec.Body.String() != tc.want {
				t.Fatalf("POST %s: got %d %s, want %d %s", tc.path, rec.Code, rec.Body, tc.code, tc.want)
			}
			if tc.code == 503 && rec.Header().Get("Retry-After") != "1" {
				t.Fatalf("503 without Retry-After 1: %q", rec.Header().Get("Retry-After"))
			}
			if len(ends.got) != tc.recorded {
				t.Fatalf("MySQL was given %d ends, want %d", len(ends.got), tc.recorded)
			}
			if tc.recorded == 1 && (ends.got[0].Order != "p-1" || ends.got[0].State != redisstore.StatePaid || ends.got[0].PaymentID != "pay-9") {
				t.Fatalf("MySQL was given %+v, want p-1 paid by pay-9", ends.got[0])
			}
		})
	}
}
