package loadgen

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
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
