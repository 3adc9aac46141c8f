package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/api"
)

// Progress is drawn only on a terminal: a buffer, a file or a pipe (CI logs,
// `| jq`) get the report alone.
func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, out := range map[string]io.Writer{"buffer": &bytes.Buffer{}, "file": f, "pipe": w} {
		if isTerminal(out) {
			t.Errorf("%s taken for a terminal", name)
		}
	}
}

// The progress line shows what GET /stock says, is redrawn in place, and
// is erased by stop, which returns only once drawing has ended.
func TestProgressLine(t *testing.T) {
	var lucky atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := lucky.Add(10)
		_ = json.NewEncoder(w).Encode(api.Stock{Stock: 300 - n, Lucky: n})
	}))
	defer srv.Close()
	var out lockedBuffer
	stop := startProgress(t.Context(), &out, srv.URL, 300, 20*time.Millisecond)
	time.Sleep(120 * time.Millisecond)
	stop()
	got := out.String()
	after := len(got)
	time.Sleep(60 * time.Millisecond)
	if len(out.String()) != after {
		t.Fatal("progress still drawing after stop")
	}
	if !strings.Contains(got, "sold 10  left 290/300") || !strings.Contains(got, "sold 20  left 280/300") {
		t.Fatalf("progress %q lacks the stock read back", got)
	}
	if !strings.HasSuffix(got, "\r\033[K") || strings.Contains(got, "\n") {
		t.Fatalf("progress %q: want lines redrawn in place and the last one erased", got)
	}
}
