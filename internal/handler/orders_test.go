package handler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"seckill/internal/auth"
	"seckill/internal/handler"
	"seckill/internal/stock"
)

// gateway names buyers by X-User from httptest's peer (192.0.2.1), as a
// trusted proxy would.
var gateway = func() *auth.Identity {
	ps, err := auth.ParseProxies([]string{"192.0.2.0/24"})
	if err != nil {
		panic(err)
	}
	return &auth.Identity{Mode: auth.ModeProxy, Proxies: ps}
}()

// fakeOrders is a ledger with fixed contents; it records the page asked.
type fakeOrders struct {
	orders map[string]stock.Order
	byUser []stock.Order
	total  int64
	stats  stock.LedgerStats
	err    error // returned by every call when set

	gotUser           string
	gotOffset, gotLim int
}

func (f *fakeOrders) Order(_ context.Context, id string) (stock.Order, error) {
	if f.err != nil {
		return stock.Order{}, f.err
	}
	o, ok := f.orders[id]
	if !ok {
		return stock.Order{}, fmt.Errorf("order %q: %w", id, stock.ErrNoOrder)
	}
	return o, nil
}

func (f *fakeOrders) OrdersByUser(_ context.Context, user string, offset, limit int) ([]stock.Order, int64, error) {
	f.gotUser, f.gotOffset, f.gotLim = user, offset, limit
	return f.byUser, f.total, f.err
}

func (f *fakeOrders) LedgerStats(context.Context) (stock.LedgerStats, error) { return f.stats, f.err }

// fakeDurable is the orders consumer's view of MySQL.
type fakeDurable struct {
	durable, lag       int64
	durableErr, lagErr error
	gotSale            string
	orders             []stock.Order // Orders answers those of the sale and ids asked
	ordersErr          error
}

func (f *fakeDurable) Orders(_ context.Context, sale string, ids []string) ([]stock.Order, error) {
	f.gotSale = sale
	var out []stock.Order
	for _, id := range ids {
		for _, o := range f.orders {
			if o.ID == id && o.Sale == sale {
				out = append(out, o)
			}
		}
	}
	return out, f.ordersErr
}

func (f *fakeDurable) Durable(_ context.Context, sale string) (int64, error) {
	f.gotSale = sale
	return f.durable, f.durableErr
}
func (f *fakeDurable) Lag(context.Context) (int64, error) { return f.lag, f.lagErr }

var order1 = stock.Order{
	ID: "p-1", Sale: "s1", User: "alice", Key: "k1", Token: 9, Replica: "r2", StockAfter: 4,
	Time: time.UnixMilli(1_700_000_000_123).In(time.FixedZone("X", 3600)), Entry: "1700000000123-0",
}

const order1JSON = `{"entry":"1700000000123-0","id":"p-1","key":"k1","replica":"r2","sale":"s1","stock_after":4,` +
	`"time":"2023-11-14T22:13:20.123Z","token":9,"user":"alice"}`

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil)
	req.Header.Set("X-Admin-Token", token) // the operator's view; buyers' in TestOrdersArePrivate
	h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("GET %s: got Content-Type %q, want JSON", path, ct)
	}
	if got := rec.Header().Get("X-Replica"); got != replica {
		t.Fatalf("GET %s: got X-Replica %q, want %q", path, got, replica)
	}
	return rec.Code, rec.Body.String()
}

func ordersHandler(o stock.OrderReader, d handler.DurableOrders) http.Handler {
	return handler.New(handler.Config{Replica: replica, Backend: "local", AdminToken: token},
		handler.Deps{Inventory: &cannedInventory{}, Orders: o, Durable: d})
}

