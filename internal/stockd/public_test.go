package stockd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/stockd/stockdtest"
	"seckill/internal/testwait"
)

// These tests hold the public surface of a real stockd (the binary, against
// a real Redis) to its limits: idle and capped connections,
// header and body bounds.

var testAdminToken = stockdtest.AdminToken

// exitConfig is cmd/stockd's exit status for a configuration it refuses.
const exitConfig = 2

func stockdBinary(t *testing.T) string { return stockdtest.Binary(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	stopMariaDB()
	stockdtest.Cleanup()
	os.Exit(code)
}

func send(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// startStockd runs the stockd binary on a loopback port against a fresh
// Redis, with env (KEY=VALUE) over a minimal valid configuration, and waits
// until /readyz answers 200.
func startStockd(t *testing.T, env ...string) *servers.Process {
	t.Helper()
	return startStockdOn(t, servertest.Redis(t), env...)
}

// startStockdOn is startStockd on the Redis rds, which the test may read
// and write too.
func startStockdOn(t *testing.T, rds *servers.Process, env ...string) *servers.Process {
	t.Helper()
	bin := stockdBinary(t)
	addr, err := servers.LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	base := []string{
		"STOCKD_REDIS_ADDR=" + rds.Addr(),
		"STOCKD_HTTP_ADDR=" + addr,
		"STOCKD_ADMIN_TOKEN=" + testAdminToken,
		"STOCKD_REPLICA=public-test",
	}
	p, err := servers.Start(t.Context(), servers.Spec{
		Name: "stockd", Path: bin, Env: append(base, env...), Dir: t.TempDir(), Addr: addr,
		Ready: servers.HTTPReady("/readyz"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
	return p
}

// rawConn opens a TCP connection with a safety deadline: a test that waits
// for the server to close it fails rather than hangs if it never does.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// roundTrip writes raw request bytes and reads one response.
func roundTrip(c net.Conn, br *bufio.Reader, raw string) (*http.Response, string, error) {
	if _, err := io.WriteString(c, raw); err != nil {
		return nil, "", err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body), err
}

// closedByServer reports whether the server closed c: a read returns EOF (or
// a reset) before the safety deadline.
func closedByServer(br *bufio.Reader) error {
	_, err := br.ReadByte()
	switch {
	case err == nil:
		return errors.New("got data, want the connection closed")
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errors.New("still open at the safety deadline")
	default:
		return nil // io.EOF, or a reset: closed
	}
}

func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

// Finding 1: keep-alive connections that go silent are closed after
// http.idle_timeout, and the process's descriptors return to where they were.
func TestIdleConnectionsAreClosed(t *testing.T) {
	const conns = 200
	p := startStockd(t, "STOCKD_HTTP_IDLE_TIMEOUT=500ms")
	before := openFDs(t, p.Pid())

	readers := make([]*bufio.Reader, conns)
	for i := range conns {
		c := rawConn(t, p.Addr())
		readers[i] = bufio.NewReader(c)
		resp, _, err := roundTrip(c, readers[i], "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("conn %d: got %v %v, want 200", i, resp, err)
		}
	}
	peak := openFDs(t, p.Pid())
	if peak < before+conns {
		t.Fatalf("got %d descriptors with %d connections open, want at least %d", peak, conns, before+conns)
	}
	var wg sync.WaitGroup
	errs := make([]error, conns)
	for i, br := range readers {
		wg.Go(func() { errs[i] = closedByServer(br) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("idle connections not closed: %v", err)
	}
	after := openFDs(t, p.Pid())
	t.Logf("descriptors: %d before, %d with %d idle connections, %d after idle_timeout", before, peak, conns, after)
	if after > before+5 {
		t.Fatalf("got %d descriptors after every idle connection was closed, want about %d", after, before)
	}
}

// Finding 1: http.max_conns caps the connections served at once; the next
// one is served as soon as a slot frees.
func TestConnectionCap(t *testing.T) {
	const limit = 4
	p := startStockd(t, fmt.Sprintf("STOCKD_HTTP_MAX_CONNS=%d", limit))
	// The readiness probe's keep-alive connection holds a slot until closed.
	http.DefaultClient.CloseIdleConnections()
	held := make([]net.Conn, limit)
	for i := range held {
		held[i] = rawConn(t, p.Addr())
		if resp, _, err := roundTrip(held[i], bufio.NewReader(held[i]), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("conn %d: got %v %v, want 200", i, resp, err)
		}
	}
	extra := rawConn(t, p.Addr()) // the kernel accepts it; stockd does not serve it yet
	if _, err := io.WriteString(extra, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(extra), nil)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		answered <- err
	}()
	// Absence can only be observed over time: the over-cap connection must
	// not be served while every slot is held.
	select {
	case err := <-answered:
		t.Fatalf("connection %d was served while %d were held (err %v)", limit+1, limit, err)
	case <-testwait.MustNotWithin(300 * time.Millisecond):
	}
	_ = held[0].Close()
	if err := <-answered; err != nil {
		t.Fatalf("connection %d after a slot freed: %v", limit+1, err)
	}
}

// Finding 2: headers are bounded by http.max_header_bytes (16 KiB by
// default): one huge header or thousands of small ones get 431.
func TestLargeHeadersRefused(t *testing.T) {
	p := startStockd(t)
	many := strings.Repeat("X-A: b\r\n", 10000)
	cases := []struct {
		name    string
		headers string
		want    int
	}{
		{"8 KiB header", "X-Big: " + strings.Repeat("a", 8<<10) + "\r\n", http.StatusOK},
		{"64 KiB header", "X-Big: " + strings.Repeat("a", 64<<10) + "\r\n", http.StatusRequestHeaderFieldsTooLarge},
		{"900 KiB header", "X-Big: " + strings.Repeat("a", 900<<10) + "\r\n", http.StatusRequestHeaderFieldsTooLarge},
		{"10000 headers", many, http.StatusRequestHeaderFieldsTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := rawConn(t, p.Addr())
			// The server may answer 431 and close before the whole request
			// is written: write in the background, read the answer here.
			go func() { _, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n"+tc.headers+"\r\n") }()
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
	// The documented bound is the binary's to the byte: net/http alone
	// would let 4 KiB more through (up to about 20.5 KB). /x is no route:
	// its 404 is stockd's answer, past the server's header check.
	for _, tc := range []struct {
		name string
		size int
		want int
	}{
		{"16 KiB head", 16 << 10, http.StatusNotFound},
		{"16 KiB and 1 byte", 16<<10 + 1, http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, req := rawConn(t, p.Addr()), head(t, tc.size, "")
			go func() { _, _ = io.WriteString(c, req) }()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("a head of %d bytes: got %d, want %d", tc.size, resp.StatusCode, tc.want)
			}
		})
	}
}

// Finding 3: a body can hold a connection no longer than it takes to refuse
// it: an oversized declared body gets 413 at once, an unauthorised reset is
// answered without draining, and a trickled body is cut at
// http.read_timeout.
func TestSlowBodiesAreCut(t *testing.T) {
	p := startStockd(t, "STOCKD_HTTP_READ_TIMEOUT=1s", "STOCKD_HTTP_READ_HEADER_TIMEOUT=1s")
	cases := []struct {
		name, req string
		want      int
	}{
		{"declared body over the limit", "POST /stock/reset HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n{", http.StatusRequestEntityTooLarge},
		{"reset without token", "POST /stock/reset HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"stock\":", http.StatusUnauthorized},
		// No sale was reset: the answer is store_lost, sent without
		// waiting for the body.
		{"sale with a trickled body", "POST /stock/reduce HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab", http.StatusServiceUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := rawConn(t, p.Addr())
			br := bufio.NewReader(c)
			resp, body, err := roundTrip(c, br, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tc.want)
			}
			// The rest of the declared body never comes: the server must
			// close the connection rather than wait for it.
			if err := closedByServer(br); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// resetStock sets the stock through the admin API.
func resetStock(t *testing.T, addr string, n int) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/stock/reset", strings.NewReader(fmt.Sprintf(`{"stock":%d}`, n)))
	req.Header.Set("X-Admin-Token", testAdminToken)
	if code, body := send(t, req); code != http.StatusOK {
		t.Fatalf("reset: got %d %s", code, body)
	}
}

// Finding 4: GET does not buy (405 with a message), while the bare POST
// every load tool sends — no body, no Content-Type — still does.
func TestSaleIsPOSTOnly(t *testing.T) {
	p := startStockd(t)
	resetStock(t, p.Addr(), 1)
	c := rawConn(t, p.Addr())
	br := bufio.NewReader(c)
	resp, body, err := roundTrip(c, br, "GET /stock/reduce HTTP/1.1\r\nHost: x\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(body, `"error":"method GET not allowed`) {
		t.Fatalf("GET /stock/reduce: got %d %s, want 405 with a JSON message", resp.StatusCode, body)
	}
	resp, body, err = roundTrip(c, br, "POST /stock/reduce HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"result":"sold"`) || !strings.Contains(body, `"stock":0`) {
		t.Fatalf("bare POST /stock/reduce: got %d %s, want 200 sold with stock 0 (the GET must not have sold)", resp.StatusCode, body)
	}
}

// Finding 5: the reset audit log names the real peer; X-Forwarded-For counts
// only from a proxy in http.trusted_proxies (nginx, which appends the peer).
func TestAuditLogNamesTheRealClient(t *testing.T) {
	cases := []struct {
		name, trusted, want string
	}{
		{"no trusted proxy", "", "remote=127.0.0.1"},
		{"behind a trusted proxy", "127.0.0.1", "remote=198.51.100.7"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startStockd(t, "STOCKD_HTTP_TRUSTED_PROXIES="+tc.trusted)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+p.Addr()+"/stock/reset", strings.NewReader(`{"stock":3}`))
			req.Header.Set("X-Admin-Token", testAdminToken)
			req.Header.Set("X-Forwarded-For", "10.9.9.9, 198.51.100.7")
			req.Header.Set("X-Real-IP", "6.6.6.6")
			if code, body := send(t, req); code != http.StatusOK {
				t.Fatalf("reset: got %d %s", code, body)
			}
			logs, err := os.ReadFile(p.LogPath())
			if err != nil {
				t.Fatal(err)
			}
			var line string
			for l := range strings.SplitSeq(string(logs), "\n") {
				if strings.Contains(l, "stock reset") {
					line = l
				}
			}
			if !strings.Contains(line, tc.want) {
				t.Fatalf("got reset log line %q, want %s", line, tc.want)
			}
		})
	}
}

// Before the first reset no stock key exists: GET /stock answers what
// every sale answers, 503 store_lost, never {"stock":0} (a sale that
// looks sold out while every sale refuses), and /readyz stays 200, so
// compose's healthcheck lets the load tool's reset come. After the reset
// both say the stock.
func TestStockBeforeResetAnswersAsTheSale(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
	}{{"one key", nil}, {"segments4", []string{"STOCKD_STOCK_SEGMENTS=4"}}} {
		t.Run(tc.name, func(t *testing.T) {
			p := startStockd(t, tc.env...)
			base := "http://" + p.Addr()
			code, _, sale := stockdCall(t, base, "POST", "/stock/reduce")
			if code != http.StatusServiceUnavailable || sale["result"] != "store_lost" {
				t.Fatalf("a sale before the reset: %d %v, want 503 store_lost", code, sale)
			}
			code, _, st := stockdCall(t, base, "GET", "/stock")
			if code != http.StatusServiceUnavailable || st["result"] != "store_lost" || st["error"] != sale["error"] {
				t.Fatalf("GET /stock before the reset: %d %v, want the sale's 503 %v", code, st, sale)
			}
			if code, _, r := stockdCall(t, base, "GET", "/readyz"); code != http.StatusOK {
				t.Fatalf("/readyz before the reset: %d %v, want 200", code, r)
			}
			if code, _, body := stockdCall(t, base, "POST", "/stock/reset"); code != http.StatusOK {
				t.Fatalf("reset: %d %v", code, body)
			}
			if code, _, st := stockdCall(t, base, "GET", "/stock"); code != http.StatusOK || st["stock"] != 5.0 || st["lucky"] != 0.0 {
				t.Fatalf("GET /stock after the reset: %d %v, want 200 stock 5 lucky 0", code, st)
			}
		})
	}
}

// What docs/api.md says of a sale in atomic mode on a split stock: /info
// says fencing false (no lock, so no token to fence with), a sold answer's
// token is 0, and its "stock" is what is left in the segment it sold
// from, not the sum (GET /stock has that).
func TestAtomicSegmentedSaleAnswersAsDocumented(t *testing.T) {
	p := startStockd(t, "STOCKD_STOCK_MODE=atomic", "STOCKD_STOCK_SEGMENTS=4")
	base := "http://" + p.Addr()
	if code, _, info := stockdCall(t, base, "GET", "/info"); code != http.StatusOK || info["mode"] != "atomic" || info["fencing"] != false {
		t.Fatalf("/info in atomic mode: %d %v, want mode atomic, fencing false", code, info)
	}
	// 5 units over 4 segments: 2, 1, 1, 1; whichever segment a sale takes
	// from, what it leaves there is at most 1, and the sum 4.
	if code, _, body := stockdCall(t, base, "POST", "/stock/reset"); code != http.StatusOK {
		t.Fatalf("reset: %d %v", code, body)
	}
	code, _, sale := stockdCall(t, base, "POST", "/stock/reduce")
	if code != http.StatusOK || sale["result"] != "sold" || sale["token"] != 0.0 {
		t.Fatalf("a sale: %d %v, want 200 sold with token 0", code, sale)
	}
	code, _, st := stockdCall(t, base, "GET", "/stock")
	if code != http.StatusOK || st["stock"] != 4.0 {
		t.Fatalf("GET /stock after one sale of 5: %d %v, want 4 left", code, st)
	}
	left, _ := sale["stock"].(float64)
	segs, _ := st["segments"].([]any)
	if left > 1 || !slices.Contains(segs, any(left)) {
		t.Fatalf("the sold answer's stock %v: want its segment's (one of %v), not the sum 4", sale["stock"], segs)
	}
}
