package handler_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"seckill/internal/election"
	"seckill/internal/handler"
	"seckill/internal/metrics"
	"seckill/internal/stock"
)

// docs/api.md against the router: every route documented, the replica
// named as the page says, and the admin bound's 429 on exactly the rows
// whose routes answer it; and README's short list names every route.

// readDoc reads a page of the repository.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("../../" + path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// apiDoc is docs/api.md, the API reference.
func apiDoc(t *testing.T) string { return readDoc(t, "docs/api.md") }

// readmeAPI is the README's "## API" section: the routes in short.
func readmeAPI(t *testing.T) string {
	t.Helper()
	_, section, ok := strings.Cut(readDoc(t, "README.md"), "\n## API\n")
	if !ok {
		t.Fatal(`README: no "## API" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

// apiRows maps "GET /orders/:id" to the rows of docs/api.md's table whose
// request column starts with it (a query string left out).
func apiRows(t *testing.T) map[string][]string {
	t.Helper()
	// A row's first cell names its requests: one, or several that answer
	// alike ("`GET /a` · `GET /b`").
	request := regexp.MustCompile("`([A-Z]+) (/[^`?\\s]*)")
	rows := map[string][]string{}
	for line := range strings.SplitSeq(apiDoc(t), "\n") {
		cells := strings.SplitN(line, "|", 3)
		if len(cells) < 3 || cells[0] != "" || !strings.HasPrefix(cells[1], " `") {
			continue
		}
		for _, m := range request.FindAllStringSubmatch(cells[1], -1) {
			rows[m[1]+" "+m[2]] = append(rows[m[1]+" "+m[2]], line)
		}
	}
	if len(rows) == 0 {
		t.Fatal("docs/api.md: no rows in the API table")
	}
	return rows
}

// docsAPI is the whole API over fakes, with an order sold by another
// replica ("r2") and an election.
func docsAPI(t *testing.T) (http.Handler, gin.RoutesInfo) {
	t.Helper()
	sold := sellerFunc(func(context.Context) (stock.Sale, error) {
		return stock.Sale{StockAfter: 4, Token: 7, Attempt: "a1"}, nil
	})
	h := handler.New(handler.Config{Replica: replica, Backend: "local", Mode: "locked", AdminToken: token},
		handler.Deps{
			Seller: sold, Inventory: &cannedInventory{status: stock.Status{Stock: 5}},
			Orders: &fakeOrders{
				orders: map[string]stock.Order{"p-1": order1}, byUser: []stock.Order{order1}, total: 1,
				stats: stock.LedgerStats{Sale: "s1", Orders: 1, Buyers: 1, Lucky: 1},
			},
			Leader:  &fakeLeader{read: election.Leader{ID: "r2", Term: 3}},
			Metrics: metrics.New(prometheus.Labels{"replica": replica}),
			Logger:  slog.New(slog.DiscardHandler),
		})
	engine, ok := h.(*gin.Engine)
	if !ok {
		t.Fatalf("handler.New returned a %T, not the gin engine", h)
	}
	return h, engine.Routes()
}

// call sends method path to h from peer with admin token tok, filling the
// route's parameters.
func call(h http.Handler, method, path, peer, tok string) *httptest.ResponseRecorder {
	path = strings.NewReplacer(":attempt", "a1", ":id", "p-1").Replace(path)
	if path == "/orders" {
		path += "?user=alice"
	}
	var req *http.Request
	if method == http.MethodPost && path == "/stock/reset" {
		req = httptest.NewRequest(method, path, strings.NewReader(`{"stock":5}`))
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	req.RemoteAddr = peer + ":4321"
	req.Header.Set("X-Admin-Token", tok)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Every route has its row in docs/api.md's table, and its name in the
// README's short list.
func TestAPIDocDocumentsEveryRoute(t *testing.T) {
	rows := apiRows(t)
	short := readmeAPI(t)
	_, routes := docsAPI(t)
	for _, r := range routes {
		if len(rows[r.Method+" "+r.Path]) == 0 {
			t.Errorf("docs/api.md's table has no row for %s %s", r.Method, r.Path)
		}
		if !strings.Contains(short, "`"+r.Method+" "+r.Path+"`") {
			t.Errorf("README's API list does not name `%s %s`", r.Method, r.Path)
		}
	}
}

// docs/api.md says which answers do not carry the answering replica as
// "replica" in a JSON body; every other answer does, and every answer has
// the X-Replica header.
func TestAPIDocReplicaInEveryAnswer(t *testing.T) {
	// The exceptions, and how each one shows it.
	exceptions := map[string]func(rec *httptest.ResponseRecorder) bool{
		"GET /metrics": func(rec *httptest.ResponseRecorder) bool {
			return !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json")
		},
		"GET /leader": func(rec *httptest.ResponseRecorder) bool {
			var v map[string]any
			if json.Unmarshal(rec.Body.Bytes(), &v) != nil {
				return false
			}
			_, has := v["replica"]
			return !has && v["self"] == replica
		},
		"GET /orders/:id": func(rec *httptest.ResponseRecorder) bool {
			var v map[string]any
			return json.Unmarshal(rec.Body.Bytes(), &v) == nil && v["replica"] == order1.Replica
		},
	}
	h, routes := docsAPI(t)
	for _, r := range append(routes,
		gin.RouteInfo{Method: http.MethodGet, Path: "/no-such-route"},
		gin.RouteInfo{Method: http.MethodGet, Path: "/stock/reduce"}) {
		name := r.Method + " " + r.Path
		rec := call(h, r.Method, r.Path, "192.0.2.1", token)
		if got := rec.Header().Get("X-Replica"); got != replica {
			t.Errorf("%s: X-Replica %q, want %q", name, got, replica)
		}
		if is, ok := exceptions[name]; ok {
			if !is(rec) {
				t.Errorf("%s: answered %d %s, which is no longer the exception docs/api.md names", name, rec.Code, rec.Body)
			}
			continue
		}
		var v struct {
			Replica *string `json:"replica"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil || v.Replica == nil || *v.Replica != replica {
			t.Errorf("%s: answered %d %s: want JSON with \"replica\":%q, as docs/api.md says", name, rec.Code, rec.Body, replica)
		}
	}
	_, statement, ok := strings.Cut(apiDoc(t), "Every answer of stockd's routes")
	statement, _, _ = strings.Cut(statement, "\n")
	if !ok {
		t.Fatal(`docs/api.md: the "Every answer of stockd's routes…" statement is gone`)
	}
	for name := range exceptions {
		_, path, _ := strings.Cut(name, " ")
		if !strings.Contains(statement, path+"`") {
			t.Errorf("docs/api.md's statement of the replica does not name the exception %s:\n%s", name, statement)
		}
	}
}

// Beyond the admin bound a wrong token is answered 429 with Retry-After
// on exactly the routes whose docs/api.md rows say so.
func TestAPIDocAdminThrottledRoutes(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	defer handler.SetNow(func() time.Time { return clock })()
	const peer = "198.51.100.7"
	h, routes := docsAPI(t)
	throttled := false
	for range 2 * handler.AdminBurst {
		if rec := call(h, http.MethodPost, "/stock/reset", peer, "wrong-token-0000"); rec.Code == http.StatusTooManyRequests {
			throttled = true
			break
		}
	}
	if !throttled {
		t.Fatalf("%d wrong admin tokens never reached the bound", 2*handler.AdminBurst)
	}
	rows := apiRows(t)
	const says = "`429` with `Retry-After`"
	for _, r := range routes {
		name := r.Method + " " + r.Path
		rec := call(h, r.Method, r.Path, peer, "wrong-token-0000")
		got := rec.Code == http.StatusTooManyRequests
		if got && rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s: 429 without Retry-After", name)
		}
		documented := false
		for _, row := range rows[name] {
			documented = documented || strings.Contains(row, says)
		}
		if got != documented {
			t.Errorf("%s: answers a wrong token beyond the bound 429: %v; its docs/api.md row says %s: %v", name, got, says, documented)
		}
	}
}