// Every answer of the ledger's read side, byte for byte.
func TestOrdersAndLedgerBodies(t *testing.T) {
	full := func() *fakeOrders {
		return &fakeOrders{
			orders: map[string]stock.Order{"p-1": order1},
			byUser: []stock.Order{order1}, total: 7,
			stats: stock.LedgerStats{Sale: "s1", Orders: 3, Buyers: 2, Lucky: 3},
		}
	}
	down := &fakeOrders{err: fmt.Errorf("%w: dial tcp 10.0.0.1:6379: refused", stock.ErrUnavailable)}
	const off = `{"error":"the order ledger is off (stock.ledger: false)","replica":"r-test"}`
	const newerOrder = `{"error":"this replica is older than the order's stored format: it cannot read it until it is upgraded","replica":"r-test"}`
	cases := []struct {
		name    string
		orders  stock.OrderReader
		durable handler.DurableOrders
		path    string
		code    int
		want    string
	}{
		{"order", full(), nil, "/orders/p-1", 200, order1JSON},
		{"no such order", full(), nil, "/orders/p-2", 404, `{"error":"no such order: p-2","replica":"r-test"}`},
		{"order id too long", full(), nil, "/orders/" + strings.Repeat("a", 65), 400, `{"error":"order id too long","replica":"r-test"}`},
		{"order, redis down", down, nil, "/orders/p-1", 503, `{"error":"stock service unavailable","replica":"r-test"}`},
		{"order, ledger off", nil, nil, "/orders/p-1", 404, off},
		// Of a newer format, in Redis or in MySQL: this replica's fault,
		// said as such, not an outage of either.
		{"order, newer ledger entry", &fakeOrders{err: fmt.Errorf("read: %w", stock.ErrOrderFormat)}, nil, "/orders/p-1", 503, newerOrder},
		{"order, newer row", &fakeOrders{stats: stock.LedgerStats{Sale: "s1"}},
			&fakeDurable{ordersErr: fmt.Errorf("orders: %w", stock.ErrOrderFormat)}, "/orders/p-1", 503, newerOrder},
		{"order, store says ledger off", &fakeOrders{err: stock.ErrNoLedger}, nil, "/orders/p-1", 404, off},

		{"user's orders", full(), nil, "/orders?user=alice", 200,
			`{"replica":"r-test","orders":[` + order1JSON + `],"total":7,"user":"alice"}`},
		{"no orders", &fakeOrders{}, nil, "/orders?user=bob", 200, `{"replica":"r-test","orders":[],"total":0,"user":"bob"}`},
		{"orders, redis down", down, nil, "/orders?user=alice", 503, `{"error":"stock service unavailable","replica":"r-test"}`},
		{"orders, ledger off", nil, nil, "/orders?user=alice", 404, off},
		{"orders, store says ledger off", &fakeOrders{err: stock.ErrNoLedger}, nil, "/orders?user=alice", 404, off},

		{"ledger", full(), nil, "/ledger", 200, `{"buyers":2,"replica":"r-test","lucky":3,"orders":3,"sale":"s1"}`},
		{"ledger, durable", full(), &fakeDurable{durable: 2, lag: 1}, "/ledger", 200,
			`{"buyers":2,"durable":2,"replica":"r-test","lag":1,"lucky":3,"orders":3,"sale":"s1"}`},
		{"ledger, durable caught up", full(), &fakeDurable{durable: 0, lag: 0}, "/ledger", 200,
			`{"buyers":2,"durable":0,"replica":"r-test","lag":0,"lucky":3,"orders":3,"sale":"s1"}`},
		// MySQL down: the ledger (Redis) is still answered; durable is
		// unknown, so absent.
		{"ledger, mysql down", full(), &fakeDurable{durableErr: errors.New("dial tcp: refused"), lag: 5}, "/ledger", 200,
			`{"buyers":2,"replica":"r-test","lag":5,"lucky":3,"orders":3,"sale":"s1"}`},
		{"ledger, lag unknown", full(), &fakeDurable{durable: 3, lagErr: errors.New("NOGROUP")}, "/ledger", 200,
			`{"buyers":2,"durable":3,"replica":"r-test","lucky":3,"orders":3,"sale":"s1"}`},
		{"ledger, redis down", down, &fakeDurable{}, "/ledger", 503, `{"error":"stock service unavailable","replica":"r-test"}`},
		{"ledger off", nil, nil, "/ledger", 404, off},
		{"ledger, store says off", &fakeOrders{err: fmt.Errorf("x: %w", stock.ErrNoLedger)}, nil, "/ledger", 404, off},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, got := get(t, ordersHandler(tc.orders, tc.durable), tc.path)
			if code != tc.code || got != tc.want {
				t.Fatalf("GET %s: got %d %s, want %d %s", tc.path, code, got, tc.code, tc.want)
			}
		})
	}
}

