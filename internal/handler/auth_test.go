package handler_test

import (
	"context"
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

var jwtSecret = []byte("0123456789abcdef0123456789abcdef")

func jwtBuyers(t *testing.T, required bool) *auth.Identity {
	t.Helper()
	v, err := auth.NewVerifier(auth.JWT{Secret: jwtSecret, Issuer: "shop", Audience: "seckill"})
	if err != nil {
		t.Fatal(err)
	}
	return &auth.Identity{Mode: auth.ModeJWT, Verifier: v, Required: required}
}

// A sale's buyer is the token's sub; a refused credential is a 401 that
// says why and sells nothing, and with auth.required so is no credential.
func TestReduceAuthenticates(t *testing.T) {
	good := auth.NewMinter(jwtSecret, "shop", "seckill", time.Minute)
	forged := auth.NewMinter([]byte(strings.Repeat("f", 32)), "shop", "seckill", time.Minute)
	otherAud := auth.NewMinter(jwtSecret, "shop", "elsewhere", time.Minute)
	for _, tc := range []struct {
		name     string
		required bool
		headers  []string
		code     int
		buyer    string // the buyer sold to
		reason   string
	}{
		{"token", false, []string{"Authorization", "Bearer " + good.Token("bob"), "Idempotency-Key", "k1"}, 200, "bob", ""},
		{"anonymous", false, nil, 200, "", ""},
		{"anonymous, required", true, nil, 401, "", "requires an authenticated buyer"},
		{"forged", false, []string{"Authorization", "Bearer " + forged.Token("bob")}, 401, "", "bad signature"},
		{"wrong audience", false, []string{"Authorization", "Bearer " + otherAud.Token("bob")}, 401, "", "wrong audience"},
		{"X-User", false, []string{"X-User", "bob"}, 401, "", "X-User is not accepted"},
		{"a sub that cannot name a buyer", false, []string{"Authorization", "Bearer " + good.Token("b o b")}, 401, "", "sub"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &buyerSeller{sale: stock.Sale{StockAfter: 3, Token: 7, Attempt: "a1", OrderID: "a1"}}
			h := handler.New(handler.Config{Replica: replica, Buyers: jwtBuyers(t, tc.required)},
				handler.Deps{Seller: s, Inventory: &cannedInventory{}})
			rec := postSale(t, h, tc.headers...)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.reason) {
				t.Fatalf("got %d %s, want %d saying %q", rec.Code, rec.Body, tc.code, tc.reason)
			}
			if tc.code != 200 {
				if len(s.calls) != 0 {
					t.Fatalf("refused, but the seller was called: %+v", s.calls)
				}
				if rec.Header().Get("WWW-Authenticate") == "" {
					t.Fatal("a 401 without WWW-Authenticate")
				}
				return
			}
			if len(s.calls) != 1 || s.calls[0].User != tc.buyer {
				t.Fatalf("got calls %+v, want one for %q", s.calls, tc.buyer)
			}
		})
	}
}

// Orders are private: a buyer reads its own, another's is a 404 like no
// order at all, an anonymous order is read by whoever holds its id, and
// the ledger and other buyers' lists take the admin token. The same holds
// of orders read from the durable copy once trimmed from Redis.
func TestOrdersArePrivate(t *testing.T) {
	for _, trimmed := range []bool{false, true} {
		t.Run(fmt.Sprintf("trimmed=%v", trimmed), func(t *testing.T) { testOrdersArePrivate(t, trimmed) })
	}
}

