package handler_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"seckill/internal/handler"
	"seckill/internal/metrics"
	"seckill/internal/stock"
)

// fakeInventory resets nothing real: the admin path is what is under test.
type fakeInventory struct{ resets int }

func (f *fakeInventory) Status(context.Context) (stock.Status, error) { return stock.Status{}, nil }
func (f *fakeInventory) Reset(context.Context, int64) error           { f.resets++; return nil }
func (f *fakeInventory) Ping(context.Context) error                   { return nil }
func (f *fakeInventory) Receipt(context.Context, string) (int64, bool, error) {
	return 0, false, nil
}

// syncBuffer is a log sink safe for the handler's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type adminEnv struct {
	h   http.Handler
	m   *metrics.Metrics
	inv *fakeInventory
	log *syncBuffer
}

func newAdminEnv(t *testing.T, trusted ...string) *adminEnv {
	e := &adminEnv{m: metrics.New(prometheus.Labels{"replica": replica}), inv: &fakeInventory{}, log: &syncBuffer{}}
	e.h = handler.New(handler.Config{Replica: replica, AdminToken: token, TrustedProxies: trusted},
		handler.Deps{Seller: sellerFunc(nil), Inventory: e.inv, Metrics: e.m, Logger: slog.New(slog.NewTextHandler(e.log, nil))})
	return e
}

// reset sends POST /stock/reset from peer with tok and extra headers.
func (e *adminEnv) reset(peer, tok string, headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/stock/reset", strings.NewReader(`{"stock":5}`))
	req.RemoteAddr = peer + ":4321"
	req.Header.Set("X-Admin-Token", tok)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

func (e *adminEnv) failures(t *testing.T) float64 {
	t.Helper()
	families, err := e.m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "seckill_admin_auth_failures_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// With no trusted proxy (the default) X-Forwarded-For and X-Real-IP are
// ignored: the audit log names the peer. Behind a trusted proxy the
// address it appends is the client.
func TestClientAddressIgnoresForgedHeaders(t *testing.T) {
	const peer = "203.0.113.5"
	e := newAdminEnv(t)
	if rec := e.reset(peer, token, "X-Forwarded-For", "10.9.9.9, 127.0.0.1", "X-Real-IP", "6.6.6.6"); rec.Code != http.StatusOK {
		t.Fatalf("got %d, want 200", rec.Code)
	}
	if logs := e.log.String(); !strings.Contains(logs, "remote="+peer) || strings.Contains(logs, "10.9.9.9") || strings.Contains(logs, "6.6.6.6") {
		t.Fatalf("reset log should name the peer %s, not a forged address:\n%s", peer, logs)
	}
	proxied := newAdminEnv(t, "127.0.0.1")
	if rec := proxied.reset("127.0.0.1", token, "X-Forwarded-For", "6.6.6.6, 198.51.100.7"); rec.Code != http.StatusOK {
		t.Fatalf("got %d, want 200", rec.Code)
	}
	if logs := proxied.log.String(); !strings.Contains(logs, "remote=198.51.100.7") {
		t.Fatalf("behind a trusted proxy the log should name the address it appended (198.51.100.7):\n%s", logs)
	}
}
