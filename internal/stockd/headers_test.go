package stockd

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// head is a request's line and headers, blank line included, of exactly
// size bytes: its padding header fills what the rest leaves; body, if
// any, follows with its Content-Length.
func head(t *testing.T, size int, body string) string {
	t.Helper()
	method, extra := "GET", ""
	if body != "" {
		method, extra = "POST", fmt.Sprintf("Content-Length: %d\r\n", len(body))
	}
	fixed := method + " /x HTTP/1.1\r\nHost: x\r\n" + extra + "X-Pad: \r\n\r\n"
	if size < len(fixed) {
		t.Fatalf("a head of %d bytes cannot hold the %d fixed ones", size, len(fixed))
	}
	h := method + " /x HTTP/1.1\r\nHost: x\r\n" + extra + "X-Pad: " + strings.Repeat("a", size-len(fixed)) + "\r\n\r\n"
	if len(h) != size {
		t.Fatalf("built a head of %d bytes, want %d", len(h), size)
	}
	return h + body
}

// http.max_header_bytes bounds the request line and headers at the bytes
// it says, as the server stockd serves with (newHTTPServer) enforces it:
// net/http alone would take 4 KiB more.
func TestMaxHeaderBytesIsExact(t *testing.T) {
	for _, limit := range []int{16 << 10, 8 << 10} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			cfg := validConfig(t)
			cfg.HTTP.MaxHeaderBytes = limit
			if err := Validate(cfg); err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := newHTTPServer(cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
			}), slog.New(slog.DiscardHandler))
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { _ = srv.Close() })
			cases := []struct {
				name string
				req  string
				want int
			}{
				{"1 KiB under", head(t, limit-1<<10, ""), http.StatusOK},
				{"at the limit", head(t, limit, ""), http.StatusOK},
				{"at the limit, a body after", head(t, limit, strings.Repeat("b", 8<<10)), http.StatusOK},
				{"1 byte over", head(t, limit+1, ""), http.StatusRequestHeaderFieldsTooLarge},
				{"1 KiB over", head(t, limit+1<<10, ""), http.StatusRequestHeaderFieldsTooLarge},
				{"4 KiB over", head(t, limit+4<<10, ""), http.StatusRequestHeaderFieldsTooLarge},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					c, err := net.Dial("tcp", ln.Addr().String())
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // a safety bound
					// A refusal may come before the whole request is written.
					go func() { _, _ = io.WriteString(c, tc.req) }()
					resp, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != tc.want {
						t.Fatalf("got %d, want %d", resp.StatusCode, tc.want)
					}
				})
			}
		})
	}
}