// The durable count is asked for the ledger's current sale.
func TestLedgerAsksDurableForTheCurrentSale(t *testing.T) {
	d := &fakeDurable{}
	get(t, ordersHandler(&fakeOrders{stats: stock.LedgerStats{Sale: "s-42"}}, d), "/ledger")
	if d.gotSale != "s-42" {
		t.Fatalf("got Durable(sale %q), want s-42", d.gotSale)
	}
}

func TestOrdersPaging(t *testing.T) {
	good := []struct {
		query         string
		user          string
		offset, limit int
	}{
		{"user=alice", "alice", 0, 50},
		{"user=alice&offset=5&limit=500", "alice", 5, 500},
		{"user=a%2Fb&limit=1", "a/b", 0, 1},
		{"user=" + strings.Repeat("u", stock.MaxUserLen), strings.Repeat("u", stock.MaxUserLen), 0, 50},
	}
	for _, tc := range good {
		f := &fakeOrders{}
		if code, body := get(t, ordersHandler(f, nil), "/orders?"+tc.query); code != 200 {
			t.Fatalf("?%s: got %d %s, want 200", tc.query, code, body)
		}
		if f.gotUser != tc.user || f.gotOffset != tc.offset || f.gotLim != tc.limit {
			t.Fatalf("?%s: got user %q offset %d limit %d, want %q %d %d", tc.query,
				f.gotUser, f.gotOffset, f.gotLim, tc.user, tc.offset, tc.limit)
		}
	}
	bad := []struct{ query, errContains string }{
		{"", "user is required"},
		{"offset=1", "user is required"},
		{"user=", "user is empty"},
		{"user=a%20b", "printable ASCII"},
		{"user=%C3%A9", "printable ASCII"},
		{"user=" + strings.Repeat("u", stock.MaxUserLen+1), "longer than 64"},
		{"user=a&limit=0", "limit must be an integer from 1 to 500"},
		{"user=a&limit=501", "limit must be"},
		{"user=a&limit=", "limit must be"},
		{"user=a&limit=ten", "limit must be"},
		{"user=a&offset=-1", "offset must be an integer from 0"},
		{"user=a&offset=1.5", "offset must be"},
	}
	for _, tc := range bad {
		f := &fakeOrders{}
		code, body := get(t, ordersHandler(f, nil), "/orders?"+tc.query)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.errContains) {
			t.Fatalf("?%s: got %d %s, want 400 containing %q", tc.query, code, body, tc.errContains)
		}
		if f.gotLim != 0 {
			t.Fatalf("?%s: the store was asked (limit %d) for a refused request", tc.query, f.gotLim)
		}
	}
}

func TestInfoReportsLedger(t *testing.T) {
	h := handler.New(handler.Config{Replica: replica, Backend: "redis", Mode: "locked", Version: "v",
		Ledger: true, Durable: true, PerUserLimit: 1}, handler.Deps{Inventory: &cannedInventory{}})
	code, got := get(t, h, "/info")
	want := `{"backend":"redis","durable":true,"fencing":false,"ledger":true,"min_replica_acks":0,"mode":"locked","per_user_limit":1,"replica":"r-test","version":"v"}`
	if code != 200 || got != want {
		t.Fatalf("got %d %s, want 200 %s", code, got, want)
	}
}

