package stockd

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/election/audit"
	"seckill/internal/handler"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// paymentSecret is the provider's shared secret in these tests.
const paymentSecret = "9c2e7a1f4b8d3e6a0f5c9b2d7e1a4f8c"

// orders.payment_window through stockd: a sale answers its pay_by; the
// buyer pays or cancels (another buyer cannot); a cancelled unit sells
// again; the expirer returns a unit once the reservations' clock is past
// its deadline (moved forward here, as time passing: the clock is
// trusted only forward); a late payment is owed back; GET /stock shows
// what came back.
func TestReservationsThroughStockd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	rds := servertest.Redis(t)
	// The election on, so that the leader's audit takes the census too.
	p := startStockdOn(t, rds,
		"STOCKD_ORDERS_PAYMENT_WINDOW=1h", "STOCKD_ORDERS_PAYMENT_SECRET="+paymentSecret,
		"STOCKD_AUTH_BUYERS=proxy", "STOCKD_HTTP_TRUSTED_PROXIES=127.0.0.1",
		"STOCKD_ELECTION_BACKEND=etcd", "STOCKD_ETCD_ENDPOINTS=http://"+servertest.Etcd(t).Addr(),
		"STOCKD_ELECTION_JOB_INTERVAL=100ms")
	base := "http://" + p.Addr()
	rdb := redis.NewClient(&redis.Options{Addr: rds.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })

	if code, _, body := stockdSend(t, base, "POST", "/stock/reset", `{"stock":3}`); code != 200 {
		t.Fatalf("reset: %d %v", code, body)
	}
	orders := map[string]string{}
	payBy := map[string]int64{}
	for _, user := range []string{"alice", "bob", "carol"} {
		code, _, sold := stockdCall(t, base, "POST", "/stock/reduce", "X-User", user)
		by, _ := sold["pay_by"].(float64)
		if code != 200 || sold["result"] != string(api.Sold) || by <= 0 {
			t.Fatalf("%s's sale: %d %v; want sold with a pay_by", user, code, sold)
		}
		orders[user], payBy[user] = sold["order"].(string), int64(by)
	}
	if code, _, body := stockdCall(t, base, "POST", "/stock/reduce", "X-User", "dave"); code != 409 {
		t.Fatalf("dave, nothing left: %d %v; want 409 sold_out", code, body)
	}

	pay := func(user, order, pid string) (int, map[string]any) {
		code, _, body := stockdSend(t, base, "POST", "/orders/"+order+"/pay", `{"payment_id":"`+pid+`"}`, "X-User", user, "X-Admin-Token", "")
		return code, body
	}
	if code, _, body := stockdCall(t, base, "GET", "/orders/"+orders["alice"], "X-User", "alice", "X-Admin-Token", ""); code != 200 ||
		body["state"] != "reserved" || body["pay_by"] != float64(payBy["alice"]) {
		t.Fatalf("alice's order: %d %v; want reserved until %d", code, body, payBy["alice"])
	}
	if code, body := pay("alice", orders["alice"], "pay-a"); code != 200 || body["state"] != "paid" || body["refund"] != nil {
		t.Fatalf("alice pays: %d %v; want 200 paid", code, body)
	}
	if code, _, body := stockdCall(t, base, "GET", "/orders/"+orders["alice"]); code != 200 || body["state"] != "paid" || body["pay_by"] != nil {
		t.Fatalf("alice's order, paid: %d %v; want paid, no pay_by", code, body)
	}
	if code, body := pay("bob", orders["alice"], "pay-b"); code != 404 {
		t.Fatalf("bob pays alice's order: %d %v; want 404", code, body)
	}
	if code, body := pay("bob", orders["bob"], "pay-a"); code != 409 {
		t.Fatalf("bob pays with alice's payment id: %d %v; want 409", code, body)
	}
	if code, _, body := stockdCall(t, base, "POST", "/orders/"+orders["bob"]+"/cancel", "X-User", "bob", "X-Admin-Token", ""); code != 200 || body["state"] != "cancelled" {
		t.Fatalf("bob cancels: %d %v; want 200 cancelled", code, body)
	}
	if code, _, body := stockdCall(t, base, "POST", "/orders/"+orders["alice"]+"/cancel", "X-User", "alice", "X-Admin-Token", ""); code != 200 || body["state"] != "paid" {
		t.Fatalf("alice cancels her paid order: %d %v; want 200 paid, the state that won", code, body)
	}
	wantStock := func(stock, lucky, returned float64) {
		t.Helper()
		code, _, body := stockdCall(t, base, "GET", "/stock")
		if code != 200 || body["stock"] != stock || body["lucky"] != lucky || (returned > 0 && body["returned"] != returned) {
			t.Fatalf("GET /stock: %d %v; want stock %v, lucky %v, returned %v", code, body, stock, lucky, returned)
		}
	}
	wantStock(1, 3, 1)
	if code, _, sold := stockdCall(t, base, "POST", "/stock/reduce", "X-User", "dave"); code != 200 || sold["result"] != string(api.Sold) {
		t.Fatalf("dave buys the returned unit: %d %v; want sold", code, sold)
	}
	wantStock(0, 4, 1)

	// Sold out, with carol's and dave's units still reserved: a loser is
	// told that two may come back, and to ask again by carol's deadline.
	code, hdr, body := stockdCall(t, base, "POST", "/stock/reduce", "X-User", "erin")
	if retry, _ := strconv.Atoi(hdr.Get("Retry-After")); code != 409 || body["pending"] != 2.0 || retry <= 3500 || retry > 3600 {
		t.Fatalf("erin, sold out with 2 reserved: %d %v (Retry-After %q); want 409, pending 2, Retry-After about an hour", code, body, hdr.Get("Retry-After"))
	}

	// Carol never pays: past her deadline, an expirer returns her unit.
	if err := rdb.Set(t.Context(), "stock:orders:clock", strconv.FormatInt(payBy["carol"]+1, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	until := testwait.Until(t)
	for {
		_, _, body := stockdCall(t, base, "GET", "/stock")
		if body["stock"] == 1.0 && body["returned"] == 2.0 {
			break
		}
		if until.Err() != nil {
			t.Fatalf("carol's expired unit never came back: GET /stock %v\n%s", body, p.LogTail(30))
		}
		time.Sleep(50 * time.Millisecond) // polling a remote's progress: no event to wait on
	}
	// Her payment comes late, from the provider's signed callback.
	path, payment := "/orders/"+orders["carol"]+"/pay", `{"payment_id":"psp-c"}`
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	code, _, body = stockdSend(t, base, "POST", path, payment, "X-Admin-Token", "",
		handler.HeaderPaymentTimestamp, ts, handler.HeaderPaymentSignature, handler.PaymentSignature(paymentSecret, ts, path, []byte(payment)))
	if code != 200 || body["state"] != "expired" || body["refund"] != true {
		t.Fatalf("carol's payment after her deadline: %d %v; want 200 expired, refund owed", code, body)
	}
	wantStock(1, 4, 2)
	// The expirer's runs and what they expired: carol's order, by this
	// replica's only expirer.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/metrics", nil)
	code, raw := send(t, req)
	runs := regexp.MustCompile(`(?m)^seckill_expirer_runs_total\{[^}]*result="ok"[^}]*\} (\S+)$`).FindStringSubmatch(string(raw))
	expired := regexp.MustCompile(`(?m)^seckill_orders_expired_total\{[^}]*\} (\S+)$`).FindStringSubmatch(string(raw))
	if code != http.StatusOK || runs == nil || runs[1] == "0" || expired == nil || expired[1] != "1" {
		t.Fatalf("metrics: %d, expirer runs %v, orders expired %v; want runs > 0, 1 expired", code, runs, expired)
	}

	// The admin's census, from the states the scripts wrote: alice paid,
	// bob cancelled, carol expired, dave reserved; sound.
	code, _, body = stockdCall(t, base, "GET", "/stock/reservations")
	if code != 200 || body["ok"] != true || body["paid"] != 1.0 || body["cancelled"] != 1.0 || body["expired"] != 1.0 ||
		body["reserved"] != 1.0 || body["returned"] != 2.0 || body["initial"] != 3.0 {
		t.Fatalf("GET /stock/reservations: %d %v; want ok, 1 paid, cancelled, expired and reserved, 2 returned of 3", code, body)
	}
	// An order put in a state no script writes, behind the scripts' back:
	// the books still balance, the census names it, here and in the
	// leader's audit.
	if err := rdb.HSet(t.Context(), "stock:orders:states", orders["alice"], "refunded").Err(); err != nil {
		t.Fatal(err)
	}
	if code, _, body = stockdCall(t, base, "GET", "/stock/reservations"); code != 200 || body["ok"] != false {
		t.Fatalf("GET /stock/reservations with a corrupt state: %d %v; want ok false, the problem named", code, body)
	}
	until = testwait.Until(t)
	for {
		recs, err := audit.ReadStream(t.Context(), rdb, audit.DefaultStream)
		if err == nil && len(recs) > 0 && !recs[len(recs)-1].OK &&
			strings.Contains(strings.Join(recs[len(recs)-1].Problems, "; "), "no known state") {
			break
		}
		if until.Err() != nil {
			t.Fatalf("the leader's audit never named the corrupt state: %d records, %v\n%s", len(recs), err, p.LogTail(30))
		}
		time.Sleep(50 * time.Millisecond) // polling a remote's progress: no event to wait on
	}
}
