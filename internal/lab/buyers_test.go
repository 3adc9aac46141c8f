package lab

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"seckill/internal/api"
	"seckill/internal/lab/loadgen"
)

// fakeLedger is a stockd that answers GET /info, /ledger and /orders from
// fixed orders, with durable orders (MySQL holding rows of them) and a
// per-user limit of 1.
func fakeLedger(t *testing.T, orders []api.Order, rows int64) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v any
		switch r.URL.Path {
		case "/info":
			v = api.Info{Ledger: true, Durable: true, PerUserLimit: 1, Fencing: true}
		case "/ledger":
			buyers := map[string]bool{}
			for _, o := range orders {
				buyers[o.User] = true
			}
			lag := int64(0)
			v = api.Ledger{Orders: int64(len(orders)), Lucky: int64(len(orders)), Buyers: int64(len(buyers)), Durable: &rows, Lag: &lag}
		case "/orders":
			page := api.Orders{User: r.URL.Query().Get("user"), Orders: []api.Order{}}
			for _, o := range orders {
				if o.User == page.User {
					page.Orders = append(page.Orders, o)
				}
			}
			page.Total = int64(len(page.Orders))
			v = page
		default:
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func sold(user, key, order string) response {
	return response{Status: 200, Result: api.Sold, User: user, Key: key, Order: order, Attempt: order}
}

// The buyers' verdict passes a clean sale, and fails each way an order can
// go wrong: duplicated under one key, lost (from the ledger or from
// MySQL), a buyer over the limit, or an order left by a sale answered as
// not sold.
func TestJudgeBuyers(t *testing.T) {
	o := func(id, user, key string) api.Order { return api.Order{ID: id, User: user, Key: key, Sale: "s"} }
	replay := sold("u2", "k2", "o2")
	replay.Replayed, replay.Resend = true, true
	clean := []response{sold("u1", "k1", "o1"), sold("u2", "k2", "o2"), replay,
		{Status: 409, Result: api.LimitReached, User: "u1", Key: "k9"}}
	cases := []struct {
		name   string
		orders []api.Order
		rows   int64
		resps  []response
		want   string // a failed check's name; "" for none
	}{
		{"clean", []api.Order{o("o1", "u1", "k1"), o("o2", "u2", "k2")}, 2, clean, ""},
		{"duplicated order", []api.Order{o("o1", "u1", "k1"), o("o2", "u2", "k2"), o("o3", "u2", "k2")}, 3,
			append(clean, sold("u2", "k2", "o3")), "one order per idempotency key"},
		{"order lost from the ledger", []api.Order{o("o1", "u1", "k1")}, 1, clean, "orders == lucky == ledger"},
		{"order lost from MySQL", []api.Order{o("o1", "u1", "k1"), o("o2", "u2", "k2")}, 1, clean, "MySQL rows == ledger orders (drained)"},
		{"buyer over the limit", []api.Order{o("o1", "u1", "k1"), o("o2", "u2", "k2"), o("o3", "u1", "k3")}, 3,
			append(clean, sold("u1", "k3", "o3")), "no buyer over the limit"},
		{"fenced sale left an order", []api.Order{o("o1", "u1", "k1"), o("o2", "u2", "k2"), o("o4", "u4", "k4")}, 3,
			append(clean, response{Status: 409, Result: api.Fenced, User: "u4", Key: "k4"}), "order(s) of buyers no answer gave one"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := fakeLedger(t, tc.orders, tc.rows)
			v, err := judgeBuyers(t.Context(), http.DefaultClient, base, "", tc.resps)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if len(v.problems) > 0 {
					t.Fatalf("got problems %q, want none", v.problems)
				}
				if v.Orders != 2 || v.Replayed != 1 || v.LimitReached != 1 {
					t.Fatalf("got %d orders, %d replayed, %d limit_reached; want 2, 1, 1", v.Orders, v.Replayed, v.LimitReached)
				}
				return
			}
			for _, p := range v.problems {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Fatalf("got problems %q, want one naming %q", v.problems, tc.want)
		})
	}
}

