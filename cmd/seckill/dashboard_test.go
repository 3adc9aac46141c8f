package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"seckill/internal/api"
	"seckill/internal/lab/dashboard"
	"seckill/internal/testwait"
)

// lockedBuffer is an io.Writer the command and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// seckill dashboard prints the URL it listens on (a free loopback port by
// default), serves the state of the replicas it was given, and exits 0 when
// interrupted.
func TestDashboardCmd(t *testing.T) {
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/stock":
			_ = json.NewEncoder(w).Encode(api.Stock{Stock: 42, From: api.From{Replica: "stockd-1"}})
		case "/info":
			_ = json.NewEncoder(w).Encode(api.Info{Backend: "redis", From: api.From{Replica: "stockd-1"}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer replica.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"dashboard", "--replicas", replica.URL, "--interval", "50ms"}, &stdout, &stderr)
	}()

	until := testwait.Until(t) // the URL, the state and the stop must come
	re := regexp.MustCompile(`dashboard: (http://127\.0\.0\.1:\d+/)`)
	var url string
	for url == "" {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
		} else if until.Err() != nil {
			t.Fatalf("no URL printed; stdout %q stderr %q", stdout.String(), stderr.String())
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	var st dashboard.State
	for st.Books.Stock != 42 || st.Backend != "redis" {
		if until.Err() != nil {
			t.Fatalf("state never showed stock 42 on redis: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
		resp, err := http.Get(url + "api/state")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	select {
	case c := <-code:
		if c != exitOK {
			t.Fatalf("exit %d, want 0; stderr %q", c, stderr.String())
		}
	case <-until.Done():
		t.Fatal("seckill dashboard did not stop when interrupted")
	}
}

func TestDashboardCmdRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"dashboard", "--replicas", "127.0.0.1:8081"},
		{"dashboard", "--segments", "0"},
		{"dashboard", "--listen", "256.0.0.1:x"},
	} {
		var out bytes.Buffer
		if c := run(t.Context(), args, &out, &out); c != exitFailure {
			t.Errorf("%q: exit %d, want %d (%s)", args, c, exitFailure, out.String())
		}
	}
}
