package stockd

import (
	"context"
	"encoding/json"
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

// The stock Redis went back while the order consumer was behind (MySQL
// stalled from the start: it stored nothing), with the stockd running:
// the sale halts. The operator's reconcile is refused while MySQL does not
// answer, within the durable orders' bound, and once it answers counts
// every acknowledged unit sold: the witness's count, four above what
// Redis remembers, held for the buyers' receipts. The sale then sells out
// with every unit answered once: the acknowledged ones before, the rest
// after, and MySQL ends with every order but the four held.
func TestBinaryReconcileWithTheConsumerBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	db := mariadb(t)
	front := newSwitchable(t, db.Addr()) // stalled until forward is set
	etcd := servertest.Etcd(t)
	srv := servertest.Redis(t)
	p := stockdOn(t, srv.Addr(),
		"STOCKD_STOCK_WITNESS=etcd", "STOCKD_ETCD_ENDPOINTS=http://"+etcd.Addr(), "STOCKD_STOCK_KEY=stock-rec",
		"STOCKD_ORDERS_DURABLE=true", "STOCKD_ORDERS_GROUP=reconcile-test",
		"STOCKD_MYSQL_DSN="+servers.MariaDBDSN(front.ln.Addr().String()))
	const initial = 40
	resetStock(t, p.Addr(), initial)
	var before []string // the order of every sale answered 200 before the halt
	sell := func(n int) {
		t.Helper()
		for range n {
			code, s := sellOnce(t, p)
			if code != http.StatusOK || s.Order == "" {
				t.Fatalf("sale: %d %+v; want 200 with an order (the durable orders never stop a sale)", code, s)
			}
			before = append(before, s.Order)
		}
	}
	sell(3)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	if err := rdb.Save(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	sell(4) // answered 200, their orders in no MySQL and lost with the snapshot
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code, s := sellOnce(t, p); code != http.StatusServiceUnavailable || s.Result != api.StoreLost {
		t.Fatalf("sale on the rewound Redis: %d %+v; want 503 %s", code, s, api.StoreLost)
	}

	reconcile := func(body string) (int, []byte) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+p.Addr()+"/stock/reconcile", strings.NewReader(body))
		req.Header.Set("X-Admin-Token", testAdminToken)
		return send(t, req)
	}
	for _, bad := range []string{`{"by":"ops","x":1}`, `{"by":""}`, `{"by":"ops","at_least":-1}`, `{"by":"ops","at_least":"7"}`, `[]`} {
		if code, raw := reconcile(bad); code != http.StatusBadRequest {
			t.Fatalf("reconcile %s: %d %s; want 400", bad, code, raw)
		}
	}
	// A stalled MySQL is given the durable orders' bound (2 s), not the
	// read pool's I/O timeout (30 s): the answer must come well before
	// this request gives up.
	stalled, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(stalled, http.MethodPost, "http://"+p.Addr()+"/stock/reconcile", strings.NewReader(`{"by":"ops"}`))
	req.Header.Set("X-Admin-Token", testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("reconcile while MySQL stalls: %v; want 503 within the durable orders' bound", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("reconcile while MySQL stalls: %d; want 503 (the durable orders must answer)", resp.StatusCode)
	}
	if why, err := rdb.Get(t.Context(), "stock-rec:halt").Result(); err != nil || why == "" {
		t.Fatalf("halt after the refused reconcile: %q, %v; want still halted", why, err)
	}

	front.forward.Store(true)
	// Once the consumer is up (it makes its table on its first connection),
	// however far it got with the orders Redis's ledger still holds.
	until := testwait.Until(t)
	for {
		_, _, ledger := stockdCall(t, "http://"+p.Addr(), "GET", "/ledger")
		if _, ok := ledger["durable"].(float64); ok {
			break
		}
		if until.Err() != nil {
			t.Fatalf("the durable orders did not answer once MySQL did: %v\n%s", ledger, p.LogTail(30))
		}
		time.Sleep(200 * time.Millisecond) // polling a remote's progress: no event to wait on
	}
	code, raw := reconcile(`{"by":"ops@example"}`)
	var r api.Reconciliation
	if err := json.Unmarshal(raw, &r); code != http.StatusOK || err != nil {
		t.Fatalf("reconcile: %d %s\n%s", code, raw, p.LogTail(20))
	}
	t.Logf("reconciled: %s", raw)
	if r.By != "ops@example" || r.RedisLucky != 3 || r.WitnessSold != 7 || r.Lucky != 7 || r.Held != 4 ||
		r.DurableUnit < 0 || r.DurableUnit > 3 || r.Pending != 3-r.DurableUnit || r.Lifted == "" {
		t.Fatalf("reconciled %s; want by ops@example, redis_lucky 3, witness_sold 7, lucky 7, held 4, durable_unit+pending 3, a halt lifted", raw)
	}
	if code, raw := reconcile(`{"by":"ops"}`); code != http.StatusConflict {
		t.Fatalf("a second reconcile: %d %s; want 409, not halted", code, raw)
	}

	after := 0
	for {
		code, s := sellOnce(t, p)
		if s.Result == api.SoldOut {
			break
		}
		if code != http.StatusOK {
			t.Fatalf("sale %d after the reconcile: %d %+v", after+1, code, s)
		}
		if after++; after > initial {
			t.Fatal("sold more than the stock")
		}
	}
	if len(before)+after != initial {
		t.Fatalf("%d answered 200 before and %d after: want the %d units, each answered once", len(before), after, initial)
	}
	// MySQL ends with every order but the held ones: the four whose
	// orders went back with Redis, which only their buyers' answers hold.
	for {
		_, _, ledger := stockdCall(t, "http://"+p.Addr(), "GET", "/ledger")
		if d, _ := ledger["durable"].(float64); int64(d) == initial-r.Held {
			break
		}
		if until.Err() != nil {
			t.Fatalf("the consumer did not store every order but the %d held: %v\n%s", r.Held, ledger, p.LogTail(30))
		}
		time.Sleep(200 * time.Millisecond) // polling a remote's progress: no event to wait on
	}
	gone := 0
	for _, id := range before {
		if code, _, _ := stockdCall(t, "http://"+p.Addr(), "GET", "/orders/"+id); code == http.StatusNotFound {
			gone++
		}
	}
	if int64(gone) != r.Held {
		t.Fatalf("%d orders answered before the halt are gone; the reconcile holds %d", gone, r.Held)
	}
}
