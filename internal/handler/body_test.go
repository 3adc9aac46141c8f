package handler_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"seckill/internal/stock"
)

// serve runs h on a loopback listener, as stockd does, with readTimeout
// as http.read_timeout (0: none), so a test can send what
// httptest.NewRecorder cannot: chunked and trickled bodies.
func serve(t *testing.T, h http.Handler, readTimeout time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadTimeout = readTimeout
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// post sends body to path at srv over a connection of its own, chunked
// (no length declared) or with a Content-Length, and reads the answer.
// It writes beside the read: a refusal comes, and the connection closes,
// before a large body is written, which a client that must finish its
// write first (net/http's) may report as a reset instead.
func post(t *testing.T, srv *httptest.Server, path, body string, chunked bool) (int, map[string]any) {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // a safety bound, never reached when it passes
	req := "POST " + path + " HTTP/1.1\r\nHost: x\r\n"
	if chunked {
		req += fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	} else {
		req += fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
	}
	go func() { _, _ = io.WriteString(c, req) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("POST %s: got %d %q, want a JSON body", path, resp.StatusCode, raw)
	}
	return resp.StatusCode, got
}

// A sale takes no body: one over 4 KiB is refused 413 before the sale,
// declared or chunked, and sells nothing; the small bodies load tools
// send still sell.
func TestSaleBodyBounded(t *testing.T) {
	e := newEnv(t, 10, nil, nil)
	srv := serve(t, e.h, 0)
	big := strings.Repeat("a", 70<<10)
	over := strings.Repeat("a", 4<<10+1)
	for _, tc := range []struct {
		name    string
		body    string
		chunked bool
	}{
		{"chunked 70 KB", big, true},
		{"chunked 4 KiB + 1", over, true},
		{"declared 4 KiB + 1", over, false},
		{"declared 70 KB", big, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(t, srv, "/stock/reduce", tc.body, tc.chunked)
			if code != http.StatusRequestEntityTooLarge || body["error"] != "request body larger than 4096 bytes" || body["replica"] != replica {
				t.Fatalf("got %d %v, want 413 naming the 4096-byte limit", code, body)
			}
			e.wantStock(t, stock.Status{Stock: 10})
		})
	}
	for i, tc := range []struct {
		body    string
		chunked bool
	}{{"{}", true}, {strings.Repeat("a", 4<<10), true}, {"{}", false}} {
		if code, body := post(t, srv, "/stock/reduce", tc.body, tc.chunked); code != http.StatusOK || body["result"] != "sold" {
			t.Fatalf("%d-byte body (chunked %v): got %d %v, want 200 sold", len(tc.body), tc.chunked, code, body)
		}
		e.wantStock(t, stock.Status{Stock: int64(9 - i), Lucky: int64(1 + i)})
	}
}

// An item's sale is bounded as the default sale is.
func TestItemSaleBodyBounded(t *testing.T) {
	e := itemsEnv(t)
	if r := e.admin(t, http.MethodPost, "/items", `{"id":"x","stock":3}`); r.code != http.StatusCreated {
		t.Fatalf("create: got %d %s", r.code, r.raw)
	}
	srv := serve(t, e.h, 0)
	code, body := post(t, srv, "/items/x/reduce", strings.Repeat("a", 70<<10), true)
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked 70 KB: got %d %v, want 413", code, body)
	}
	if r := e.do(t, http.MethodGet, "/items/x", ""); r.body["stock"] != float64(3) || r.body["lucky"] != float64(0) {
		t.Fatalf("after the refused sale: got %s, want stock 3, lucky 0", r.raw)
	}
}

// A body that does not arrive within the read timeout is answered 408
// with a message of its own, not the net error's text (which names the
// server's and the client's socket addresses), and changes nothing: a
// reset and a chunked sale.
func TestTrickledBodyTimesOut(t *testing.T) {
	e := newEnv(t, 5, nil, nil)
	// The read timeout is the fault; it covers the head too, so it is
	// long enough that a busy machine delivers the head before it ends.
	srv := serve(t, e.h, time.Second)
	for _, tc := range []struct{ name, head, part string }{
		{"reset", "POST /stock/reset HTTP/1.1\r\nHost: x\r\nX-Admin-Token: " + token + "\r\nContent-Length: 13\r\n\r\n", `{"stock":`},
		{"chunked sale", "POST /stock/reduce HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", "2\r\n{}\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // a safety bound, never reached when it passes
			// Part of the body, then nothing: the server's read timeout
			// is the event the answer waits on.
			if _, err := io.WriteString(c, tc.head+tc.part); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var body map[string]any
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatalf("got %d %q, want JSON", resp.StatusCode, raw)
			}
			if resp.StatusCode != http.StatusRequestTimeout || body["error"] != "request body not received in time (http.read_timeout)" {
				t.Fatalf("got %d %s, want 408 request body not received in time", resp.StatusCode, raw)
			}
			for _, addr := range []string{c.LocalAddr().String(), c.RemoteAddr().String(), "127.0.0.1", "i/o timeout"} {
				if strings.Contains(string(raw), addr) {
					t.Fatalf("got %s, which shows %q", raw, addr)
				}
			}
			e.wantStock(t, stock.Status{Stock: 5})
		})
	}
}
