package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/api"
)

// fakeStockd is an in-process stand-in for stockd's HTTP contract, for
// testing the load generator's counting and verdicts; the real service is
// exercised in e2e. racy makes it read-then-write without a lock, the bug
// the lab demonstrates.
type fakeStockd struct {
	racy  bool
	delay time.Duration
	// unconfirmEvery, if positive, answers every nth sale "unconfirmed"
	// (the sale happened; its receipt says so).
	unconfirmEvery int

	mu           sync.Mutex
	stock, lucky int64
	receipts     map[string]bool
}

func (f *fakeStockd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(code int, v any) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch r.URL.Path {
	case "/stock/reset":
		if r.Header.Get("X-Admin-Token") != "t" {
			reply(http.StatusUnauthorized, api.Problem{Error: "bad token"})
			return
		}
		var body api.Reset
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.stock, f.lucky = body.Stock, 0
		f.mu.Unlock()
		reply(http.StatusOK, api.Stock{Stock: body.Stock})
	case "/info":
		reply(http.StatusOK, api.Info{From: api.From{Replica: "fake-1"}, Backend: "fake"})
	case "/stock":
		f.mu.Lock()
		defer f.mu.Unlock()
		reply(http.StatusOK, api.Stock{Stock: f.stock, Lucky: f.lucky})
	case "/stock/reduce":
		f.reduce(reply)
	default:
		if id, ok := strings.CutPrefix(r.URL.Path, "/stock/receipts/"); ok {
			f.mu.Lock()
			defer f.mu.Unlock()
			reply(http.StatusOK, api.Receipt{Attempt: id, Sold: f.receipts[id]})
			return
		}
		http.NotFound(w, r)
	}
}

// reduce sells one unit. The racy variant reads, works, then writes the
// value it read minus one: every access is under the mutex (so -race is
// quiet), yet concurrent requests overwrite each other's sales.
func (f *fakeStockd) reduce(reply func(int, any)) {
	f.mu.Lock()
	stock := f.stock
	if f.racy {
		f.mu.Unlock()
	} else {
		defer f.mu.Unlock()
	}
	if stock <= 0 {
		reply(http.StatusConflict, api.Sale{Result: api.SoldOut})
		return
	}
	time.Sleep(f.delay) // the business work that widens the race window
	if f.racy {
		f.mu.Lock()
		defer f.mu.Unlock()
	}
	f.stock = stock - 1
	f.lucky++
	if f.unconfirmEvery > 0 && f.lucky%int64(f.unconfirmEvery) == 0 {
		id := "a" + strconv.FormatInt(f.lucky, 10)
		if f.receipts == nil {
			f.receipts = map[string]bool{}
		}
		f.receipts[id] = true
		reply(http.StatusServiceUnavailable, api.Sale{Result: api.Unconfirmed, Attempt: id, From: api.From{Replica: "fake-1"}})
		return
	}
	left := stock - 1
	reply(http.StatusOK, api.Sale{Result: api.Sold, Stock: &left, From: api.From{Replica: "fake-1"}})
}

func TestRunConsistent(t *testing.T) {
	srv := httptest.NewServer(&fakeStockd{})
	t.Cleanup(srv.Close)
	r, err := Run(t.Context(), Config{URL: srv.URL, AdminToken: "t", Requests: 500, Concurrency: 50, Stock: 300})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sold != 300 || r.SoldOut != 200 || r.Stock != 0 || r.Lucky != 300 || r.Errors != 0 {
		t.Fatalf("got sold %d sold_out %d stock %d lucky %d errors %d, want 300 200 0 300 0", r.Sold, r.SoldOut, r.Stock, r.Lucky, r.Errors)
	}
	if !r.Consistent || r.Oversold != 0 || r.Verdict() != "consistent" {
		t.Fatalf("got consistent=%v oversold=%d verdict %q, want consistent", r.Consistent, r.Oversold, r.Verdict())
	}
	if r.Backend != "fake" || r.Replicas["fake-1"] != 300 || r.Requests != 500 {
		t.Fatalf("got backend %q replicas %v requests %d", r.Backend, r.Replicas, r.Requests)
	}
	if r.RPS <= 0 || r.P99ms < r.P50ms {
		t.Fatalf("got rps %v p50 %v p99 %v", r.RPS, r.P50ms, r.P99ms)
	}
}

