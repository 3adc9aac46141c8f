package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"seckill/internal/api"
)

// busyFake answers each buyer (vegeta's sequence header names it) busy,
// with Retry-After retryAfter, for its first busyFor sends, then sells.
type busyFake struct {
	busyFor    int
	retryAfter string

	mu    sync.Mutex
	sends map[string]int
	sold  int
}

func (f *busyFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seq := r.Header.Get(seqHeader)
	f.sends[seq]++
	if f.sends[seq] <= f.busyFor {
		w.Header().Set("Retry-After", f.retryAfter)
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(api.Sale{Result: api.Busy})
		return
	}
	f.sold++
	left := int64(1000 - f.sold)
	_ = json.NewEncoder(w).Encode(api.Sale{Result: api.Sold, Stock: &left})
}

// A buyer answered busy sends again after Retry-After, up to RetryBusy
// times: its answer is the last one, and the re-sends are counted.
func TestOpenLoopRetriesBusy(t *testing.T) {
	for _, tc := range []struct {
		busyFor, retry int
		want           Outcome
	}{
		{2, 2, OutcomeSold}, // sold on the third send
		{2, 1, OutcomeBusy}, // gave up busy after one re-send
		{0, 3, OutcomeSold}, // never busy: never re-sent
	} {
		t.Run(strconv.Itoa(tc.busyFor)+"-"+strconv.Itoa(tc.retry), func(t *testing.T) {
			f := &busyFake{busyFor: tc.busyFor, retryAfter: "0", sends: map[string]int{}}
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			cfg := OpenConfig{Rate: 100, Duration: 200 * time.Millisecond, RetryBusy: tc.retry}
			responses := FireOpen(t.Context(), srv.URL, nil, cfg)
			o := SummarizeOpen(responses, cfg)
			resends := min(tc.busyFor, tc.retry)
			if len(responses) != 20 || o.Resent != 20*resends || o.RetryBusy != tc.retry || (resends > 0) != (o.BuyersResent == 20) {
				t.Fatalf("got %d buyers, %d re-sends by %d buyers; want 20, %d by all or none", len(responses), o.Resent, o.BuyersResent, 20*resends)
			}
			for _, r := range responses {
				if r.Outcome != tc.want || r.BusyResends != resends {
					t.Fatalf("a buyer got %v after %d re-sends, want %v after %d", r.Outcome, r.BusyResends, tc.want, resends)
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if want := 20 * (1 + resends); sumSends(f.sends) != want {
				t.Fatalf("the server got %d sends, want %d", sumSends(f.sends), want)
			}
		})
	}
}

// The wait is the answer's Retry-After: a buyer whose request timeout
// ends within it does not wait, and its answer is the busy one (the server
// answered it), not a timeout; a buyer whose bound fits the wait and a
// send after it sends again.
func TestOpenLoopRetryBusyHonoursRetryAfter(t *testing.T) {
	// Both bounds are long: each first reply must come within them, on a
	// loaded machine too; only the Retry-After decides whether it fits.
	for _, tc := range []struct {
		name       string
		retryAfter string
		timeout    time.Duration
		sends      int // per buyer
		result     string
	}{
		{"wait past the bound", "60", 10 * time.Second, 1, string(api.Busy)},
		// The wait fits, but a send after it would have under a tenth
		// of the bound: not sent, so never left unanswered.
		{"no time for a send after the wait", "9", 10 * time.Second, 1, string(api.Busy)},
		{"wait within it", "1", 20 * time.Second, 2, string(api.Sold)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &busyFake{busyFor: 1, retryAfter: tc.retryAfter, sends: map[string]int{}}
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			cfg := OpenConfig{Rate: 50, Duration: 100 * time.Millisecond, RetryBusy: 1, RequestTimeout: tc.timeout}
			responses := FireOpen(t.Context(), srv.URL, nil, cfg)
			o := SummarizeOpen(responses, cfg)
			if len(responses) != 5 || o.Unanswered != 0 || o.Result(tc.result).Count != 5 {
				t.Fatalf("got %d buyers, %d unanswered (%v), results %v; want 5, all %s", len(responses), o.Unanswered, o.UnansweredBy, o.Results, tc.result)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if sumSends(f.sends) != 5*tc.sends {
				t.Fatalf("the server got %d sends, want %d", sumSends(f.sends), 5*tc.sends)
			}
		})
	}
}

func sumSends(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// Re-sends on busy are the open loop's: a closed loop refuses them.
func TestRetryBusyNeedsTheOpenLoop(t *testing.T) {
	if _, err := Run(t.Context(), Config{URL: "http://127.0.0.1:1", RetryBusy: 1}); !errors.Is(err, ErrConfig) {
		t.Fatalf("got %v, want ErrConfig", err)
	}
	if err := (OpenConfig{Rate: 1, Duration: time.Second, RetryBusy: MaxRetryBusy + 1}).validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("got %v, want ErrConfig", err)
	}
}

// A request with no answer once it may have reached a replica may have
// sold: the books may hold that many units more than were told, never
// more; one refused at connect never reached a replica.
func TestSummarizeCountsRequestsInDoubt(t *testing.T) {
	sold := Response{Outcome: OutcomeSold, Status: http.StatusOK}
	timedOut := Response{Outcome: OutcomeError, Err: fmt.Errorf("%w after 10s", context.DeadlineExceeded)}
	refused := Response{Outcome: OutcomeError, Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}
	responses := []Response{sold, sold, sold, timedOut, timedOut, refused}
	for _, tc := range []struct {
		lucky int64
		want  bool
	}{{3, true}, {5, true}, {6, false}, {2, false}} {
		r := Summarize("fake", 10, responses, time.Second, api.Stock{Stock: 10 - tc.lucky, Lucky: tc.lucky})
		if r.InDoubt != 2 || r.Consistent != tc.want {
			t.Errorf("lucky %d: got %d in doubt, consistent %v; want 2, %v", tc.lucky, r.InDoubt, r.Consistent, tc.want)
		}
	}
}
