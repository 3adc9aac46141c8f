package handler_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"seckill/internal/auth"
	"seckill/internal/handler"
	"seckill/internal/metrics"
	"seckill/internal/stock"
)

// boundEnv is a replica behind a trusted proxy (the loopback every test
// connection comes from), served over real HTTP, on a clock the test moves.
type boundEnv struct {
	srv   *httptest.Server
	m     *metrics.Metrics
	log   *syncBuffer
	clock time.Time
}

func newBoundEnv(t *testing.T, buyers *auth.Identity) *boundEnv {
	t.Helper()
	e := &boundEnv{m: metrics.New(prometheus.Labels{"replica": replica}), log: &syncBuffer{}, clock: time.Unix(1_700_000_000, 0)}
	t.Cleanup(handler.SetNow(func() time.Time { return e.clock }))
	orders := &fakeOrders{orders: map[string]stock.Order{"p-1": order1}, byUser: []stock.Order{order1}, total: 1}
	h := handler.New(handler.Config{Replica: replica, AdminToken: token, TrustedProxies: []string{"127.0.0.1", "::1"}, Buyers: buyers},
		handler.Deps{Seller: sellerFunc(func(context.Context) (stock.Sale, error) {
			return stock.Sale{StockAfter: 3, Token: 7, Attempt: "a1", OrderID: "a1"}, nil
		}), Inventory: &fakeInventory{}, Orders: orders, Metrics: e.m,
			Logger: slog.New(slog.NewTextHandler(e.log, nil))})
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// do sends method path from the client address xff (through the trusted
// proxy; "" for the proxy itself) with headers, and returns the answer
// with its body read.
func (e *boundEnv) do(t *testing.T, method, path, xff string, headers ...string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"stock":5}`)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// counter reads a counter of e's registry, 0 when it has no sample.
func (e *boundEnv) counter(t *testing.T, name string) float64 {
	t.Helper()
	families, err := e.m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// spend sends n wrong admin tokens, each from an address of its own
// (10.0.<i>.<j>, through the trusted proxy), and returns their statuses.
func (e *boundEnv) spend(t *testing.T, n int) []int {
	t.Helper()
	codes := make([]int, n)
	for i := range n {
		resp, _ := e.do(t, http.MethodPost, "/stock/reset", "10.0."+strconv.Itoa(i/250)+"."+strconv.Itoa(1+i%250), "X-Admin-Token", "guess-"+strconv.Itoa(i))
		codes[i] = resp.StatusCode
	}
	return codes
}

// The bound is global: wrong tokens each from a forged address of its own
// (X-Forwarded-For, believed from the trusted proxy) spend one budget, and
// beyond it are answered 429 with Retry-After, counted, and logged once.
// Time refills it at the bound's rate, and no faster.
func TestAdminBoundIsGlobal(t *testing.T) {
	e := newBoundEnv(t, nil)
	codes := e.spend(t, handler.AdminBurst+5)
	for i, code := range codes {
		want := http.StatusUnauthorized
		if i >= handler.AdminBurst {
			want = http.StatusTooManyRequests
		}
		if code != want {
			t.Fatalf("wrong token %d, from an address of its own: got %d, want %d (all: %v)", i+1, code, want, codes)
		}
	}
	resp, body := e.do(t, http.MethodPost, "/stock/reset", "192.0.2.200", "X-Admin-Token", "guess")
	perTry := time.Minute / handler.AdminPerMinute
	if want := strconv.Itoa(int(perTry / time.Second)); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != want {
		t.Fatalf("a wrong token beyond the bound: got %d Retry-After %q %s, want 429 with Retry-After %s",
			resp.StatusCode, resp.Header.Get("Retry-After"), body, want)
	}
	if got, want := e.counter(t, "seckill_admin_throttled_total"), 6.0; got != want {
		t.Fatalf("got seckill_admin_throttled_total %v, want %v", got, want)
	}
	if got, want := e.counter(t, "seckill_admin_auth_failures_total"), float64(handler.AdminBurst+6); got != want {
		t.Fatalf("got seckill_admin_auth_failures_total %v, want %v", got, want)
	}
	logs := e.log.String()
	if n := strings.Count(logs, "admin calls throttled"); n != 1 {
		t.Fatalf("got %d throttling warnings, want 1 (the first, then at most one a second):\n%s", n, logs)
	}
	if !strings.Contains(logs, "first=true") || !strings.Contains(logs, "bound_per_minute="+strconv.Itoa(handler.AdminPerMinute)) {
		t.Fatalf("the throttling warning does not say it is the first, with the bound:\n%s", logs)
	}

	// Just short of one try's refill: still refused.
	e.clock = e.clock.Add(perTry - time.Millisecond)
	if codes := e.spend(t, 1); codes[0] != http.StatusTooManyRequests {
		t.Fatalf("before a try was refilled: got %d, want 429", codes[0])
	}
	// One try refilled, one taken.
	e.clock = e.clock.Add(time.Millisecond)
	if codes := e.spend(t, 2); codes[0] != http.StatusUnauthorized || codes[1] != http.StatusTooManyRequests {
		t.Fatalf("one try refilled: got %v, want [401 429]", codes)
	}
	// A quiet minute refills the burst, not more.
	e.clock = e.clock.Add(time.Minute)
	codes = e.spend(t, handler.AdminBurst+1)
	if codes[handler.AdminBurst-1] != http.StatusUnauthorized || codes[handler.AdminBurst] != http.StatusTooManyRequests {
		t.Fatalf("after a quiet minute: got %v, want %d × 401 then 429", codes, handler.AdminBurst)
	}
	if logs := e.log.String(); strings.Count(logs, "first=true") != 2 {
		t.Fatalf("the bound hit again after a refill: want a second first=true warning:\n%s", logs)
	}
}

// No one can be framed: with the bound spent, the right token passes from
// any address (the attackers' forged ones included), on every admin route,
// and a malformed header still gets its 401 with the challenge.
func TestAdminBoundFramesNoOne(t *testing.T) {
	e := newBoundEnv(t, nil)
	e.spend(t, handler.AdminBurst+3)
	for _, tc := range []struct{ name, method, path, xff string }{
		{"the proxy itself", http.MethodPost, "/stock/reset", ""},
		{"an attacker's address", http.MethodPost, "/stock/reset", "10.0.0.1"},
		{"a fresh address", http.MethodPost, "/stock/reset", "198.51.100.9"},
		{"the ledger", http.MethodGet, "/ledger", "10.0.0.2"},
		{"another buyer's orders", http.MethodGet, "/orders?user=alice", "10.0.0.3"},
		{"an order", http.MethodGet, "/orders/p-1", "10.0.0.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if resp, body := e.do(t, tc.method, tc.path, tc.xff, "X-Admin-Token", token); resp.StatusCode != http.StatusOK {
				t.Fatalf("the right token with the bound spent: got %d %s, want 200", resp.StatusCode, body)
			}
			if resp, body := e.do(t, tc.method, tc.path, tc.xff, "Authorization", "Bearer "+token); resp.StatusCode != http.StatusOK {
				t.Fatalf("the right bearer token with the bound spent: got %d %s, want 200", resp.StatusCode, body)
			}
		})
	}
	if resp, body := e.do(t, http.MethodPost, "/stock/reset", "10.0.0.1", "X-Admin-Token", "guess"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the right token does not refill the bound: a wrong one after it got %d %s, want 429", resp.StatusCode, body)
	}
	if resp, body := e.do(t, http.MethodPost, "/stock/reset", "", "Authorization", "Basic eHl6"); resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), "invalid_request") {
		t.Fatalf("a malformed header with the bound spent: got %d %s, want 401 with the challenge", resp.StatusCode, body)
	}
}

// Buyers are never locked out by admin failures: with the bound spent a
// buyer reads its orders and buys; and a buyer's refused token (expired,
// or sent to an admin route) spends nothing of the bound.
func TestAdminBoundSparesBuyers(t *testing.T) {
	mint := auth.NewMinter(jwtSecret, "shop", "seckill", time.Minute)
	expired := auth.NewMinter(jwtSecret, "shop", "seckill", -time.Minute).Token("alice")
	alice := []string{"Authorization", "Bearer " + mint.Token("alice")}

	t.Run("bound spent", func(t *testing.T) {
		e := newBoundEnv(t, jwtBuyers(t, false))
		e.spend(t, handler.AdminBurst+3)
		for _, tc := range []struct {
			method, path string
			code         int
		}{
			{http.MethodGet, "/orders/p-1", http.StatusOK},
			{http.MethodGet, "/orders", http.StatusOK},
			{http.MethodPost, "/stock/reduce", http.StatusOK},
		} {
			if resp, body := e.do(t, tc.method, tc.path, "10.0.0.1", alice...); resp.StatusCode != tc.code {
				t.Fatalf("alice %s %s from an attacker's address: got %d %s, want %d", tc.method, tc.path, resp.StatusCode, body, tc.code)
			}
		}
		resp, body := e.do(t, http.MethodGet, "/orders/p-1", "10.0.0.1", "Authorization", "Bearer "+expired)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "token expired") {
			t.Fatalf("an expired buyer token with the bound spent: got %d %s, want the buyer's 401, not 429", resp.StatusCode, body)
		}
	})

	t.Run("buyer refusals are not counted", func(t *testing.T) {
		e := newBoundEnv(t, jwtBuyers(t, false))
		for i := range 3 * handler.AdminBurst {
			if resp, body := e.do(t, http.MethodGet, "/orders/p-1", "", "Authorization", "Bearer "+expired); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("expired buyer token %d: got %d %s, want 401", i+1, resp.StatusCode, body)
			}
			if resp, body := e.do(t, http.MethodGet, "/ledger", "", alice...); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a buyer's token on /ledger %d: got %d %s, want 401", i+1, resp.StatusCode, body)
			}
		}
		if got := e.counter(t, "seckill_admin_auth_failures_total"); got != 0 {
			t.Fatalf("buyer refusals counted as %v failed admin tries, want 0", got)
		}
		codes := e.spend(t, handler.AdminBurst+1)
		if codes[handler.AdminBurst-1] != http.StatusUnauthorized || codes[handler.AdminBurst] != http.StatusTooManyRequests {
			t.Fatalf("after %d buyer refusals the bound is whole: got %v, want %d × 401 then 429", 6*handler.AdminBurst, codes, handler.AdminBurst)
		}
	})
}
