package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/api"
)

// itemsFake is stockd's items API in process: POST /items (201, 409 when
// the id exists), POST /items/:id/reset, GET /items/:id, POST
// /items/:id/reduce with the window checked by its own clock (time.Now
// plus skew: another machine's), and the items' receipts. Every
// unconfirmEvery-th sale sells and answers unconfirmed; sellAfterEnd is a
// bug: the end of the window is not checked.
type itemsFake struct {
	skew           time.Duration
	unconfirmEvery int
	sellAfterEnd   bool
	refuse         string // an item id whose creation fails (500)

	// lastPut is the latest create or reset, firstSale the first sale's
	// arrival: RunItems fires no item before every item is reset.
	lastPut, firstSale time.Time

	mu          sync.Mutex
	items       map[string]*fakeItem
	created     int
	resets      int
	defaultSale int // requests to the default sale's /stock routes
	sales       int
}

type fakeItem struct {
	settings     api.ItemSettings
	stock, lucky int64
	receipts     map[string]bool
}

func (f *itemsFake) now() int64 { return time.Now().Add(f.skew).UnixMilli() }

func (f *itemsFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(code int, v any) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	path := r.URL.Path
	if strings.HasPrefix(path, "/stock") {
		f.defaultSale++
	}
	if path == "/info" {
		reply(http.StatusOK, api.Info{From: api.From{Replica: "fake-1"}, Backend: "fake"})
		return
	}
	if path == "/items" && r.Method == http.MethodPost {
		if r.Header.Get("X-Admin-Token") != "t" {
			reply(http.StatusUnauthorized, api.Problem{Error: "bad token"})
			return
		}
		var it api.ItemSettings
		_ = json.NewDecoder(r.Body).Decode(&it)
		if it.ID == f.refuse && it.ID != "" {
			reply(http.StatusInternalServerError, api.Problem{Error: "refused"})
			return
		}
		if f.items[it.ID] != nil {
			reply(http.StatusConflict, api.Problem{Error: "item exists"})
			return
		}
		f.created++
		f.items[it.ID] = &fakeItem{}
		f.put(it)
		reply(http.StatusCreated, f.answer(it.ID))
		return
	}
	rest, ok := strings.CutPrefix(path, "/items/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	id, op, _ := strings.Cut(rest, "/")
	it := f.items[id]
	if it == nil {
		reply(http.StatusNotFound, api.Problem{Error: "no such item"})
		return
	}
	switch {
	case op == "" && r.Method == http.MethodGet:
		reply(http.StatusOK, f.answer(id))
	case op == "reset" && r.Method == http.MethodPost:
		var s api.ItemSettings
		_ = json.NewDecoder(r.Body).Decode(&s)
		if s.ID != "" {
			reply(http.StatusBadRequest, api.Problem{Error: `unknown field "id"`})
			return
		}
		s.ID = id
		f.resets++
		f.put(s)
		reply(http.StatusOK, f.answer(id))
	case op == "reduce" && r.Method == http.MethodPost:
		if f.firstSale.IsZero() {
			f.firstSale = time.Now()
		}
		now := f.now()
		switch {
		case it.settings.StartsAt > 0 && now < it.settings.StartsAt:
			reply(http.StatusConflict, api.Sale{Result: api.NotStarted, StartsAt: &it.settings.StartsAt})
		case it.settings.EndsAt > 0 && now >= it.settings.EndsAt && !f.sellAfterEnd:
			reply(http.StatusConflict, api.Sale{Result: api.Ended})
		case it.stock <= 0:
			reply(http.StatusConflict, api.Sale{Result: api.SoldOut})
		default:
			it.stock--
			it.lucky++
			f.sales++
			attempt := fmt.Sprintf("a-%d", f.sales)
			it.receipts[attempt] = true
			if f.unconfirmEvery > 0 && f.sales%f.unconfirmEvery == 0 {
				reply(http.StatusServiceUnavailable, api.Sale{Result: api.Unconfirmed, Attempt: attempt})
				return
			}
			left := it.stock
			reply(http.StatusOK, api.Sale{Result: api.Sold, Stock: &left, Attempt: attempt, From: api.From{Replica: "fake-1"}})
		}
	case strings.HasPrefix(op, "receipts/"):
		attempt := strings.TrimPrefix(op, "receipts/")
		reply(http.StatusOK, api.Receipt{Attempt: attempt, Sold: it.receipts[attempt]})
	default:
		http.NotFound(w, r)
	}
}

// put starts item s.ID's sale over with s.
func (f *itemsFake) put(s api.ItemSettings) {
	it := f.items[s.ID]
	it.settings, it.stock, it.lucky, it.receipts = s, s.Stock, 0, map[string]bool{}
	f.lastPut = time.Now()
}

func (f *itemsFake) answer(id string) api.Item {
	it := f.items[id]
	return api.Item{ID: id, Stock: it.stock, Lucky: it.lucky, Initial: it.settings.Stock,
		StartsAt: it.settings.StartsAt, EndsAt: it.settings.EndsAt, Now: f.now()}
}

func newItemsFake(t *testing.T, f *itemsFake) *httptest.Server {
	t.Helper()
	f.items = map[string]*fakeItem{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv
}

// A run with Config.Item creates the item, starts it over when it exists,
// sells it at its own path, settles its unconfirmed sales by its own
// receipts and reads its books back from GET /items/:id; the default sale
// is never touched.
func TestRunSellsAnItem(t *testing.T) {
	f := &itemsFake{unconfirmEvery: 7}
	srv := newItemsFake(t, f)
	for round := 1; round <= 2; round++ {
		r, err := Run(context.Background(), Config{URL: srv.URL, AdminToken: "t", Item: "spring-1", Requests: 80, Concurrency: 8, Stock: 50})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		var text strings.Builder
		_ = r.WriteText(&text)
		if !r.OK() || r.Item != "spring-1" || r.Sold+r.UnconfirmedSold != 50 || r.Unconfirmed == 0 || r.Lucky != 50 || r.Stock != 0 ||
			r.SoldOut != 30 || r.Window == nil || !r.History.Passed() || len(r.Answers) != 80 {
			t.Fatalf("round %d: got verdict %q, %d answers:\n%s", round, r.Verdict(), len(r.Answers), text.String())
		}
		if !strings.HasPrefix(text.String(), "backend fake, item spring-1: 80 requests") || !strings.Contains(text.String(), "window none..none") {
			t.Fatalf("round %d: the text does not name the item and its window:\n%s", round, text.String())
		}
	}
	if f.created != 1 || f.resets != 1 || f.defaultSale != 0 {
		t.Fatalf("got %d creates, %d resets, %d requests to the default sale; want 1, 1, 0", f.created, f.resets, f.defaultSale)
	}
}

// An open loop through an item's window: buyers before it are answered
// not_started, after it ended, and every answer is where the window puts
// it, by the server's clock, whether or not it is this machine's.
func TestRunItemWindow(t *testing.T) {
	for _, skew := range []time.Duration{0, -200 * time.Millisecond, 3 * time.Second} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			f := &itemsFake{skew: skew}
			srv := newItemsFake(t, f)
			// The server's clock: the window opens 400 ms after this
			// one's now and lasts 600 ms, by the server; the run's
			// setup (the item, the clock reads) fits before it opens
			// on a loaded machine too.
			start := time.Now().Add(skew)
			r, err := Run(context.Background(), Config{URL: srv.URL, AdminToken: "t", Item: "w", Stock: 1000,
				Rate: 100, Duration: 1400 * time.Millisecond,
				StartsAt: start.Add(400 * time.Millisecond), EndsAt: start.Add(time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			_ = r.WriteText(&text)
			w := r.Window
			if !r.OK() || w == nil || r.Sold == 0 || r.NotStarted == 0 || r.Ended == 0 || r.Errors != 0 ||
				r.Sold+r.NotStarted+r.Ended != 140 || r.Lucky != int64(r.Sold) || r.Stock+r.Lucky != 1000 {
				t.Fatalf("got verdict %q:\n%s", r.Verdict(), text.String())
			}
			if lo, hi := w.OffsetMinMS, w.OffsetMaxMS; float64(skew.Milliseconds()) < lo-1 || float64(skew.Milliseconds()) > hi+1 || hi-lo > 400 {
				t.Fatalf("got the server's clock %.1f..%.1f ms from this one, want about %v", lo, hi, skew)
			}
			t.Logf("\n%s", text.String())
		})
	}
}

// A server that sells after the window closed fails the run, however its
// books balance.
func TestRunItemSoldAfterTheEnd(t *testing.T) {
	f := &itemsFake{sellAfterEnd: true}
	srv := newItemsFake(t, f)
	now := time.Now()
	r, err := Run(context.Background(), Config{URL: srv.URL, AdminToken: "t", Item: "late", Stock: 1000,
		Rate: 200, Duration: 400 * time.Millisecond, EndsAt: now.Add(150 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() || r.Verdict() != "OUTSIDE THE WINDOW" || !r.Consistent || r.Window.SoldOutside == 0 {
		t.Fatalf("got verdict %q, consistent %v, window %+v; want OUTSIDE THE WINDOW with balanced books", r.Verdict(), r.Consistent, r.Window)
	}
}

// CheckWindow's edges: an answer is misplaced only when no instant of the
// request, under any offset the clock reads allow, explains it.
func TestCheckWindow(t *testing.T) {
	const starts, ends = 10_000, 20_000
	at := func(ms float64) time.Time {
		return time.UnixMilli(0).Add(time.Duration(ms * float64(time.Millisecond)))
	}
	resp := func(o Outcome, sent, got float64) Response {
		return Response{Outcome: o, Status: http.StatusOK, Sent: at(sent), Received: at(got)}
	}
	for _, tc := range []struct {
		name           string
		lo, hi         float64
		r              Response
		sold, ns, ends int
	}{
		{"sold inside", 0, 0.5, resp(OutcomeSold, 12_000, 12_001), 0, 0, 0},
		{"sold sent just before the end", 0, 0.5, resp(OutcomeSold, 19_999.9, 20_005), 0, 0, 0},
		{"sold sent at the end", 0, 0.5, resp(OutcomeSold, 20_000, 20_005), 1, 0, 0},
		{"sold answered before the start", 0, 0.5, resp(OutcomeSold, 9_990, 9_999), 1, 0, 0},
		{"sold answered before the start, a clock maybe behind", -2, 2, resp(OutcomeSold, 9_990, 9_999), 0, 0, 0},
		{"not_started sent before the start", 0, 0.5, resp(OutcomeNotStarted, 9_999.5, 10_003), 0, 0, 0},
		{"not_started sent after the start", 0, 0.5, resp(OutcomeNotStarted, 10_000.5, 10_003), 0, 1, 0},
		{"ended answered after the end", 0, 0.5, resp(OutcomeEnded, 19_990, 20_000), 0, 0, 0},
		{"ended answered well before the end", 0, 0.5, resp(OutcomeEnded, 19_000, 19_010), 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := CheckWindow([]Response{tc.r}, Window{StartsAt: starts, EndsAt: ends, OffsetMinMS: tc.lo, OffsetMaxMS: tc.hi})
			if w.SoldOutside != tc.sold || w.NotStartedLate != tc.ns || w.EndedEarly != tc.ends {
				t.Fatalf("got %+v, want sold outside %d, not_started late %d, ended early %d", w, tc.sold, tc.ns, tc.ends)
			}
		})
	}
	// With no window, neither answer can be.
	w := CheckWindow([]Response{resp(OutcomeNotStarted, 1, 2), resp(OutcomeEnded, 1, 2)}, Window{})
	if w.NotStartedLate != 1 || w.EndedEarly != 1 || w.OK() {
		t.Fatalf("no window: got %+v, want both answers misplaced", w)
	}
	// The default sale has no window: either answer fails its run.
	r := &Report{Consistent: true, Ended: 1}
	if r.OK() || r.Verdict() != "OUTSIDE THE WINDOW" {
		t.Fatalf("default sale answering ended: got OK %v, verdict %q", r.OK(), r.Verdict())
	}
}

func TestRunItemConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"buyers with an item":   {Item: "x", Users: 10},
		"a window with no item": {EndsAt: time.Now()},
	} {
		if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: got %v, want ErrConfig", name, err)
		}
	}
}
