package stockd

import (
	"context"
	"database/sql"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// With a payment window and durable orders, each reservation's end is in
// MySQL: a payment is answered paid only once MySQL holds it (503, with
// nothing lost, while MySQL is down; the same payment sent again then
// pays once), and a cancel reaches MySQL from the ends the stock Redis
// keeps until a replica copied them.
func TestDurablePaymentsWiring(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	db := mariadb(t)
	front := newSwitchable(t, db.Addr())
	front.refuse.Store(true) // MySQL down
	rds := servertest.Redis(t)
	p := startStockdOn(t, rds,
		"STOCKD_REPLICA=ends-1",
		"STOCKD_AUTH_BUYERS=proxy",
		"STOCKD_HTTP_TRUSTED_PROXIES=127.0.0.1",
		"STOCKD_ORDERS_DURABLE=true",
		"STOCKD_ORDERS_PAYMENT_WINDOW=1h",
		"STOCKD_ORDERS_DURABLE_TIMEOUT=300ms",
		"STOCKD_MYSQL_DSN="+servers.MariaDBDSN(front.ln.Addr().String()),
	)
	base := "http://" + p.Addr()
	if code, _, body := stockdCall(t, base, "POST", "/stock/reset"); code != 200 {
		t.Fatalf("reset: %d %v", code, body)
	}
	buy := func(user string) string {
		t.Helper()
		code, _, sold := stockdCall(t, base, "POST", "/stock/reduce", "X-User", user)
		order, _ := sold["order"].(string)
		if code != 200 || sold["result"] != string(api.Sold) || order == "" || sold["pay_by"] == nil {
			t.Fatalf("%s's sale: got %d %v, want 200 sold, reserved with a pay_by", user, code, sold)
		}
		return order
	}
	alice, bob := buy("alice"), buy("bob")
	// Payment ids are unique for good, and this package's tests share
	// one MariaDB: the order's id makes it this run's own.
	pid := "psp-" + alice
	pay := `{"payment_id":"` + pid + `"}`

	code, hdr, body := stockdSend(t, base, "POST", "/orders/"+alice+"/pay", pay, "X-User", "alice")
	if code != 503 || hdr.Get("Retry-After") != "1" {
		t.Fatalf("pay with MySQL down: got %d %v (Retry-After %q), want 503 with Retry-After 1\n%s", code, body, hdr.Get("Retry-After"), p.LogTail(20))
	}

	// A MySQL that takes the connection and never answers: the payment is
	// answered 503 within orders.durable_timeout, not held until the
	// client gives up. The client's own bound only catches a hang.
	front.refuse.Store(false)
	hangs, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(hangs, "POST", base+"/orders/"+alice+"/pay", strings.NewReader(pay))
	req.Header.Set("X-Admin-Token", testAdminToken)
	req.Header.Set("X-User", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("pay with MySQL silent: %v, want 503 within orders.durable_timeout\n%s", err, p.LogTail(20))
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("pay with MySQL silent: got %d (Retry-After %q), want 503 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	front.forward.Store(true)
	if code, _, body := stockdSend(t, base, "POST", "/orders/"+alice+"/pay", pay, "X-User", "alice"); code != 200 || body["state"] != "paid" || body["refund"] != nil {
		t.Fatalf("the same payment with MySQL up: got %d %v, want 200 paid\n%s", code, body, p.LogTail(20))
	}
	sqlDB, err := sql.Open("mysql", servers.MariaDBDSN(db.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	end := func(order string) (state, pid string) {
		t.Helper()
		var n sql.NullString
		err := sqlDB.QueryRowContext(t.Context(), "SELECT state, payment_id FROM orders_ends WHERE id = ?", order).Scan(&state, &n)
		if err != nil && err != sql.ErrNoRows {
			t.Fatal(err)
		}
		return state, n.String
	}
	// Read once the 200 is in: it promised MySQL holds the payment.
	if state, got := end(alice); state != "paid" || got != pid {
		t.Fatalf("alice's order in MySQL after the 200: %q %q, want paid by %s", state, got, pid)
	}

	if code, _, body := stockdCall(t, base, "POST", "/orders/"+bob+"/cancel", "X-User", "bob"); code != 200 || body["state"] != "cancelled" {
		t.Fatalf("bob's cancel: got %d %v, want 200 cancelled", code, body)
	}
	rdb := redis.NewClient(&redis.Options{Addr: rds.Addr()})
	defer rdb.Close()
	until := testwait.Until(t)
	for {
		state, _ := end(bob)
		left, err := rdb.ZCard(t.Context(), "stock:orders:ended").Result()
		if state == "cancelled" && err == nil && left == 0 {
			break
		}
		if until.Err() != nil {
			t.Fatalf("bob's cancel not copied to MySQL: %q, %d ends left in Redis (%v)\n%s", state, left, err, p.LogTail(30))
		}
		time.Sleep(100 * time.Millisecond) // polling a remote's progress: no event to wait on
	}
}