// An unconfirmed answer whose receipt says it sold is a sale: the books
// balance only when Run settles it.
func TestRunSettlesUnconfirmed(t *testing.T) {
	srv := httptest.NewServer(&fakeStockd{unconfirmEvery: 10})
	t.Cleanup(srv.Close)
	r, err := Run(t.Context(), Config{URL: srv.URL, AdminToken: "t", Requests: 200, Concurrency: 8, Stock: 100})
	if err != nil {
		t.Fatal(err)
	}
	if r.Unconfirmed != 10 || r.UnconfirmedSold != 10 || r.Sold != 90 || r.Lucky != 100 {
		t.Fatalf("got unconfirmed %d (sold %d), sold %d, lucky %d; want 10 (10), 90, 100", r.Unconfirmed, r.UnconfirmedSold, r.Sold, r.Lucky)
	}
	if !r.Consistent || r.Oversold != 0 {
		t.Fatalf("got consistent=%v oversold=%d, want consistent books once settled", r.Consistent, r.Oversold)
	}
}

func TestRunOversold(t *testing.T) {
	srv := httptest.NewServer(&fakeStockd{racy: true, delay: 2 * time.Millisecond})
	t.Cleanup(srv.Close)
	r, err := Run(t.Context(), Config{URL: srv.URL, AdminToken: "t", Requests: 200, Concurrency: 20, Stock: 50})
	if err != nil {
		t.Fatal(err)
	}
	if r.Consistent || r.Oversold <= 0 || r.Verdict() != "OVERSOLD" {
		t.Fatalf("got consistent=%v oversold=%d sold=%d, want an oversell", r.Consistent, r.Oversold, r.Sold)
	}
}

func TestRunErrors(t *testing.T) {
	srv := httptest.NewServer(&fakeStockd{})
	t.Cleanup(srv.Close)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	for name, tc := range map[string]struct {
		cfg  Config
		want error
	}{
		"bad token":   {Config{URL: srv.URL, AdminToken: "wrong"}, ErrUnauthorized},
		"unreachable": {Config{URL: deadURL, AdminToken: "t"}, ErrUnreachable},
		"not stockd":  {Config{URL: srv.URL + "/nope", AdminToken: "t"}, ErrBadResponse},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Run(t.Context(), tc.cfg)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRunTimeout(t *testing.T) {
	srv := httptest.NewServer(&fakeStockd{delay: 20 * time.Millisecond})
	t.Cleanup(srv.Close)
	r, err := Run(t.Context(), Config{URL: srv.URL, AdminToken: "t", Requests: 1000, Concurrency: 1, Timeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	// The request in flight at the deadline may still sell server-side
	// after the client gave up, so sold == lucky is not guaranteed; stock
	// conservation is.
	if r == nil || !r.TimedOut || r.Requests >= 1000 || r.Stock+r.Lucky != 300 {
		t.Fatalf("got report %+v, want a partial, timed-out report with stock+lucky == 300", r)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		status int
		result api.Result
		want   Outcome
	}{
		{200, "sold", OutcomeSold},
		{409, "sold_out", OutcomeSoldOut},
		{409, "fenced", OutcomeFenced},
		{503, "busy", OutcomeBusy},
		{503, "lock_lost", OutcomeLockLost},
		{503, "unconfirmed", OutcomeUnconfirmed},
		{409, "mixed_backends", OutcomeError},
		{503, "error", OutcomeError},
		{502, "sold", OutcomeError},     // a sale must come with 200
		{503, "sold_out", OutcomeError}, // so must every result with its own status
		{200, "", OutcomeError},
	} {
		if got := classify(tc.status, tc.result); got != tc.want {
			t.Errorf("classify(%d, %q) = %v, want %v", tc.status, tc.result, got, tc.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(d, 50); got != 50*time.Millisecond {
		t.Errorf("p50 = %v, want 50ms", got)
	}
	if got := percentile(d, 99); got != 99*time.Millisecond {
		t.Errorf("p99 = %v, want 99ms", got)
	}
	if got := percentile(d[:1], 99); got != time.Millisecond {
		t.Errorf("p99 of one = %v, want 1ms", got)
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("p50 of none = %v, want 0", got)
	}
}

func TestFireStopsOnCancel(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(block); srv.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	got := Fire(ctx, NewClient(4, time.Minute), srv.URL, 100, 4)
	if len(got) != 0 {
		t.Fatalf("got %d responses from cancelled requests, want 0", len(got))
	}
}
