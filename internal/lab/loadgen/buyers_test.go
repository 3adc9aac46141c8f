package loadgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/api"
)

// ledgerStockd stands in for stockd's buyer-aware contract (X-User,
// Idempotency-Key, the per-user limit, the ledger and its lists, durable
// orders) so the verdict can be tested check by check; each bug knob
// breaks one promise the verdict must catch.
type ledgerStockd struct {
	limit   int
	durable bool
	delay   time.Duration // before every sale, not cut short by the client
	page    int           // the most orders /orders answers at once

	dupKey      bool // a replayed key sells again, under a new order id
	ignoreLimit bool // sells past the per-user limit
	lostOrder   bool // every 5th sale leaves no order in the ledger
	lagStuck    bool // the durable copy never catches up
	replayWrong bool // a replay answers another sale's order id

	mu     sync.Mutex
	stock  int64
	lucky  int64
	sale   int
	orders []api.Order          // the ledger
	keys   map[string]api.Order // buyer and key -> its sale's order
	bought map[string]int       // user -> units bought
	stored int64                // orders the durable copy holds
}

func (f *ledgerStockd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(code int, v any) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch r.URL.Path {
	case "/stock/reset":
		var body api.Reset
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.stock, f.lucky, f.sale, f.stored = body.Stock, 0, f.sale+1, 0
		f.orders, f.keys, f.bought = nil, map[string]api.Order{}, map[string]int{}
		f.mu.Unlock()
		reply(http.StatusOK, api.Stock{Stock: body.Stock})
	case "/info":
		reply(http.StatusOK, api.Info{Backend: "fake", Ledger: true, Durable: f.durable, PerUserLimit: f.limit})
	case "/stock":
		f.mu.Lock()
		defer f.mu.Unlock()
		reply(http.StatusOK, api.Stock{Stock: f.stock, Lucky: f.lucky})
	case "/stock/reduce":
		time.Sleep(f.delay) // the server works on, whether the client waits or not
		f.reduce(r.Header.Get("X-User"), r.Header.Get("Idempotency-Key"), reply)
	case "/ledger":
		f.mu.Lock()
		defer f.mu.Unlock()
		buyers := map[string]bool{}
		for _, o := range f.orders {
			if o.User != "" {
				buyers[o.User] = true
			}
		}
		l := api.Ledger{Buyers: int64(len(buyers)), Lucky: f.lucky, Orders: int64(len(f.orders)), Sale: strconv.Itoa(f.sale)}
		if f.durable {
			// Each read finds the consumers a little further on.
			target := int64(len(f.orders))
			if f.lagStuck {
				target--
			}
			f.stored = max(f.stored, min(target, f.stored+int64(max(1, len(f.orders)/3))))
			stored, lag := f.stored, int64(len(f.orders))-f.stored
			l.Durable, l.Lag = &stored, &lag
		}
		reply(http.StatusOK, l)
	case "/orders":
		q := r.URL.Query()
		user := q.Get("user")
		offset, _ := strconv.Atoi(q.Get("offset"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		f.mu.Lock()
		defer f.mu.Unlock()
		var mine []api.Order
		for _, o := range f.orders {
			if o.User == user {
				mine = append(mine, o)
			}
		}
		page := mine[min(offset, len(mine)):min(offset+min(limit, f.page), len(mine))]
		reply(http.StatusOK, api.Orders{Orders: page, Total: int64(len(mine)), User: user})
	default:
		reply(http.StatusNotFound, api.Problem{Error: "no route"})
	}
}

func (f *ledgerStockd) reduce(user, key string, reply func(int, any)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o, ok := f.keys[user+" "+key]; ok && key != "" && !f.dupKey {
		if f.replayWrong && len(f.orders) > 1 {
			o = f.orders[len(f.orders)-1]
			if o.Key == key {
				o = f.orders[len(f.orders)-2]
			}
		}
		after := o.StockAfter // a replay names its sale's stock-after, as stockd's does
		reply(http.StatusOK, api.Sale{Result: api.Sold, Order: o.ID, Replayed: true, Stock: &after})
		return
	}
	if f.limit > 0 && user != "" && f.bought[user] >= f.limit && !f.ignoreLimit {
		reply(http.StatusConflict, api.Sale{Result: api.LimitReached})
		return
	}
	if f.stock <= 0 {
		reply(http.StatusConflict, api.Sale{Result: api.SoldOut})
		return
	}
	f.stock--
	f.lucky++
	f.bought[user]++
	o := api.Order{ID: fmt.Sprintf("o-%d-%d", f.sale, f.lucky), User: user, Key: key, Sale: strconv.Itoa(f.sale), StockAfter: f.stock}
	if key != "" {
		f.keys[user+" "+key] = o
	}
	if !f.lostOrder || f.lucky%5 != 0 {
		f.orders = append(f.orders, o)
	}
	stock := f.stock
	reply(http.StatusOK, api.Sale{Result: api.Sold, Order: o.ID, Attempt: o.ID, Stock: &stock})
}

func buyersRun(t *testing.T, f *ledgerStockd, users int) *Report {
	t.Helper()
	if f.page == 0 {
		f.page = 2 // several pages for a buyer with a few orders
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	r, err := Run(t.Context(), Config{
		URL: srv.URL, AdminToken: "t", Requests: 60, Concurrency: 12, Stock: 30,
		Users: users, RetryRate: 0.5, RetryTimeout: 5 * time.Millisecond, Drain: 2 * time.Second, Seed: 7,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Buyers == nil {
		t.Fatal("a run with users has no buyers' verdict")
	}
	return r
}

// A correct server passes every check, with all three ways of re-sending
// exercised: cut first sends, replays after the answer, racing sends.
func TestRunBuyersConsistent(t *testing.T) {
	f := &ledgerStockd{limit: 1, durable: true, delay: 20 * time.Millisecond}
	r := buyersRun(t, f, 45)
	b := r.Buyers
	var text strings.Builder
	_ = r.WriteText(&text)
	if !r.OK() || r.Verdict() != "consistent" {
		t.Fatalf("got verdict %q, want consistent:\n%s", r.Verdict(), text.String())
	}
	if b.Orders != 30 || b.Ledger.Orders != 30 || b.BuyersWithOrders != 30 || b.Duplicates != 0 || b.OverLimit != 0 {
		t.Fatalf("got %+v, want 30 orders by 30 buyers, no duplicates:\n%s", b, text.String())
	}
	if b.Resent["timeout"] == 0 || b.Resent["after"] == 0 || b.Resent["race"] == 0 || b.Cut == 0 || b.Replayed == 0 {
		t.Fatalf("got resent %v, %d cut, %d replayed; want every kind, some cut, some replayed", b.Resent, b.Cut, b.Replayed)
	}
	if got := 7; len(b.Checks) != got { // five, the limit's and the durable one
		t.Fatalf("got %d checks, want %d: %+v", len(b.Checks), got, b.Checks)
	}
	if !regexp.MustCompile(`one order per idempotency key +ok`).MatchString(text.String()) {
		t.Fatalf("the table lacks the key check:\n%s", text.String())
	}
}

// Each broken promise fails the verdict, on the check that names it.
func TestRunBuyersCatchesEachBug(t *testing.T) {
	for _, tc := range []struct {
		name  string
		f     *ledgerStockd
		users int
		check string
	}{
		{"a replayed key sells again", &ledgerStockd{dupKey: true, delay: time.Millisecond}, 200, "one order per idempotency key"},
		{"a buyer over the limit", &ledgerStockd{limit: 1, ignoreLimit: true}, 5, "no buyer over the limit"},
		{"orders != lucky", &ledgerStockd{lostOrder: true}, 200, "orders == lucky == ledger"},
		{"the lag never reaches 0", &ledgerStockd{durable: true, lagStuck: true}, 200, "MySQL rows == ledger orders (drained)"},
		{"a replay with another order id", &ledgerStockd{replayWrong: true}, 200, "replays answer the original order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := buyersRun(t, tc.f, tc.users)
			var text strings.Builder
			_ = r.WriteText(&text)
			if r.OK() || !strings.HasPrefix(r.Verdict(), "BUYERS: ") && r.Consistent {
				t.Fatalf("got verdict %q, want a failed buyers' check:\n%s", r.Verdict(), text.String())
			}
			i := slices.IndexFunc(r.Buyers.Checks, func(c Check) bool { return c.Name == tc.check })
			if i < 0 || r.Buyers.Checks[i].OK {
				t.Fatalf("check %q did not fail:\n%s", tc.check, text.String())
			}
		})
	}
}

// A run with users on a cluster without the ledger is refused before it
// sells anything: there would be nothing to verify against.
func TestRunBuyersNeedsTheLedger(t *testing.T) {
	f := &fakeStockd{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	_, err := Run(t.Context(), Config{URL: srv.URL, AdminToken: "t", Requests: 5, Stock: 5, Users: 5})
	if !errors.Is(err, ErrNoLedger) {
		t.Fatalf("got %v, want ErrNoLedger", err)
	}
	if f.lucky != 0 {
		t.Fatalf("sold %d units before refusing", f.lucky)
	}
}

func TestPlan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		n, users int
		rate     float64
	}{{500, 500, 0.2}, {60, 45, 0.5}, {10, 3, 1}, {7, 100, 0}} {
		p := Plan(tc.n, tc.users, tc.rate, "run", rng)
		perUser, keys, kinds := map[string]int{}, map[string]bool{}, map[RetryKind]int{}
		for _, x := range p {
			perUser[x.User]++
			keys[x.Key] = true
			kinds[x.Retry]++
		}
		wantUsers := min(tc.n, tc.users)
		most := (tc.n + tc.users - 1) / tc.users
		for u, k := range perUser {
			if k > most {
				t.Errorf("n %d users %d: %s has %d purchases, want at most %d", tc.n, tc.users, u, k, most)
			}
		}
		resent := tc.n - kinds[RetryNone]
		if len(p) != tc.n || len(perUser) != wantUsers || len(keys) != tc.n || resent != int(tc.rate*float64(tc.n)+0.5) {
			t.Errorf("n %d users %d rate %v: got %d purchases, %d buyers, %d keys, %d re-sent", tc.n, tc.users, tc.rate, len(p), len(perUser), len(keys), resent)
		}
		if resent >= 3 && (kinds[RetryTimeout] == 0 || kinds[RetryAfter] == 0 || kinds[RetryRace] == 0) {
			t.Errorf("n %d: kinds %v, want all three", tc.n, kinds)
		}
	}
}

// An anonymous run on a cluster with the ledger shows the ledger and the
// durable copy's lag after the sale, and is judged as before.
func TestRunAnonymousShowsLedger(t *testing.T) {
	srv := httptest.NewServer(&ledgerStockd{durable: true, page: 2})
	t.Cleanup(srv.Close)
	r, err := Run(t.Context(), Config{URL: srv.URL, AdminToken: "t", Requests: 30, Concurrency: 5, Stock: 20})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	_ = r.WriteText(&text)
	if r.Buyers != nil || r.Ledger == nil || r.Ledger.Orders != 20 || r.Ledger.Lag == nil || !r.OK() ||
		!strings.Contains(text.String(), "ledger: orders 20  buyers 0  MySQL ") {
		t.Fatalf("got buyers %v, ledger %+v, verdict %q:\n%s", r.Buyers, r.Ledger, r.Verdict(), text.String())
	}
}
