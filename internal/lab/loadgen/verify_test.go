package loadgen

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"seckill/internal/api"
)

// staticLedger answers GET /ledger and GET /orders?user= from fixed orders.
func staticLedger(orders []api.Order) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v any
		switch r.URL.Path {
		case "/ledger":
			buyers := map[string]bool{}
			for _, o := range orders {
				buyers[o.User] = true
			}
			v = api.Ledger{Orders: int64(len(orders)), Lucky: int64(len(orders)), Buyers: int64(len(buyers))}
		case "/orders":
			page := api.Orders{User: r.URL.Query().Get("user"), Orders: []api.Order{}}
			for _, o := range orders {
				if o.User == page.User {
					page.Orders = append(page.Orders, o)
				}
			}
			page.Total = int64(len(page.Orders))
			v = page
		}
		_ = json.NewEncoder(w).Encode(v)
	})
}

// Two orders under one key are one duplicate, whether the answers saw one
// of them or both.
func TestVerifyCountsADuplicateOnce(t *testing.T) {
	ledger := []api.Order{{ID: "o1", User: "u1", Key: "k1"}, {ID: "o2", User: "u1", Key: "k1"}}
	srv := httptest.NewServer(staticLedger(ledger))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name    string
		answers []Response
	}{
		{"one answered", []Response{{Outcome: OutcomeSold, User: "u1", Key: "k1", Order: "o1"}}},
		{"both answered", []Response{
			{Outcome: OutcomeSold, User: "u1", Key: "k1", Order: "o1"},
			{Outcome: OutcomeSold, User: "u1", Key: "k1", Order: "o2", Resend: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Verify(t.Context(), srv.Client(), srv.URL, VerifyConfig{}, tc.answers)
			if err != nil {
				t.Fatal(err)
			}
			if b.Duplicates != 1 || b.OK() || b.Failed() == "" {
				t.Fatalf("got %d duplicates, failed %q; want 1 and a failed check: %+v", b.Duplicates, b.Failed(), b.Checks)
			}
		})
	}
}

// A buyer's orders are read across pages; a server whose pages do not add
// up to its total is a bad response, not a pass.
func TestGetOrdersPages(t *testing.T) {
	all := make([]api.Order, 1203)
	for i := range all {
		all[i] = api.Order{ID: strconv.Itoa(i), User: "u1"}
	}
	var short atomic.Bool // pages stop before the total
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		lim, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		page := all[min(off, len(all)):min(off+lim, len(all))]
		if short.Load() && off > 0 {
			page = nil
		}
		_ = json.NewEncoder(w).Encode(api.Orders{User: "u1", Orders: page, Total: int64(len(all))})
	}))
	t.Cleanup(srv.Close)
	got, err := GetOrders(t.Context(), srv.Client(), srv.URL, "", "u1")
	if err != nil || len(got) != len(all) || got[1202].ID != "1202" {
		t.Fatalf("got %d orders (%v), want %d in order", len(got), err, len(all))
	}
	short.Store(true)
	if _, err := GetOrders(t.Context(), srv.Client(), srv.URL, "", "u1"); !errors.Is(err, ErrBadResponse) {
		t.Fatalf("pages short of the total: got %v, want ErrBadResponse", err)
	}
}
