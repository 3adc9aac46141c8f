package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
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
	// segments, if above 1, splits the stock over that many segments
	// (GET /stock lists them). segBug selects how the fake sells from them.
	segments int
	segBug   segBug

	mu           sync.Mutex
	stock, lucky int64
	segs         []int64
	next         int // round-robin cursor over segs
	receipts     map[string]bool
}

// segBug is a segmented fake's selling rule: correct, or one of the two
// bugs the verifier must catch.
type segBug int

const (
	// segCorrect sells from any segment with stock and answers sold_out
	// only when every segment is empty.
	segCorrect segBug = iota
	// segFalseSoldOut puts the whole stock in segment 0 at reset, tries
	// segments round robin and answers sold_out when the one it tried is
	// empty: buyers are turned away while segment 0 still has stock.
	segFalseSoldOut
	// segNegative always sells from segment 0 while the sum is positive:
	// the books balance, segment 0 goes below zero.
	segNegative
)

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
		f.stock, f.lucky, f.next = body.Stock, 0, 0
		f.split()
		f.mu.Unlock()
		reply(http.StatusOK, api.Stock{Stock: body.Stock})
	case "/info":
		reply(http.StatusOK, api.Info{From: api.From{Replica: "fake-1"}, Backend: "fake"})
	case "/stock":
		f.mu.Lock()
		defer f.mu.Unlock()
		reply(http.StatusOK, api.Stock{Stock: f.stock, Lucky: f.lucky, Segments: slices.Clone(f.segs)})
	case "/stock/reduce":
		if f.segments > 1 {
			f.reduceSegment(reply)
			return
		}
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

// split spreads f.stock over f.segments at reset; f.mu is held.
func (f *fakeStockd) split() {
	f.segs = nil
	if f.segments <= 1 {
		return
	}
	f.segs = make([]int64, f.segments)
	if f.segBug == segFalseSoldOut {
		f.segs[0] = f.stock
		return
	}
	for i := range f.segs {
		f.segs[i] = f.stock / int64(f.segments)
		if int64(i) < f.stock%int64(f.segments) {
			f.segs[i]++
		}
	}
}

// reduceSegment sells one unit from a segment by f.segBug's rule; f.stock
// stays the segments' sum.
func (f *fakeStockd) reduceSegment(reply func(int, any)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seg := -1
	switch f.segBug {
	case segCorrect:
		for i, n := range f.segs {
			if n > 0 {
				seg = i
				break
			}
		}
	case segFalseSoldOut:
		if i := f.next % len(f.segs); f.segs[i] > 0 {
			seg = i
		}
		f.next++
	case segNegative:
		if f.stock > 0 {
			seg = 0
		}
	}
	if seg < 0 {
		reply(http.StatusConflict, api.Sale{Result: api.SoldOut})
		return
	}
	f.segs[seg]--
	f.stock--
	f.lucky++
	left := f.segs[seg]
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

// A correctly segmented stock passes: every segment read back, none
// negative, no buyer turned away while a segment had stock.
func TestRunSegmentsConsistent(t *testing.T) {
	srv := httptest.NewServer(&fakeStockd{segments: 4})
	t.Cleanup(srv.Close)
	r, err := Run(t.Context(), Config{URL: srv.URL, AdminToken: "t", Requests: 200, Concurrency: 20, Stock: 101})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Segments, []int64{0, 0, 0, 0}) || r.NegativeSegments != 0 || r.FalseSoldOut != 0 {
		t.Fatalf("got segments %v negative %d false sold-out %d, want [0 0 0 0] 0 0", r.Segments, r.NegativeSegments, r.FalseSoldOut)
	}
	if !r.Consistent || !r.OK() || r.Verdict() != "consistent" || r.Sold != 101 || r.SoldOut != 99 {
		t.Fatalf("got consistent=%v ok=%v verdict %q sold %d sold_out %d, want a consistent sale of 101", r.Consistent, r.OK(), r.Verdict(), r.Sold, r.SoldOut)
	}
}

