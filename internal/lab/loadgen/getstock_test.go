package loadgen

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// GET /stock's store_lost is told apart from any other 503: the sale is
// gone (a wiped Redis, or no reset yet), not the service down.
func TestGetStockTellsALostSale(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		lost       bool
	}{
		{"store_lost", `{"error":"the sale is not in the stock Redis (lost, or never reset): nothing sold until an operator resets it","replica":"r1","result":"store_lost"}`, true},
		{"unavailable", `{"error":"stock service unavailable","replica":"r1"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			_, err := GetStock(t.Context(), srv.Client(), srv.URL)
			if err == nil || errors.Is(err, ErrStoreLost) != tc.lost {
				t.Fatalf("got %v; want an error, ErrStoreLost %v", err, tc.lost)
			}
		})
	}
}

// A read answered 502 (nginx's own: no replica reached) is sent again,
// getSends in all; a 503 (a replica's answer) and a 200 are not.
func TestGetSendsAgainOnBadGateway(t *testing.T) {
	defer func(p time.Duration) { getPause = p }(getPause)
	getPause = time.Millisecond
	for _, tc := range []struct {
		name     string
		statuses []int // answered in turn; the last one from then on
		sends    int32
		ok       bool
	}{
		{"502 once", []int{http.StatusBadGateway, http.StatusOK}, 2, true},
		{"502 every time", []int{http.StatusBadGateway}, int32(getSends), false},
		{"503", []int{http.StatusServiceUnavailable, http.StatusOK}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sends atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(sends.Add(1))
				w.WriteHeader(tc.statuses[min(n, len(tc.statuses))-1])
				_, _ = w.Write([]byte(`{"replica":"r1","orders":[],"total":0}`))
			}))
			defer srv.Close()
			_, err := GetOrders(t.Context(), srv.Client(), srv.URL, "t", "u1")
			if (err == nil) != tc.ok || sends.Load() != tc.sends {
				t.Fatalf("got %v after %d sends; want ok %v after %d", err, sends.Load(), tc.ok, tc.sends)
			}
		})
	}
}