// Every result stockd answers maps to loadgen's outcome of the same
// meaning, and a result under another status (a confused proxy) is an
// error, as loadgen's own client classifies it.
func TestOutcomeMatchesLoadgen(t *testing.T) {
	want := map[api.Result]loadgen.Outcome{
		api.Sold: loadgen.OutcomeSold, api.SoldOut: loadgen.OutcomeSoldOut, api.Fenced: loadgen.OutcomeFenced,
		api.Busy: loadgen.OutcomeBusy, api.LockLost: loadgen.OutcomeLockLost, api.MixedBackends: loadgen.OutcomeError,
		api.Unconfirmed: loadgen.OutcomeUnconfirmed, api.Error: loadgen.OutcomeError,
		api.LimitReached: loadgen.OutcomeLimitReached,
		api.StoreLost:    loadgen.OutcomeError,
		api.NotStarted:   loadgen.OutcomeError,
		api.Ended:        loadgen.OutcomeError,
		api.ClockSkew:    loadgen.OutcomeError,
	}
	for _, res := range api.Results {
		w, ok := want[res]
		if !ok {
			t.Fatalf("result %q has no expected outcome: add it", res)
		}
		if got := (response{Status: res.Status(), Result: res}).outcome(); got != w {
			t.Errorf("%s: got outcome %d, want %d", res, got, w)
		}
		if got := (response{Status: 418, Result: res}).outcome(); got != loadgen.OutcomeError {
			t.Errorf("%s under 418: got outcome %d, want an error", res, got)
		}
	}
	r := response{Status: 200, Result: api.Sold, Replayed: true}
	if got := r.outcome(); got != loadgen.OutcomeReplayed {
		t.Errorf("replayed sold: got outcome %d, want replayed", got)
	}
	for _, s := range []response{{Status: 502}, {Status: 503, Result: api.Unconfirmed}, {Status: 500, Result: api.Error}} {
		if settled(s) {
			t.Errorf("%d %q: settled, want an unknown outcome (re-sent with its key)", s.Status, s.Result)
		}
	}
	if !settled(response{Status: 409, Result: api.Fenced}) || !settled(r) {
		t.Error("fenced and sold answers must be verdicts")
	}
}

// A purchase with a send of unknown outcome is settled only by a verdict
// that read its key's record: busy, fenced or lock_lost say that one send
// did not sell, not that the earlier one did not.
func TestUnknownSendIsSettledByTheKeysVerdict(t *testing.T) {
	b := &buyerPlan{settled: map[int]bool{}, unknown: map[int]bool{}}
	cut := response{Status: 0, Error: "context deadline exceeded"}
	answer := func(res api.Result) response { return response{Status: res.Status(), Result: res} }
	for _, tc := range []struct {
		name  string
		sends []response
		want  bool
	}{
		{"fenced alone", []response{answer(api.Fenced)}, true},
		{"busy alone", []response{answer(api.Busy)}, true},
		{"cut, then fenced", []response{cut, answer(api.Fenced)}, false},
		{"cut, then busy", []response{cut, answer(api.Busy)}, false},
		{"cut, then lock_lost", []response{cut, answer(api.LockLost)}, false},
		{"unconfirmed, then busy", []response{answer(api.Unconfirmed), answer(api.Busy)}, false},
		{"cut, then fenced, then sold", []response{cut, answer(api.Fenced), answer(api.Sold)}, true},
		{"cut, then sold_out", []response{cut, answer(api.SoldOut)}, true},
		{"cut, then limit_reached", []response{cut, answer(api.LimitReached)}, true},
	} {
		i := len(b.settled) + len(b.unknown) + 1000 // a purchase of its own: each case adds to one map
		var got bool
		for _, r := range tc.sends {
			got = b.answer(i, r)
		}
		if got != tc.want || b.settled[i] != tc.want {
			t.Errorf("%s: settled %v, want %v", tc.name, got, tc.want)
		}
	}
}