func testOrdersArePrivate(t *testing.T, trimmed bool) {
	mint := auth.NewMinter(jwtSecret, "shop", "seckill", time.Minute)
	anon := stock.Order{ID: "p-9", Sale: "s1", Replica: "r2", StockAfter: 3, Time: order1.Time}
	orders := &fakeOrders{orders: map[string]stock.Order{"p-1": order1, "p-9": anon},
		byUser: []stock.Order{order1}, total: 1, stats: stock.LedgerStats{Sale: "s1", Orders: 2, Lucky: 2}}
	deps := handler.Deps{Inventory: &cannedInventory{}, Orders: orders}
	if trimmed {
		orders.orders, orders.byUser = nil, []stock.Order{{ID: "p-1", Sale: "s1"}}
		deps.Durable = &fakeDurable{orders: []stock.Order{order1, anon}}
	}
	h := handler.New(handler.Config{Replica: replica, AdminToken: token, Buyers: jwtBuyers(t, false)}, deps)
	as := func(user string) []string {
		switch user {
		case "":
			return nil
		case "admin":
			return []string{"X-Admin-Token", token}
		}
		return []string{"Authorization", "Bearer " + mint.Token(user)}
	}
	for _, tc := range []struct {
		who, path string
		code      int
		has       string
	}{
		{"alice", "/orders/p-1", 200, `"user":"alice"`},
		{"bob", "/orders/p-1", 404, "no such order"},
		{"", "/orders/p-1", 404, "no such order"},
		{"admin", "/orders/p-1", 200, `"user":"alice"`},
		{"bob", "/orders/p-9", 200, `"id":"p-9"`},
		{"", "/orders/p-9", 200, `"id":"p-9"`},
		{"alice", "/orders", 200, `"user":"alice"`},
		{"alice", "/orders?user=alice", 200, `"user":"alice"`},
		{"bob", "/orders?user=alice", 403, "admin token"},
		{"", "/orders", 401, "no buyer"},
		{"", "/orders?user=alice", 401, "admin token"},
		{"admin", "/orders?user=alice", 200, `"user":"alice"`},
		{"alice", "/ledger", 401, "admin token"},
		{"admin", "/ledger", 200, `"orders":2`},
	} {
		t.Run(tc.who+" "+tc.path, func(t *testing.T) {
			req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, tc.path, nil)
			hdr := as(tc.who)
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.has) {
				t.Fatalf("got %d %s, want %d with %q", rec.Code, rec.Body, tc.code, tc.has)
			}
			if tc.code == 200 && orders.gotUser != "" && strings.HasPrefix(tc.path, "/orders?") && orders.gotUser != "alice" {
				t.Fatalf("listed %q's orders", orders.gotUser)
			}
		})
	}
}

// Reading orders is no way around the admin bound: another buyer's
// order answers 404 to a wrong admin token and 200 to the right one, so
// each wrong token (in X-Admin-Token, or a bearer token that is no JWT)
// spends the bound, and beyond it wrong tokens are answered 429. The
// right token still reads: guessers are slowed, not the admin's own work.
func TestOrderReadsKeepTheAdminBound(t *testing.T) {
	at := time.Unix(1_700_000_000, 0) // a frozen clock: the bound cannot refill mid-test
	defer handler.SetNow(func() time.Time { return at })()
	orders := &fakeOrders{orders: map[string]stock.Order{"p-1": order1}}
	h := handler.New(handler.Config{Replica: replica, AdminToken: token, Buyers: jwtBuyers(t, false)},
		handler.Deps{Inventory: &cannedInventory{}, Orders: orders})
	read := func(header, value string) int {
		req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/orders/p-1", nil)
		req.Header.Set(header, value)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range handler.AdminBurst {
		header, value := "X-Admin-Token", fmt.Sprintf("guess-%d", i)
		if i%2 == 1 {
			header, value = "Authorization", "Bearer "+value
		}
		if code := read(header, value); code != http.StatusUnauthorized {
			t.Fatalf("wrong credential %s: %q: got %d, want 401", header, value, code)
		}
	}
	if code := read("Authorization", "Bearer guess-beyond"); code != http.StatusTooManyRequests {
		t.Fatalf("a wrong token beyond the bound: got %d, want 429", code)
	}
	if code := read("X-Admin-Token", token); code != http.StatusOK {
		t.Fatalf("the right token beyond the bound: got %d, want 200", code)
	}
}

// A 401 carries its challenge in every mode: a buyer header that the
// mode does not take (X-User without a gateway, a token in proxy mode),
// or no buyer where one is required.
func TestEvery401Challenges(t *testing.T) {
	proxies, err := auth.ParseProxies([]string{"198.51.100.0/24"}) // not httptest's peer
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		id      *auth.Identity
		headers []string
	}{
		{"none, X-User", &auth.Identity{Mode: auth.ModeNone}, []string{"X-User", "bob"}},
		{"proxy, X-User from another peer", &auth.Identity{Mode: auth.ModeProxy, Proxies: proxies}, []string{"X-User", "bob"}},
		{"proxy, required, no buyer", &auth.Identity{Mode: auth.ModeProxy, Proxies: proxies, Required: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &buyerSeller{sale: stock.Sale{StockAfter: 3, Token: 7, Attempt: "a1", OrderID: "a1"}}
			h := handler.New(handler.Config{Replica: replica, Buyers: tc.id}, handler.Deps{Seller: s, Inventory: &cannedInventory{}})
			rec := postSale(t, h, tc.headers...)
			if rec.Code != 401 || len(s.calls) != 0 {
				t.Fatalf("got %d %s (seller calls %+v), want 401 and nothing sold", rec.Code, rec.Body, s.calls)
			}
			if got := rec.Header().Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer ") {
				t.Fatalf("a 401 with WWW-Authenticate %q, want a Bearer challenge", got)
			}
		})
	}
}