// /info shows the replica wait in effect: the acks, their
// timeout only when they are on, and whether Sentinel is used.
func TestInfoReportsReplicaAcks(t *testing.T) {
	for _, tc := range []struct {
		cfg  handler.Config
		want string
	}{
		{handler.Config{MinReplicaAcks: 1, ReplicaAckTimeout: 500 * time.Millisecond, Sentinel: true},
			`{"backend":"redis","fencing":false,"min_replica_acks":1,"mode":"locked","replica":"r-test","replica_ack_timeout_ms":500,"sentinel":true,"version":"v"}`},
		{handler.Config{MinReplicaAcks: 0, ReplicaAckTimeout: 500 * time.Millisecond, Sentinel: true},
			`{"backend":"redis","fencing":false,"min_replica_acks":0,"mode":"locked","replica":"r-test","sentinel":true,"version":"v"}`},
		{handler.Config{MinReplicaAcks: 1, ReplicaAckTimeout: 500 * time.Millisecond, Cluster: true},
			`{"backend":"redis","fencing":false,"min_replica_acks":1,"mode":"locked","replica":"r-test","replica_ack_timeout_ms":500,"cluster":true,"version":"v"}`},
		{handler.Config{MinReplicaAcks: 2, ReplicaAckTimeout: 1500 * time.Millisecond},
			`{"backend":"redis","fencing":false,"min_replica_acks":2,"mode":"locked","replica":"r-test","replica_ack_timeout_ms":1500,"version":"v"}`},
	} {
		cfg := tc.cfg
		cfg.Replica, cfg.Backend, cfg.Mode, cfg.Version = replica, "redis", "locked", "v"
		code, got := get(t, handler.New(cfg, handler.Deps{Inventory: &cannedInventory{}}), "/info")
		if code != 200 || got != tc.want {
			t.Errorf("got %d %s, want 200 %s", code, got, tc.want)
		}
	}
}

func TestParseBuyer(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	cases := []struct {
		name        string
		headers     []string // name, value pairs (Add, so a name may repeat)
		want        stock.Buyer
		errContains string
	}{
		{"none", nil, stock.Buyer{}, ""},
		{"user", []string{"X-User", "alice"}, stock.Buyer{User: "alice"}, ""},
		{"key", []string{"Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324"}, stock.Buyer{Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"}, ""},
		{"both, longest", []string{"X-User", long(stock.MaxUserLen), "Idempotency-Key", long(stock.MaxKeyLen)},
			stock.Buyer{User: long(stock.MaxUserLen), Key: long(stock.MaxKeyLen)}, ""},
		{"punctuation", []string{"X-User", "a!~{}:/"}, stock.Buyer{User: "a!~{}:/"}, ""},
		{"empty user", []string{"X-User", ""}, stock.Buyer{}, "X-User is empty"},
		{"empty key", []string{"Idempotency-Key", ""}, stock.Buyer{}, "Idempotency-Key is empty"},
		{"user too long", []string{"X-User", long(stock.MaxUserLen + 1)}, stock.Buyer{}, "X-User longer than 64"},
		{"key too long", []string{"Idempotency-Key", long(stock.MaxKeyLen + 1)}, stock.Buyer{}, "Idempotency-Key longer than 255"},
		{"space", []string{"X-User", "a b"}, stock.Buyer{}, "X-User must be printable ASCII"},
		{"tab", []string{"Idempotency-Key", "a\tb"}, stock.Buyer{}, "Idempotency-Key must be printable ASCII"},
		{"non-ASCII", []string{"X-User", "jos\u00e9"}, stock.Buyer{}, "printable ASCII"},
		{"DEL", []string{"X-User", "a\x7f"}, stock.Buyer{}, "printable ASCII"},
		{"repeated", []string{"X-User", "a", "X-User", "b"}, stock.Buyer{}, "X-User given more than once"},
		{"bad key, good user", []string{"X-User", "a", "Idempotency-Key", "k k"}, stock.Buyer{}, "Idempotency-Key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tc.headers); i += 2 {
				h.Add(tc.headers[i], tc.headers[i+1])
			}
			got, msg := handler.ParseBuyer(h)
			if got != tc.want || (tc.errContains == "") != (msg == "") || !strings.Contains(msg, tc.errContains) {
				t.Fatalf("got %+v %q, want %+v and a problem containing %q", got, msg, tc.want, tc.errContains)
			}
		})
	}
}

// buyerSeller records the buyer each sale was made for.
type buyerSeller struct {
	sale  stock.Sale
	err   error
	calls []stock.Buyer
}

func (s *buyerSeller) ReduceFor(_ context.Context, b stock.Buyer) (stock.Sale, error) {
	s.calls = append(s.calls, b)
	return s.sale, s.err
}

