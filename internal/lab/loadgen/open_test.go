package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"seckill/internal/api"
	"seckill/internal/testwait"
)

// openFake is a seckill for the open loop: it sells a fixed stock, then
// answers sold_out; every dropEvery-th sale request has its connection
// closed before anything is sold; a sale that sells takes soldDelay; from
// the stallAt-th request on it stalls every request for stallFor and
// counts the requests that arrive meanwhile.
type openFake struct {
	dropEvery int
	soldDelay time.Duration
	stallAt   int
	stallFor  time.Duration

	mu           sync.Mutex
	stock, lucky int64
	arrivals     int
	stallEnd     time.Time
	duringStall  int
}

func (f *openFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(code int, v any) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch r.URL.Path {
	case "/stock/reset":
		var body api.Reset
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.stock, f.lucky, f.arrivals = body.Stock, 0, 0
		f.mu.Unlock()
		reply(http.StatusOK, api.Stock{Stock: body.Stock})
	case "/info":
		reply(http.StatusOK, api.Info{From: api.From{Replica: "fake-1"}, Backend: "fake"})
	case "/stock":
		f.mu.Lock()
		defer f.mu.Unlock()
		reply(http.StatusOK, api.Stock{Stock: f.stock, Lucky: f.lucky})
	case "/stock/reduce":
		f.reduce(w, reply)
	default:
		http.NotFound(w, r)
	}
}

func (f *openFake) reduce(w http.ResponseWriter, reply func(int, any)) {
	f.mu.Lock()
	f.arrivals++
	now := time.Now()
	if f.arrivals == f.stallAt {
		f.stallEnd = now.Add(f.stallFor)
	}
	stallEnd := f.stallEnd
	if now.Before(stallEnd) {
		f.duringStall++
	}
	if f.dropEvery > 0 && f.arrivals%f.dropEvery == 0 {
		f.mu.Unlock()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close() // no status, nothing sold
		}
		return
	}
	sold := f.stock > 0
	var left int64
	if sold {
		f.stock--
		f.lucky++
		left = f.stock
	}
	f.mu.Unlock()
	time.Sleep(time.Until(stallEnd))
	if !sold {
		reply(http.StatusConflict, api.Sale{Result: api.SoldOut, From: api.From{Replica: "fake-1"}})
		return
	}
	time.Sleep(f.soldDelay)
	reply(http.StatusOK, api.Sale{Result: api.Sold, Stock: &left, From: api.From{Replica: "fake-1"}})
}

func (f *openFake) stalled() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.duringStall
}

// everyArrival is OpenConfig.Late for a test that counts every planned
// buyer: a loaded machine's pacer falls seconds behind (measured: 51 of
// 300 arrivals past LateArrivals under stress-ng), and those would not be
// sent. An idle one sends them all on time, so it costs nothing there.
const everyArrival = 30 * time.Second

// Buyers keep arriving while the server stalls: an open loop at 200/s
// starts about 200 × 0.6 = 120 requests during a 600 ms stall, where the
// closed loop with 10 in flight starts at most its 10, then waits.
func TestOpenLoopKeepsArrivingThroughAStall(t *testing.T) {
	const rate, stall = 200, 600 * time.Millisecond
	open := &openFake{stallAt: 40, stallFor: stall, stock: 1000}
	srv := httptest.NewServer(open)
	t.Cleanup(srv.Close)
	rs := FireOpen(t.Context(), srv.URL+"/stock/reduce", nil, OpenConfig{Rate: rate, Duration: 1500 * time.Millisecond, RequestTimeout: 5 * time.Second, Late: everyArrival})
	if want := int(0.5 * rate * stall.Seconds()); open.stalled() < want {
		t.Errorf("open loop: %d requests arrived during the %v stall, want at least %d (rate %d/s)", open.stalled(), stall, want, rate)
	}
	if len(rs) != 300 {
		t.Errorf("open loop: %d responses, want 300 (200/s for 1.5s)", len(rs))
	}
	for _, r := range rs {
		if r.Outcome != OutcomeSold {
			t.Fatalf("open loop: an answer %+v, want every one sold", r)
		}
	}

	closed := &openFake{stallAt: 40, stallFor: stall, stock: 1000}
	csrv := httptest.NewServer(closed)
	t.Cleanup(csrv.Close)
	Fire(t.Context(), NewClient(10, 5*time.Second), csrv.URL+"/stock/reduce", 300, 10)
	if closed.stalled() > 10 {
		t.Errorf("closed loop: %d requests arrived during the stall, want at most its 10 in flight", closed.stalled())
	}
	t.Logf("arrived during a %v stall: open loop %d, closed loop %d", stall, open.stalled(), closed.stalled())
}

