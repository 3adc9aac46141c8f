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
// never records one: the answers and the ledger disagree. A repeated
// Idempotency-Key replays its order, as stockd does: a buyer's first send
// cut by the client (a slow answer on a loaded machine) and sent again
// is one unit, so that the ledger is the only check that fails.
func lostLedger() http.Handler {
	var mu sync.Mutex
	var stock, lucky int64
	keys := map[string]api.Sale{}
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
			key := r.Header.Get("X-User") + "\x00" + r.Header.Get("Idempotency-Key")
			if sale, ok := keys[key]; ok && r.Header.Get("Idempotency-Key") != "" {
				sale.Replayed = true
				v = sale
				break
			}
			if stock == 0 {
				w.WriteHeader(http.StatusConflict)
				v = api.Sale{Result: api.SoldOut}
				break
			}
			stock--
			lucky++
			after := stock
			sale := api.Sale{Result: api.Sold, Order: fmt.Sprintf("o-%d", lucky), Stock: &after}
			keys[key] = sale
			v = sale
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
	errOut.Reset()
	if code := run(t.Context(), []string{"run", "--url", srv.URL, "--item", "x", "--users", "5"}, io.Discard, &errOut); code != exitFailure ||
		!strings.Contains(errOut.String(), "named buyers with an item") {
		t.Fatalf("--item with --users: got exit %d, want %d and why:\n%s", code, exitFailure, errOut.String())
	}
	for _, args := range [][]string{{"--items", "-1"}, {"--items", "65"}, {"--items", "2", "--users", "5"}} {
		errOut.Reset()
		if code := run(t.Context(), append([]string{"run", "--url", srv.URL}, args...), io.Discard, &errOut); code != exitFailure ||
			!strings.Contains(errOut.String(), "--items") {
			t.Fatalf("%v: got exit %d, want %d and why:\n%s", args, code, exitFailure, errOut.String())
		}
	}
}

// The open loop's flags: refused with the closed loop's, out of bounds,
// or with what only the closed loop does; each refusal names its flags.
func TestRunOpenLoopFlags(t *testing.T) {
	srv := httptest.NewServer(lostLedger())
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "100", "--requests", "10"}, "--rate/--duration (open loop"},
		{[]string{"--rate", "100", "--duration", "2s", "--concurrency", "5"}, "--requests/--concurrency (closed loop"},
		{[]string{"--rate", "0"}, "--rate must be 1..1000000"},
		{[]string{"--rate", "-5"}, "--rate must be"},
		{[]string{"--rate", "100", "--duration", "11m"}, "--duration must be positive and at most 10m"},
		{[]string{"--rate", "100", "--duration", "0s"}, "--duration must be"},
		{[]string{"--duration", "5s"}, "--duration and --retry-busy are the open loop's: give them with --rate"},
		{[]string{"--retry-busy", "2"}, "--duration and --retry-busy are the open loop's"},
		{[]string{"--rate", "100", "--retry-busy", "101"}, "--retry-busy must be 0..100"},
		{[]string{"--rate", "1000000", "--duration", "10m"}, "more than 2000000"},
		{[]string{"--rate", "100", "--users", "10", "--retry-rate", "0.2"}, "--retry-rate re-sends a purchase"},
		{[]string{"--rate", "100", "--request-timeout", "0s"}, "--request-timeout must be positive"},
	} {
		var out, errOut strings.Builder
		args := append([]string{"run", "--url", srv.URL}, tc.args...)
		if code := run(t.Context(), args, &out, &errOut); code != exitFailure || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut.String(), exitFailure, tc.want)
		}
	}
}

// A short open-loop run: its JSON carries the rate, the buyers sent and
// answered, and the answers per result.
func TestRunOpenLoop(t *testing.T) {
	srv := httptest.NewServer(lostLedger())
	t.Cleanup(srv.Close)
	var out, errOut strings.Builder
	code := run(t.Context(), []string{"run", "--url", srv.URL, "--rate", "100", "--duration", "500ms", "--stock", "20", "--json"}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s%s", code, out.String(), errOut.String())
	}
	var r struct {
		Open struct {
			Rate, Planned, Sent, Answered, Unanswered int
			Results                                   []struct {
				Result string
				Count  int
			}
		} `json:"open_loop"`
	}
	if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
		t.Fatal(err)
	}
	o := r.Open
	if o.Rate != 100 || o.Planned != 50 || o.Sent != 50 || o.Answered != 50 || o.Unanswered != 0 || fmt.Sprint(o.Results) != "[{sold 20} {sold_out 30}]" {
		t.Fatalf("open_loop %+v, want 50 of 50 sent and answered, 20 sold, 30 sold out:\n%s", o, out.String())
	}
}

// --never-pay runs a sale with reservations: against a sale that answers
// sold out with nothing pending from the start, every buyer ends lost and
// no unit is paid, which is exit status 3 with the report printed; the
// flags of the other loops are refused with it.
func TestRunNeverPay(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v any
		switch r.URL.Path {
		case "/stock/reset":
			v = api.Stock{Stock: 10}
		case "/stock/reduce":
			w.WriteHeader(http.StatusConflict)
			v = api.Sale{Result: api.SoldOut}
		case "/stock":
			v = api.Stock{Stock: 10}
		case "/stock/reservations":
			v = api.Census{Stock: 10, Initial: 10, OK: true}
		default:
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(srv.Close)
	var out, errOut strings.Builder
	code := run(t.Context(), []string{"run", "--url", srv.URL, "--never-pay", "3", "--requests", "6", "--stock", "10", "--json"}, &out, &errOut)
	var rep struct {
		Buyers, Paid, Lost int
		Consistent         bool
	}
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil || code != exitInconsistent || rep.Buyers != 6 || rep.Lost != 6 || rep.Paid != 0 || rep.Consistent {
		t.Fatalf("got exit %d, report %+v (%v), want %d: 6 buyers lost, none paid, inconsistent\n%s%s", code, rep, err, exitInconsistent, out.String(), errOut.String())
	}
	for _, args := range [][]string{{"--rate", "10"}, {"--users", "5"}, {"--item", "x"}, {"--never-pay", "-1"}} {
		errOut.Reset()
		args := append([]string{"run", "--url", srv.URL, "--never-pay", "3"}, args...)
		if code := run(t.Context(), args, io.Discard, &errOut); code != exitFailure || !strings.Contains(errOut.String(), "--never-pay") {
			t.Fatalf("%v: got exit %d, want %d and why:\n%s", args, code, exitFailure, errOut.String())
		}
	}
}
