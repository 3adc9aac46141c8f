package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/api"
	"seckill/internal/testwait"
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
	// Two reads drawn, at whatever pace the machine allows (a loaded one
	// may read twice between two draws: which counts are drawn is not
	// fixed, only that each is a read's).
	drawn := regexp.MustCompile(`sold (\d+)  left (\d+)/300`)
	wait := testwait.Until(t)
	for len(drawn.FindAllString(out.String(), -1)) < 2 {
		if wait.Err() != nil {
			t.Fatalf("progress %q: never two reads drawn", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	got := out.String()
	after := len(got)
	time.Sleep(60 * time.Millisecond) // nothing may be drawn after stop: a short look suffices
	if len(out.String()) != after {
		t.Fatal("progress still drawing after stop")
	}
	last := 0
	for _, m := range drawn.FindAllStringSubmatch(got, -1) {
		sold, _ := strconv.Atoi(m[1])
		left, _ := strconv.Atoi(m[2])
		if sold+left != 300 || sold%10 != 0 || sold <= last {
			t.Fatalf("progress %q: %q is not a read of the stock after %d sold", got, m[0], last)
		}
		last = sold
	}
	if !strings.HasSuffix(got, "\r\033[K") || strings.Contains(got, "\n") {
		t.Fatalf("progress %q: want lines redrawn in place and the last one erased", got)
	}
}