// A whole open-loop run: the dropped connections are buyers left
// unanswered, apart from errors; sold and sold_out have their own
// latencies; the books are the closed loop's verdict. A sale takes far
// longer than a sold_out answer (soldDelay against none), so that a loaded
// machine (CI runs packages side by side under -race) never brings a
// sold_out's median up to it: the latency check tells the two apart, not
// how fast the machine is.
func TestOpenLoopRun(t *testing.T) {
	const soldDelay = 400 * time.Millisecond
	srv := httptest.NewServer(&openFake{dropEvery: 10, soldDelay: soldDelay})
	t.Cleanup(srv.Close)
	r, err := Run(t.Context(), Config{URL: srv.URL, AdminToken: "t", Stock: 100, Rate: 200, Duration: 1500 * time.Millisecond, RequestTimeout: 5 * time.Second, Late: everyArrival})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	o := r.Open
	if o == nil {
		t.Fatalf("no open-loop report:\n%s", text.String())
	}
	if o.Planned != 300 || o.Sent != 300 || r.Requests != 300 || o.Answered != 270 {
		t.Errorf("planned %d, sent %d, requests %d, answered %d; want 300, 300, 300, 270:\n%s", o.Planned, o.Sent, r.Requests, o.Answered, text.String())
	}
	if o.Unanswered != 30 || o.UnansweredBy[CauseReset] != 30 || r.Errors != 0 {
		t.Errorf("unanswered %d %v, errors %d; want 30 reset, 0 errors:\n%s", o.Unanswered, o.UnansweredBy, r.Errors, text.String())
	}
	if r.Sold != 100 || r.SoldOut != 170 || !r.Consistent || !r.OK() || r.Verdict() != "consistent" {
		t.Errorf("sold %d, sold out %d, verdict %q; want 100, 170, consistent:\n%s", r.Sold, r.SoldOut, r.Verdict(), text.String())
	}
	sold, soldOut := o.Result("sold"), o.Result("sold_out")
	if sold.Count != 100 || soldOut.Count != 170 || o.Result(ResultUnanswered).Count != 30 {
		t.Errorf("results %+v, want sold 100, sold_out 170, unanswered 30", o.Results)
	}
	if sold.P50ms < ms(soldDelay) || soldOut.P50ms >= ms(soldDelay) {
		t.Errorf("p50 sold %.1f ms, sold_out %.1f ms; want sold at least the sale's %v and sold_out below it", sold.P50ms, soldOut.P50ms, soldDelay)
	}
	if o.SentRate < 150 || o.SentRate > 250 {
		t.Errorf("sent at %.0f/s, want about 200/s", o.SentRate)
	}
	for _, want := range []string{"open loop, 200 buyers/s for 1.5s: 300 of 300 buyers sent", "unanswered 30 of 300 buyers: reset 30", "verdict: consistent"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, text.String())
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Open *OpenLoop `json:"open_loop"`
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Open == nil || back.Open.Unanswered != 30 || len(back.Open.Results) != 3 {
		t.Errorf("JSON open_loop = %+v (%v), want the same report: %s", back.Open, err, b)
	}
	t.Logf("\n%s", text.String())
}

