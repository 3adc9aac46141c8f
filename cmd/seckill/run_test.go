package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"seckill/internal/api"
)

// lostLedger sells every request under its own order id but its ledger
// never records one: the answers and the ledger disagree.
func lostLedger() http.Handler {
	var mu sync.Mutex
	var stock, lucky int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var v any
		switch r.URL.Path {
		case "/stock/reset":
			var body api.Reset
			_ = json.NewDecoder(r.Body).Decode(&body)
			stock, lucky = body.Stock, 0
			v = api.Stock{Stock: stock}
		case "/info":
			v = api.Info{Backend: "fake", Ledger: true}
		case "/stock":
			v = api.Stock{Stock: stock, Lucky: lucky}
		case "/stock/reduce":
			if stock == 0 {
				w.WriteHeader(http.StatusConflict)
				v = api.Sale{Result: api.SoldOut}
				break
			}
			stock--
			lucky++
			v = api.Sale{Result: api.Sold, Order: fmt.Sprintf("o-%d", lucky), Stock: &stock}
		case "/ledger":
			v = api.Ledger{Lucky: lucky}
		case "/orders":
			v = api.Orders{User: r.URL.Query().Get("user"), Orders: []api.Order{}}
		}
		_ = json.NewEncoder(w).Encode(v)
	})
}

// With --users, a failed buyers' check is exit status 3 and the table
// names it; the flags that only make sense with buyers are refused
// without them.
func TestRunBuyersExitStatus(t *testing.T) {
	srv := httptest.NewServer(lostLedger())
	t.Cleanup(srv.Close)
	var out, errOut strings.Builder
	code := run(t.Context(), []string{"run", "--url", srv.URL, "--requests", "20", "--stock", "10", "--users", "20", "--retry-rate", "0.3"}, &out, &errOut)
	if code != exitInconsistent || !strings.Contains(out.String(), "orders == lucky == ledger") || !strings.Contains(out.String(), "verdict: BUYERS: ") {
		t.Fatalf("got exit %d, want %d with the failed check named:\n%s%s", code, exitInconsistent, out.String(), errOut.String())
	}
	if code := run(t.Context(), []string{"run", "--url", srv.URL, "--retry-rate", "0.3"}, io.Discard, io.Discard); code != exitFailure {
		t.Fatalf("--retry-rate without --users: got exit %d, want %d", code, exitFailure)
	}
}
