package stockd

import (
	"database/sql"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock/redisstore"
	"seckill/internal/testwait"
)

// Items under orders.durable: every item's orders reach the items' table
// with their item, an item's per-user limit is its own (the default
// sale's limit 1 binds the default table only), stored orders are trimmed
// from the item's stream and read back from MySQL, and a reset item's
// next sale is stored too.
func TestItemsDurableOrders(t *testing.T) {
	db := mariadb(t)
	rds := servertest.Redis(t)
	p := startStockd(t,
		"STOCKD_REDIS_ADDR="+rds.Addr(),
		"STOCKD_STOCK_PER_USER_LIMIT=1",
		"STOCKD_AUTH_BUYERS=proxy",
		"STOCKD_HTTP_TRUSTED_PROXIES=127.0.0.1",
		"STOCKD_ORDERS_DURABLE=true",
		"STOCKD_ORDERS_GROUP=items-test",
		"STOCKD_MYSQL_DSN="+servers.MariaDBDSN(db.Addr()),
	)
	base := "http://" + p.Addr()
	admin := func(path, body string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("X-Admin-Token", testAdminToken)
		if code, raw := send(t, req); code/100 != 2 {
			t.Fatalf("POST %s: %d %s", path, code, raw)
		}
	}
	admin("/items", `{"id":"a","stock":10,"per_user_limit":2}`)
	admin("/items", `{"id":"b","stock":10}`)
	buy := func(item, user string) string {
		t.Helper()
		code, _, body := stockdCall(t, base, "POST", "/items/"+item+"/reduce", "X-User", user)
		order, _ := body["order"].(string)
		if code != 200 || order == "" {
			t.Fatalf("%s buys %s: %d %v, want 200 with an order", user, item, code, body)
		}
		return order
	}
	a1, a2 := buy("a", "alice"), buy("a", "alice")
	buy("b", "alice")
	buy("b", "bob")

	rdb := redis.NewClient(&redis.Options{Addr: rds.Addr()})
	defer rdb.Close()
	stored := func(item string, want float64) string {
		t.Helper()
		stream := redisstore.ItemKeys(redisstore.Keys{Orders: "stock:orders"}, item).Orders
		var ledger map[string]any
		for until := testwait.Until(t); ; {
			_, _, ledger = stockdCall(t, base, "GET", "/items/"+item+"/ledger")
			xlen, err := rdb.XLen(t.Context(), stream).Result()
			if ledger["durable"] == want && ledger["lag"] == 0.0 && ledger["orders"] == want && err == nil && xlen == 0 {
				break
			}
			if until.Err() != nil {
				t.Fatalf("item %s: ledger %v, stream %s %d (%v); want %v durable, lag 0, trimmed\n%s",
					item, ledger, stream, xlen, err, want, p.LogTail(30))
			}
			time.Sleep(100 * time.Millisecond) // polling a remote's progress: no event to wait on
		}
		return ledger["sale"].(string)
	}
	saleA := stored("a", 2)
	stored("b", 2)

	// Trimmed from Redis, alice's orders of a are read from MySQL.
	if code, _, body := stockdCall(t, base, "GET", "/items/a/orders/"+a2); code != 200 || body["user"] != "alice" || body["id"] != a2 {
		t.Fatalf("GET /items/a/orders/%s once trimmed: %d %v, want alice's order", a2, code, body)
	}
	if code, _, body := stockdCall(t, base, "GET", "/items/a/orders?user=alice"); code != 200 || body["total"] != 2.0 {
		t.Fatalf("alice's orders of a once trimmed: %d %v, want 2", code, body)
	}
	sqlDB, err := sql.Open("mysql", servers.MariaDBDSN(db.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := sqlDB.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	if n := count("SELECT COUNT(*) FROM orders_items WHERE item = 'a' AND sale = ? AND `user` = 'alice' AND id IN (?, ?)", saleA, a1, a2); n != 2 {
		t.Fatalf("alice's rows of a: %d, want 2", n)
	}
	if n := count("SELECT COUNT(*) FROM orders WHERE sale = ?", saleA); n != 0 {
		t.Fatalf("item a's orders in the default sale's table: %d, want 0", n)
	}

	admin("/items/a/reset", `{"stock":5}`)
	buy("a", "carol")
	saleA2 := stored("a", 1)
	if saleA2 == saleA {
		t.Fatalf("the reset kept sale %s", saleA2)
	}
	// By the two sales: the package's MariaDB outlives one run of the
	// test (-count), and an earlier run's item a has rows of its own.
	if n := count("SELECT COUNT(*) FROM orders_items WHERE item = 'a' AND sale IN (?, ?)", saleA, saleA2); n != 3 {
		t.Fatalf("item a's rows over both sales: %d, want 3", n)
	}
}
