package stockd

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// stockdCall sends one request to a stockd and decodes its JSON answer.
func stockdCall(t *testing.T, base, method, path string, headers ...string) (int, http.Header, map[string]any) {
	t.Helper()
	body := ""
	if path == "/stock/reset" {
		body = `{"stock":5}`
	}
	return stockdSend(t, base, method, path, body, headers...)
}

// stockdSend is stockdCall with the request body body.
func stockdSend(t *testing.T, base, method, path, body string, headers ...string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
	req.Header.Set("X-Admin-Token", testAdminToken)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i]) // as a buyer, without the admin token
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("%s %s: %d, body not JSON: %v", method, path, resp.StatusCode, err)
	}
	return resp.StatusCode, resp.Header, m
}

// The ledger's keys reach the sale: buyers, the per-user limit and
// idempotency keys are honoured; /info, /orders and /ledger report them. With
// orders.durable, sales go on while MySQL stalls (their orders wait in the
// stream: /ledger shows the lag and no durable count), and once MySQL answers
// the replica stores every order, exports the lag, and stops cleanly.
func TestDurableOrdersWiring(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	db := mariadb(t)
	front := newSwitchable(t, db.Addr())
	bin := stockdBinary(t)
	rds := servertest.Redis(t)
	addr, err := servers.LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	p, err := servers.Start(t.Context(), servers.Spec{
		Name: "stockd", Path: bin, Dir: t.TempDir(), Addr: addr,
		Env: []string{
			"STOCKD_REDIS_ADDR=" + rds.Addr(),
			"STOCKD_HTTP_ADDR=" + addr,
			"STOCKD_ADMIN_TOKEN=" + testAdminToken,
			"STOCKD_REPLICA=orders-1",
			"STOCKD_STOCK_PER_USER_LIMIT=1",
			// Buyers named by X-User from this test, as a gateway would.
			"STOCKD_AUTH_BUYERS=proxy",
			"STOCKD_HTTP_TRUSTED_PROXIES=127.0.0.1",
			"STOCKD_ORDERS_DURABLE=true",
			"STOCKD_ORDERS_GROUP=orders-test",
			"STOCKD_MYSQL_DSN=" + servers.MariaDBDSN(front.ln.Addr().String()),
		},
		Ready:        servers.HTTPReady("/readyz"),
		ReadyTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	base := "http://" + addr

	if code, _, body := stockdCall(t, base, "GET", "/info"); code != 200 || body["ledger"] != true ||
		body["durable"] != true || body["per_user_limit"] != 1.0 {
		t.Fatalf("info: got %d %v, want ledger, durable and per_user_limit 1", code, body)
	}
	if code, _, body := stockdCall(t, base, "POST", "/stock/reset"); code != 200 {
		t.Fatalf("reset: %d %v", code, body)
	}
	// MySQL stalls: every sale below is made all the same.
	code, _, sold := stockdCall(t, base, "POST", "/stock/reduce", "X-User", "alice", "Idempotency-Key", "k-1")
	order, _ := sold["order"].(string)
	if code != 200 || sold["result"] != string(api.Sold) || order == "" {
		t.Fatalf("alice's sale: got %d %v, want 200 sold with an order", code, sold)
	}
	code, hdr, again := stockdCall(t, base, "POST", "/stock/reduce", "X-User", "alice", "Idempotency-Key", "k-1")
	if code != 200 || again["order"] != order || again["replayed"] != true || hdr.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: got %d %v (Idempotent-Replayed %q), want 200 replayed order %s", code, again, hdr.Get("Idempotent-Replayed"), order)
	}
	if code, _, body := stockdCall(t, base, "POST", "/stock/reduce", "X-User", "alice"); code != 409 || body["result"] != string(api.LimitReached) {
		t.Fatalf("alice's second unit: got %d %v, want 409 limit_reached", code, body)
	}
	// A key is its buyer's own: alice's key from bob is bob's purchase.
	if code, _, body := stockdCall(t, base, "POST", "/stock/reduce", "X-User", "bob", "Idempotency-Key", "k-1"); code != 200 ||
		body["result"] != string(api.Sold) || body["replayed"] == true || body["order"] == order {
		t.Fatalf("alice's key from bob: got %d %v, want 200 sold, a new order", code, body)
	}
	if code, _, body := stockdCall(t, base, "POST", "/stock/reduce"); code != 200 || body["result"] != string(api.Sold) {
		t.Fatalf("anonymous sale: got %d %v, want 200 sold", code, body)
	}
	if code, _, body := stockdCall(t, base, "POST", "/stock/reduce", "X-User", "a b"); code != 400 {
		t.Fatalf("bad X-User: got %d %v, want 400", code, body)
	}
	if code, _, body := stockdCall(t, base, "GET", "/orders/"+order); code != 200 || body["user"] != "alice" ||
		body["key"] != "k-1" || body["replica"] != "orders-1" {
		t.Fatalf("GET /orders/%s: got %d %v, want alice's order from orders-1", order, code, body)
	}
	if code, _, body := stockdCall(t, base, "GET", "/orders?user=alice"); code != 200 || body["total"] != 1.0 {
		t.Fatalf("alice's orders: got %d %v, want total 1", code, body)
	}
	code, _, ledger := stockdCall(t, base, "GET", "/ledger")
	if code != 200 || ledger["orders"] != 3.0 || ledger["lucky"] != 3.0 || ledger["buyers"] != 2.0 || ledger["durable"] != nil {
		t.Fatalf("ledger with MySQL stalled: got %d %v, want 3 orders, lucky 3, 2 buyers, no durable count", code, ledger)
	}
	if lag, _ := ledger["lag"].(float64); lag != 3 {
		t.Fatalf("ledger with MySQL stalled: got lag %v, want 3 (nothing stored)", ledger["lag"])
	}

	front.forward.Store(true)
	answering := time.Now()
	until := testwait.Until(t)
	for {
		_, _, ledger = stockdCall(t, base, "GET", "/ledger")
		if ledger["durable"] == 3.0 && ledger["lag"] == 0.0 {
			break
		}
		if until.Err() != nil {
			t.Fatalf("orders not stored %v after MySQL answered: %v\n%s", time.Since(answering).Round(time.Second), ledger, p.LogTail(30))
		}
		time.Sleep(200 * time.Millisecond) // polling a remote's progress: no event to wait on
	}
	// The rows are the ledger's: alice's order, bob's and one anonymous.
	sqlDB, err := sql.Open("mysql", servers.MariaDBDSN(db.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	var n int
	if err := sqlDB.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM orders WHERE id = ? AND `user` = 'alice' AND sale = ?",
		order, ledger["sale"]).Scan(&n); err != nil || n != 1 {
		t.Fatalf("alice's row: got %d rows, %v; want 1", n, err)
	}
	// Stored, the orders leave Redis (orders.trim_interval) and are read
	// from MySQL; the ledger still counts them.
	rdb := redis.NewClient(&redis.Options{Addr: rds.Addr()})
	defer rdb.Close()
	for stored := time.Now(); ; {
		n, err := rdb.XLen(t.Context(), "stock:orders").Result()
		if err == nil && n == 0 {
			break
		}
		if until.Err() != nil {
			t.Fatalf("the stored orders are still in the stream %v on: XLEN %d, %v\n%s", time.Since(stored).Round(time.Second), n, err, p.LogTail(30))
		}
		time.Sleep(100 * time.Millisecond) // polling a remote's progress: no event to wait on
	}
	if code, _, body := stockdCall(t, base, "GET", "/orders/"+order); code != 200 || body["user"] != "alice" || body["key"] != "k-1" {
		t.Fatalf("GET /orders/%s once trimmed: got %d %v, want alice's order from MySQL", order, code, body)
	}
	if code, _, body := stockdCall(t, base, "GET", "/orders?user=alice"); code != 200 || body["total"] != 1.0 ||
		len(body["orders"].([]any)) != 1 || body["orders"].([]any)[0].(map[string]any)["id"] != order {
		t.Fatalf("alice's orders once trimmed: got %d %v, want her one order", code, body)
	}
	if code, _, body := stockdCall(t, base, "GET", "/ledger"); code != 200 || body["orders"] != 3.0 || body["lucky"] != 3.0 {
		t.Fatalf("ledger once trimmed: got %d %v, want 3 orders and lucky 3", code, body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/metrics", nil)
	code, body := send(t, req)
	if code != 200 || !strings.Contains(string(body), `seckill_orders_lag{`) {
		t.Fatalf("metrics: got %d, want a seckill_orders_lag series", code)
	}
	// The counters as Redis holds them, read at the scrape: 3 of 5 sold.
	for name, want := range map[string]int{"seckill_lucky": 3, "seckill_stock": 2} {
		re := regexp.MustCompile(`(?m)^` + name + `\{[^}]*\} (\S+)$`)
		m := re.FindStringSubmatch(string(body))
		if m == nil || m[1] != strconv.Itoa(want) {
			t.Fatalf("metrics: %s = %v, want %d", name, m, want)
		}
	}

	// The consumer must end with the process: stockd waits for it before
	// it exits, so a consumer that did not end would keep it running until
	// Stop's SIGKILL, given the test's whole deadline here, and the exit
	// status would say so. How long the stop took is only noted.
	killAt, _ := until.Deadline()
	began := time.Now()
	if err := p.Stop(time.Until(killAt)); err != nil {
		t.Fatal(err)
	}
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("got exit status %d after SIGTERM, want 0 (exited by itself, the consumer ended)\n%s", code, p.LogTail(30))
	}
	d := time.Since(began)
	note := ""
	if d > 10*time.Second {
		note = " (SLOW)"
	}
	t.Logf("stopped %v after SIGTERM%s", d.Round(time.Millisecond), note)
	if !strings.Contains(p.LogTail(5), "msg=stopped") {
		t.Fatalf("no clean-stop log line:\n%s", p.LogTail(30))
	}
}

// With trimming on, a MySQL that may lose acknowledged commits is named at
// start (a warning: the sale goes on); a durable one is not.
func TestWarnNotDurable(t *testing.T) {
	maria := servertest.MariaDB(t)
	db, err := sql.Open("mysql", servers.MariaDBDSN(maria.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	var logs bytes.Buffer
	w := &wiring{log: slog.New(slog.NewTextHandler(&logs, nil))}
	warnNotDurable(t.Context(), db, w)
	if logs.Len() != 0 {
		t.Fatalf("a durable MySQL: logged %s, want nothing", logs.String())
	}
	if _, err := db.ExecContext(t.Context(), "SET GLOBAL innodb_flush_log_at_trx_commit = 2"); err != nil {
		t.Fatal(err)
	}
	warnNotDurable(t.Context(), db, w)
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "innodb_flush_log_at_trx_commit is 2") {
		t.Fatalf("flush once a second: logged %q, want a warning naming the setting", logs.String())
	}
}