// A segment below zero fails the run even though the sum hides it.
func TestRunNegativeSegment(t *testing.T) {
	srv := httptest.NewServer(&fakeStockd{segments: 2, segBug: segNegative})
	t.Cleanup(srv.Close)
	r, err := Run(t.Context(), Config{URL: srv.URL, AdminToken: "t", Requests: 10, Concurrency: 3, Stock: 4})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stock != 0 || r.Lucky != 4 || r.Oversold != 0 {
		t.Fatalf("got stock %d lucky %d oversold %d, want the sum to balance (0, 4, 0)", r.Stock, r.Lucky, r.Oversold)
	}
	if !slices.Equal(r.Segments, []int64{-2, 2}) || r.NegativeSegments != 1 {
		t.Fatalf("got segments %v negative %d, want [-2 2] and 1", r.Segments, r.NegativeSegments)
	}
	if r.Consistent || r.OK() || r.Verdict() != "NEGATIVE SEGMENT" {
		t.Fatalf("got consistent=%v ok=%v verdict %q, want NEGATIVE SEGMENT", r.Consistent, r.OK(), r.Verdict())
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil || !strings.Contains(b.String(), "segments [-2 2]  negative 1") {
		t.Fatalf("summary %q (err %v) does not show the segments", b.String(), err)
	}
}

// Buyers turned away while segment 0 still had stock are counted: with one
// request in flight, every sold_out answered before the last sale is
// false (requests 2, 4, 6, 8), the ones after it (10, 11, 12) are not.
func TestRunFalseSoldOut(t *testing.T) {
	srv := httptest.NewServer(&fakeStockd{segments: 2, segBug: segFalseSoldOut})
	t.Cleanup(srv.Close)
	r, err := Run(t.Context(), Config{URL: srv.URL, AdminToken: "t", Requests: 12, Concurrency: 1, Stock: 5})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sold != 5 || r.SoldOut != 7 || r.FalseSoldOut != 4 {
		t.Fatalf("got sold %d sold_out %d false sold-out %d, want 5 7 4", r.Sold, r.SoldOut, r.FalseSoldOut)
	}
	if !r.Consistent || r.OK() || r.Verdict() != "FALSE SOLD-OUT" {
		t.Fatalf("got consistent=%v ok=%v verdict %q, want consistent books but FALSE SOLD-OUT", r.Consistent, r.OK(), r.Verdict())
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil || !strings.Contains(b.String(), "false sold-out 4") || !strings.Contains(b.String(), "verdict: FALSE SOLD-OUT") {
		t.Fatalf("summary %q (err %v) does not report the false sold-outs", b.String(), err)
	}
}

// The criterion's boundaries: a sold_out is false only when received
// strictly before a later sale was sent; settled unconfirmed sales count
// as sales, unsettled ones and other outcomes do not.
func TestFalseSoldOuts(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	soldOut := func(recv int) Response {
		return Response{Outcome: OutcomeSoldOut, Sent: at(recv - 1), Received: at(recv)}
	}
	sale := func(o Outcome, sent int, settled bool) Response {
		return Response{Outcome: o, Sent: at(sent), Received: at(sent + 5), Settled: settled}
	}
	for _, tc := range []struct {
		name string
		rs   []Response
		want int
	}{
		{"none sold", []Response{soldOut(1), soldOut(2)}, 0},
		{"sold out after the last sale was sent", []Response{sale(OutcomeSold, 10, false), soldOut(11), soldOut(20)}, 0},
		{"sale sent at the same instant", []Response{soldOut(10), sale(OutcomeSold, 10, false)}, 0},
		{"sale sent just after", []Response{soldOut(10), sale(OutcomeSold, 11, false), soldOut(12)}, 1},
		{"in flight together: sold_out answered after the sale was sent", []Response{sale(OutcomeSold, 10, false), soldOut(11)}, 0},
		{"settled unconfirmed sale", []Response{soldOut(3), soldOut(4), sale(OutcomeUnconfirmed, 5, true)}, 2},
		{"unsettled unconfirmed", []Response{soldOut(3), sale(OutcomeUnconfirmed, 5, false)}, 0},
		{"busy is not a sale", []Response{soldOut(3), sale(OutcomeBusy, 5, false)}, 0},
		{"sold_out never answered (zero time)", []Response{{Outcome: OutcomeSoldOut}, sale(OutcomeSold, 5, false)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := falseSoldOuts(tc.rs); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
			r := Summarize("fake", 10, tc.rs, time.Second, api.Stock{})
			if r.FalseSoldOut != tc.want {
				t.Fatalf("Summarize: got %d, want %d", r.FalseSoldOut, tc.want)
			}
		})
	}
}