// The run's own bound (Config.Timeout) cuts an open loop like a closed
// one: ErrTimeout, and the buyers in flight then are unanswered, cut.
func TestOpenLoopRunTimeout(t *testing.T) {
	srv := httptest.NewServer(&openFake{soldDelay: time.Second})
	t.Cleanup(srv.Close)
	r, err := Run(t.Context(), Config{URL: srv.URL, Stock: 1000, Rate: 100, Duration: 2 * time.Second, Timeout: 300 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) || r == nil || !r.TimedOut {
		t.Fatalf("got %v, want ErrTimeout with a report", err)
	}
	if o := r.Open; o.Sent == 0 || o.Sent >= 100 || o.UnansweredBy[CauseCut] != o.Sent {
		t.Fatalf("sent %d, unanswered %v; want some of 200 sent, every one cut", o.Sent, o.UnansweredBy)
	}
}

// With named buyers each arrival is the next purchase, and the verdict
// against the ledger holds: every answer is matched to its own buyer and
// key, though vegeta sends them from many workers in any order.
func TestOpenLoopBuyers(t *testing.T) {
	srv := httptest.NewServer(&ledgerStockd{limit: 1, page: 500})
	t.Cleanup(srv.Close)
	r, err := Run(t.Context(), Config{URL: srv.URL, Stock: 60, Rate: 200, Duration: 500 * time.Millisecond, Users: 80})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	_ = r.WriteText(&text)
	b := r.Buyers
	if b == nil || !r.OK() || b.Purchases != 100 || b.Orders != 60 || b.LimitReached == 0 || r.Open.Unanswered != 0 {
		t.Fatalf("want a consistent sale of 100 purchases, 60 orders, some limit_reached, none unanswered:\n%s", text.String())
	}
	if _, err := Run(t.Context(), Config{URL: srv.URL, Rate: 100, Duration: time.Second, Users: 10, RetryRate: 0.2}); !errors.Is(err, ErrConfig) {
		t.Fatalf("a retry rate with an open loop: got %v, want ErrConfig", err)
	}
}

// The run ends by itself within its duration and request timeout, even
// when nothing answers and the in-flight cap is reached: the buyers then
// waiting for a worker are not sent, and the ones sent time out.
func TestOpenLoopEndsInTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers
	}))
	t.Cleanup(srv.Close)
	for _, maxInFlight := range []int{0, 5} {
		cfg := OpenConfig{Rate: 50, Duration: 500 * time.Millisecond, RequestTimeout: 300 * time.Millisecond, MaxInFlight: maxInFlight}
		// Ending by itself is every request ending by its own timeout:
		// a run that did not would be cut at the test's deadline, its
		// requests counted as cut, not timed out. How long it took is
		// only noted.
		start := time.Now()
		rs := FireOpen(testwait.Until(t), srv.URL, nil, cfg)
		took := time.Since(start)
		o := SummarizeOpen(rs, cfg)
		note := ""
		if bound := cfg.Duration + LateArrivals + cfg.RequestTimeout + time.Second; took > bound {
			note = fmt.Sprintf(" (SLOW: over %v)", bound)
		}
		t.Logf("cap %d: the run took %v%s", maxInFlight, took.Round(time.Millisecond), note)
		if o.Unanswered != o.Sent || o.UnansweredBy[CauseTimeout] != o.Sent {
			t.Errorf("cap %d: %d sent, unanswered %v; want every one timed out", maxInFlight, o.Sent, o.UnansweredBy)
		}
		switch {
		case maxInFlight == 0 && o.Sent != 25:
			t.Errorf("no cap: %d sent, want 25", o.Sent)
		case maxInFlight == 5 && (o.Sent >= 25 || o.PeakInFlight > 5):
			t.Errorf("cap 5: %d sent, peak %d in flight; want fewer than 25 and at most 5", o.Sent, o.PeakInFlight)
		}
	}

	// Cancelled: no more arrivals, and the requests in flight are cut.
	// Without the cancellation the run would last its duration, its
	// requests their timeout: both long, so that a run that waited for
	// either cannot pass for a slow machine. Nothing waits for them when
	// the cancellation is honoured.
	cfg := OpenConfig{Rate: 50, Duration: 30 * time.Second, RequestTimeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	rs := FireOpen(ctx, srv.URL, nil, cfg)
	if took := time.Since(start); took >= min(cfg.Duration, cfg.RequestTimeout) {
		t.Errorf("cancelled after 200ms: took %v, as long as the run's duration (%v) or its requests' timeout (%v)", took, cfg.Duration, cfg.RequestTimeout)
	}
	o := SummarizeOpen(rs, cfg)
	if o.Sent == 0 || o.Sent > 20 || o.UnansweredBy[CauseCut] != o.Sent {
		t.Errorf("cancelled after 200ms: %d sent, unanswered %v; want a few, every one cut", o.Sent, o.UnansweredBy)
	}
}