func postSale(t *testing.T, h http.Handler, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/stock/reduce", nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// The sale passes X-User and Idempotency-Key to the seller and answers the
// order; a replay answers the original order, says so in the body and the
// header, and is counted as sold.
func TestReduceForBuyer(t *testing.T) {
	cases := []struct {
		name      string
		headers   []string
		sale      stock.Sale
		wantBuyer stock.Buyer
		want      string
		replayed  string
	}{
		{"anonymous", nil, stock.Sale{StockAfter: 3, Token: 7, Attempt: "a1", OrderID: "a1"}, stock.Buyer{},
			`{"attempt":"a1","replica":"r-test","order":"a1","result":"sold","stock":3,"token":7}`, ""},
		{"ledger off", nil, stock.Sale{StockAfter: 3, Token: 7, Attempt: "a1"}, stock.Buyer{},
			`{"attempt":"a1","replica":"r-test","result":"sold","stock":3,"token":7}`, ""},
		{"buyer and key", []string{"X-User", "alice", "Idempotency-Key", "k-1"},
			stock.Sale{StockAfter: 2, Token: 8, Attempt: "a2", OrderID: "a2"}, stock.Buyer{User: "alice", Key: "k-1"},
			`{"attempt":"a2","replica":"r-test","order":"a2","result":"sold","stock":2,"token":8}`, ""},
		{"replayed", []string{"X-User", "alice", "Idempotency-Key", "k-1"},
			stock.Sale{StockAfter: 2, Token: 8, Attempt: "a3", OrderID: "a2", Replayed: true}, stock.Buyer{User: "alice", Key: "k-1"},
			`{"attempt":"a3","replica":"r-test","order":"a2","replayed":true,"result":"sold","stock":2,"token":8}`, "true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &buyerSeller{sale: tc.sale}
			h := handler.New(handler.Config{Replica: replica, Buyers: gateway}, handler.Deps{Seller: s, Inventory: &cannedInventory{}})
			rec := postSale(t, h, tc.headers...)
			if rec.Code != 200 || rec.Body.String() != tc.want {
				t.Fatalf("got %d %s, want 200 %s", rec.Code, rec.Body.String(), tc.want)
			}
			if got := rec.Header().Get("Idempotent-Replayed"); got != tc.replayed {
				t.Fatalf("got Idempotent-Replayed %q, want %q", got, tc.replayed)
			}
			if len(s.calls) != 1 || s.calls[0] != tc.wantBuyer {
				t.Fatalf("got sales for %+v, want one for %+v", s.calls, tc.wantBuyer)
			}
		})
	}
}

// A bad X-User or Idempotency-Key is a 400 problem and no sale; a buyer the
// service cannot honour (ledger off) likewise.
func TestReduceRefusesBadBuyer(t *testing.T) {
	cases := []struct {
		name        string
		headers     []string
		sellerErr   error
		wantCalls   int
		errContains string
	}{
		{"empty user", []string{"X-User", ""}, nil, 0, "X-User is empty"},
		{"space in key", []string{"Idempotency-Key", "a b"}, nil, 0, "Idempotency-Key must be printable ASCII"},
		{"long user", []string{"X-User", strings.Repeat("u", 65)}, nil, 0, "X-User longer than 64"},
		{"two users", []string{"X-User", "a", "X-User", "b"}, nil, 0, "more than once"},
		{"ledger off", []string{"X-User", "a"}, fmt.Errorf("%w: cannot sell", stock.ErrNoLedger), 1, "stock.ledger: false"},
		{"refused by the service", []string{"X-User", "a"}, fmt.Errorf("%w: user must be printable ASCII", stock.ErrBadBuyer), 1, "bad X-User or Idempotency-Key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &buyerSeller{err: tc.sellerErr}
			h := handler.New(handler.Config{Replica: replica, Buyers: gateway}, handler.Deps{Seller: s, Inventory: &cannedInventory{}})
			rec := postSale(t, h, tc.headers...)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tc.errContains) ||
				!strings.Contains(rec.Body.String(), `"replica":"r-test"`) {
				t.Fatalf("got %d %s, want 400 naming %q", rec.Code, rec.Body.String(), tc.errContains)
			}
			if len(s.calls) != tc.wantCalls {
				t.Fatalf("got %d sales, want %d", len(s.calls), tc.wantCalls)
			}
		})
	}
}

// stalledDurable's count answers only when its context ends, as a
// black-holed MySQL does; its lag (read from Redis) answers at once, if
// its context is still alive.
type stalledDurable struct{ lag int64 }

