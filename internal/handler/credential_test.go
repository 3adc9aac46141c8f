package handler_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"seckill/internal/auth"
	"seckill/internal/handler"
	"seckill/internal/stock"
)

// An Authorization header is "Bearer <token>" or a 401 saying so, with a
// Bearer challenge, in every mode: a credential the server cannot read
// is refused, never ignored (ignored, a buyer who meant to buy as bob
// would buy anonymously). A well-formed token still sells.
func TestMalformedAuthorizationRefused(t *testing.T) {
	good := auth.NewMinter(jwtSecret, "shop", "seckill", time.Minute)
	modes := map[string]*auth.Identity{
		"none":         {Mode: auth.ModeNone},
		"jwt":          jwtBuyers(t, false),
		"jwt required": jwtBuyers(t, true),
		"proxy":        {Mode: auth.ModeProxy},
	}
	malformed := map[string][]string{
		"a tab after Bearer": {"Bearer\t" + good.Token("bob")},
		"the Token scheme":   {"Token " + good.Token("bob")},
		"Basic":              {"Basic eHl6"},
		"Bearer, no token":   {"Bearer "},
		"the scheme alone":   {"Bearer"},
		"two spaces":         {"Bearer  " + good.Token("bob")},
		"a space in a token": {"Bearer a b"},
		"twice":              {"Bearer " + good.Token("bob"), "Bearer " + good.Token("eve")},
	}
	for mode, id := range modes {
		for name, values := range malformed {
			t.Run(mode+"/"+name, func(t *testing.T) {
				s := &buyerSeller{sale: stock.Sale{StockAfter: 3, Token: 7, Attempt: "a1", OrderID: "a1"}}
				h := handler.New(handler.Config{Replica: replica, Buyers: id}, handler.Deps{Seller: s, Inventory: &cannedInventory{}})
				var headers []string
				for _, v := range values {
					headers = append(headers, "Authorization", v)
				}
				rec := postSale(t, h, headers...)
				wantMalformed(t, rec)
				if len(s.calls) != 0 {
					t.Fatalf("refused, but the seller was called: %+v", s.calls)
				}
			})
		}
	}
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		t.Run("jwt/"+scheme+" sells", func(t *testing.T) {
			s := &buyerSeller{sale: stock.Sale{StockAfter: 3, Token: 7, Attempt: "a1", OrderID: "a1"}}
			h := handler.New(handler.Config{Replica: replica, Buyers: jwtBuyers(t, true)}, handler.Deps{Seller: s, Inventory: &cannedInventory{}})
			rec := postSale(t, h, "Authorization", scheme+" "+good.Token("bob"))
			if rec.Code != http.StatusOK || len(s.calls) != 1 || s.calls[0].User != "bob" {
				t.Fatalf("got %d %s, calls %+v; want 200 sold to bob", rec.Code, rec.Body, s.calls)
			}
		})
	}
}

// The admin reads the Authorization header with the buyers' parser: any
// case of the scheme, and a malformed header refused with the challenge.
func TestAdminAuthorizationHeader(t *testing.T) {
	e := newAdminEnv(t)
	for _, tc := range []struct {
		name, authorization string
		code                int
	}{
		{"Bearer", "Bearer " + token, http.StatusOK},
		{"bearer", "bearer " + token, http.StatusOK},
		{"a tab after Bearer", "Bearer\t" + token, http.StatusUnauthorized},
		{"Basic", "Basic eHl6", http.StatusUnauthorized},
		{"the scheme alone", "Bearer", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := e.reset("192.0.2.9", "", "Authorization", tc.authorization)
			if tc.code == http.StatusOK {
				if rec.Code != http.StatusOK {
					t.Fatalf("got %d %s, want 200", rec.Code, rec.Body)
				}
				return
			}
			wantMalformed(t, rec)
		})
	}
	// The right X-Admin-Token beside a malformed header: the header is
	// still refused, not skipped.
	if rec := e.reset("192.0.2.9", token, "Authorization", "Basic eHl6"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("X-Admin-Token beside Basic: got %d %s, want 401", rec.Code, rec.Body)
	}
}

// wantMalformed checks rec is the 401 of a malformed Authorization header.
func wantMalformed(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	const challenge = `Bearer realm="seckill", error="invalid_request"`
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), `"error":"not authenticated: malformed Authorization header`) {
		t.Fatalf("got %d %s, want 401 saying the Authorization header is malformed", rec.Code, rec.Body)
	}
	if got := rec.Header().Get("WWW-Authenticate"); got != challenge {
		t.Fatalf("got WWW-Authenticate %q, want %q", got, challenge)
	}
}

// The right admin token passes from an address that sent any number of
// wrong ones (the admin's address behind a NAT, or spoofed by no one:
// failing from it is free), while the wrong ones beyond the bound go on
// being refused 429.
func TestAdminRightTokenAlwaysPasses(t *testing.T) {
	clock := time.Unix(1000, 0)
	defer handler.SetNow(func() time.Time { return clock })()
	e := newAdminEnv(t)
	const peer = "192.0.2.1"
	for i := range handler.AdminBurst + 4 {
		want := http.StatusUnauthorized
		if i >= handler.AdminBurst {
			want = http.StatusTooManyRequests
		}
		if rec := e.reset(peer, "guess"); rec.Code != want {
			t.Fatalf("wrong token %d: got %d %s, want %d", i+1, rec.Code, rec.Body, want)
		}
	}
	if rec := e.reset(peer, token); rec.Code != http.StatusOK {
		t.Fatalf("the right token after %d wrong ones: got %d %s, want 200", handler.AdminBurst+4, rec.Code, rec.Body)
	}
	if e.inv.resets != 1 {
		t.Fatalf("got %d resets, want 1", e.inv.resets)
	}
}

// A refused buyer token is the buyer's 401 and no failed admin attempt:
// a buyer with an expired token (or one sending its token to an admin
// route) spends nothing of the admin bound.
func TestBuyerRefusalsLeaveTheAdminBound(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	defer handler.SetNow(func() time.Time { return clock })()
	expired := auth.NewMinter(jwtSecret, "shop", "seckill", -time.Minute).Token("bob")
	valid := auth.NewMinter(jwtSecret, "shop", "seckill", time.Minute).Token("bob")
	orders := &fakeOrders{orders: map[string]stock.Order{"p-1": order1}}
	h := handler.New(handler.Config{Replica: replica, AdminToken: token, Buyers: jwtBuyers(t, false)},
		handler.Deps{Inventory: &cannedInventory{}, Orders: orders})
	get := func(path string, headers ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i := range handler.AdminBurst + 1 {
		rec := get("/orders/p-1", "Authorization", "Bearer "+expired)
		if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "token expired") {
			t.Fatalf("expired buyer token %d: got %d %s, want 401 token expired", i+1, rec.Code, rec.Body)
		}
		if rec := get("/ledger", "Authorization", "Bearer "+valid); rec.Code != http.StatusUnauthorized {
			t.Fatalf("a buyer's token on /ledger %d: got %d %s, want 401", i+1, rec.Code, rec.Body)
		}
	}
	if rec := get("/orders/p-1", "X-Admin-Token", "guess"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a first wrong admin token after %d buyer refusals: got %d %s, want 401 (the bound untouched)", 2*(handler.AdminBurst+1), rec.Code, rec.Body)
	}
	if rec := get("/orders/p-1", "X-Admin-Token", token); rec.Code != http.StatusOK {
		t.Fatalf("the right admin token: got %d %s, want 200", rec.Code, rec.Body)
	}
}