// Each result has its own percentiles, computed over its own answers.
func TestSummarizeOpenPerResult(t *testing.T) {
	t0 := time.Now()
	var rs []Response
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 10 * time.Millisecond) }
	for i := range 100 { // sold: 1..100 ms
		rs = append(rs, Response{Outcome: OutcomeSold, Status: 200, Latency: time.Duration(i+1) * time.Millisecond, Sent: at(i)})
	}
	for i := range 10 { // sold_out: 1000..1009 ms
		rs = append(rs, Response{Outcome: OutcomeSoldOut, Status: 409, Latency: time.Duration(1000+i) * time.Millisecond, Sent: at(100 + i)})
	}
	rs = append(rs,
		Response{Outcome: OutcomeError, Status: 502, Latency: 3 * time.Millisecond, Sent: at(110), Err: errors.New("bad gateway")},
		Response{Err: fmt.Errorf("post: %w", context.DeadlineExceeded), Latency: 5 * time.Second, Sent: at(111)},
		Response{Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, Latency: time.Millisecond, Sent: at(112)},
	)
	o := SummarizeOpen(rs, OpenConfig{Rate: 100, Duration: 2 * time.Second})
	want := []ResultStats{
		{"sold", 100, 50, 99},
		{"sold_out", 10, 1004, 1009},
		{"error", 1, 3, 3},
		{"unanswered", 2, 1, 5000},
	}
	if fmt.Sprint(o.Results) != fmt.Sprint(want) {
		t.Errorf("results %v, want %v", o.Results, want)
	}
	if o.Sent != 113 || o.Answered != 111 || o.Unanswered != 2 || o.UnansweredBy[CauseTimeout] != 1 || o.UnansweredBy[CauseRefused] != 1 {
		t.Errorf("sent %d, answered %d, unanswered %d %v; want 113, 111, 2 (timeout 1, refused 1)", o.Sent, o.Answered, o.Unanswered, o.UnansweredBy)
	}
	if o.Planned != 200 || o.SentRate < 99.9 || o.SentRate > 100.1 {
		t.Errorf("planned %d, sent at %.2f/s; want 200, 100/s", o.Planned, o.SentRate)
	}
	// Sent 10 ms apart: the ten sold_out answers (a second each) overlap
	// one another and the two unanswered; the sold ones overlap nothing.
	if o.PeakInFlight != 12 {
		t.Errorf("peak in flight %d, want 12", o.PeakInFlight)
	}
}

func TestUnansweredCause(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("post: %w", context.DeadlineExceeded), CauseTimeout},
		{fmt.Errorf("post: %w", context.Canceled), CauseCut},
		{fmt.Errorf("%w: %w", errCut, context.DeadlineExceeded), CauseCut},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, CauseRefused},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, CauseReset},
		{fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", io.EOF), CauseReset},
		{io.ErrUnexpectedEOF, CauseReset},
		{errors.New("something else"), CauseOther},
	} {
		if got := unansweredCause(tc.err); got != tc.want {
			t.Errorf("unansweredCause(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestOpenConfigValidate(t *testing.T) {
	for _, c := range []OpenConfig{
		{Rate: 0, Duration: time.Second},
		{Rate: -1, Duration: time.Second},
		{Rate: MaxRate + 1, Duration: time.Second},
		{Rate: 10, Duration: 0},
		{Rate: 10, Duration: MaxDuration + time.Second},
		{Rate: MaxRate, Duration: MaxDuration},
	} {
		if err := c.validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want ErrConfig", c, err)
		}
	}
	if c := (OpenConfig{Rate: 3, Duration: 500 * time.Millisecond}); c.validate() != nil || c.Planned() != 2 {
		t.Errorf("3/s for 500ms: %v, planned %d; want valid, 2", c.validate(), c.Planned())
	}
}