func (stalledDurable) Durable(ctx context.Context, _ string) (int64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func (s stalledDurable) Lag(ctx context.Context) (int64, error) { return s.lag, ctx.Err() }

func (stalledDurable) Orders(ctx context.Context, _ string, _ []string) ([]stock.Order, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// Orders trimmed from the ledger in Redis once stored are read from the
// durable copy, by id and in a buyer's list, for the current sale only;
// one that MySQL cannot give in time is a 503, not a 404; without a
// durable copy the list leaves them out.
func TestTrimmedOrdersFromDurable(t *testing.T) {
	trimmed := stock.Order{ID: "p-1", Sale: "s1"} // as OrdersByUser lists it
	ledger := func() *fakeOrders {
		return &fakeOrders{byUser: []stock.Order{trimmed}, total: 1, stats: stock.LedgerStats{Sale: "s1", Orders: 1, Lucky: 1}}
	}
	stored := func() *fakeDurable { return &fakeDurable{orders: []stock.Order{order1}} }
	const down = `{"error":"the durable orders (MySQL) are unavailable: try again","replica":"r-test"}`
	for _, tc := range []struct {
		name    string
		durable handler.DurableOrders
		stats   stock.LedgerStats
		path    string
		code    int
		want    string
	}{
		{"order", stored(), stock.LedgerStats{}, "/orders/p-1", 200, order1JSON},
		{"order of an earlier sale", stored(), stock.LedgerStats{Sale: "s2"}, "/orders/p-1", 404, `{"error":"no such order: p-1","replica":"r-test"}`},
		{"no such order", stored(), stock.LedgerStats{}, "/orders/p-9", 404, `{"error":"no such order: p-9","replica":"r-test"}`},
		{"order, mysql down", &fakeDurable{ordersErr: errors.New("dial tcp: refused")}, stock.LedgerStats{}, "/orders/p-1", 503, down},
		{"order, mysql stalled", stalledDurable{}, stock.LedgerStats{}, "/orders/p-1", 503, down},
		{"order, no durable copy", nil, stock.LedgerStats{}, "/orders/p-1", 404, `{"error":"no such order: p-1","replica":"r-test"}`},
		{"user's orders", stored(), stock.LedgerStats{}, "/orders?user=alice", 200,
			`{"replica":"r-test","orders":[` + order1JSON + `],"total":1,"user":"alice"}`},
		{"user's orders, mysql down", &fakeDurable{ordersErr: errors.New("dial tcp: refused")}, stock.LedgerStats{}, "/orders?user=alice", 503, down},
		{"user's orders, no durable copy", nil, stock.LedgerStats{}, "/orders?user=alice", 200,
			`{"replica":"r-test","orders":[],"total":1,"user":"alice"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := ledger()
			if tc.stats.Sale != "" {
				l.stats = tc.stats
			}
			h := handler.New(handler.Config{Replica: replica, ProbeTimeout: 50 * time.Millisecond, AdminToken: token},
				handler.Deps{Inventory: &cannedInventory{}, Orders: l, Durable: tc.durable})
			if code, got := get(t, h, tc.path); code != tc.code || got != tc.want {
				t.Fatalf("GET %s: got %d %s, want %d %s", tc.path, code, got, tc.code, tc.want)
			}
		})
	}
}

// A stalled MySQL does not hold GET /ledger: the durable count is bounded
// by the probe timeout and left out, and the lag still answered.
func TestLedgerDurableReadIsBounded(t *testing.T) {
	h := handler.New(handler.Config{Replica: replica, ProbeTimeout: 50 * time.Millisecond, AdminToken: token}, handler.Deps{
		Inventory: &cannedInventory{}, Durable: stalledDurable{lag: 2},
		Orders: &fakeOrders{stats: stock.LedgerStats{Sale: "s1", Orders: 2, Lucky: 2}},
	})
	code, got := get(t, h, "/ledger") // t.Context() has no deadline: only the bound ends the count
	if want := `{"buyers":0,"replica":"r-test","lag":2,"lucky":2,"orders":2,"sale":"s1"}`; code != 200 || got != want {
		t.Fatalf("got %d %s, want 200 %s", code, got, want)
	}
}
