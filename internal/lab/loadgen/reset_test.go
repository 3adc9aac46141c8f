package loadgen

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// resetServer answers POST /stock/reset with status for the first fails
// sends and 200 after, counting the sends.
func resetServer(t *testing.T, status, fails int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var sends atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/stock/reset" {
			http.NotFound(w, r)
			return
		}
		if int(sends.Add(1)) <= fails {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error":"reset not acknowledged by enough replicas in time (stock.min_replica_acks); a failover could bring back the old sale: reset again"}`))
			return
		}
		_, _ = w.Write([]byte(`{"stock":10,"lucky":0}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &sends
}

// A 503 is the handler's "reset again": Reset sends it again, a bounded
// number of times; any other failure is final at once.
func TestResetSendsAgainOn503(t *testing.T) {
	defer func(p time.Duration) { resetPause = p }(resetPause)
	resetPause = time.Millisecond
	ctx := context.Background()

	srv, sends := resetServer(t, http.StatusServiceUnavailable, 2)
	if err := Reset(ctx, srv.Client(), srv.URL, "tok", 10); err != nil {
		t.Fatalf("two 503s then 200: %v", err)
	}
	if got := sends.Load(); got != 3 {
		t.Errorf("two 503s then 200: %d sends, want 3", got)
	}

	srv, sends = resetServer(t, http.StatusServiceUnavailable, 100)
	err := Reset(ctx, srv.Client(), srv.URL, "tok", 10)
	if !errors.Is(err, ErrBadResponse) || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "reset again") {
		t.Errorf("503 every time: got %v, want ErrBadResponse naming the 503 and its message", err)
	}
	if got := sends.Load(); got != int32(resetSends) {
		t.Errorf("503 every time: %d sends, want %d", got, resetSends)
	}

	srv, sends = resetServer(t, http.StatusBadRequest, 100)
	if err := Reset(ctx, srv.Client(), srv.URL, "tok", 10); !errors.Is(err, ErrBadResponse) {
		t.Errorf("400: got %v, want ErrBadResponse", err)
	}
	if got := sends.Load(); got != 1 {
		t.Errorf("400: %d sends, want 1", got)
	}

	// A canceled ctx ends the pause: with an hour's pause, Reset returns
	// at all only because it stopped waiting, and it sends no more.
	resetPause = time.Hour
	srv, sends = resetServer(t, http.StatusServiceUnavailable, 100)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	time.AfterFunc(20*time.Millisecond, cancel)
	if err := Reset(cctx, srv.Client(), srv.URL, "tok", 10); err == nil {
		t.Error("canceled: got nil, want an error")
	}
	if got := sends.Load(); got > 1 {
		t.Errorf("canceled in the pause: %d sends, want at most 1", got)
	}
}
