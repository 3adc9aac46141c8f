package stockd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// nullRegister is a witness register that is never reached.
type nullRegister struct{}

func (nullRegister) Name() string                                      { return "test" }
func (nullRegister) Get(context.Context) ([]byte, error)               { return nil, nil }
func (nullRegister) Put(context.Context, []byte, []byte) (bool, error) { return true, nil }

// What items do not support is named when one is made: segments; the
// default configuration sells them, and so do one with a witness (a
// register per item) and one with durable orders (a table for items).
func TestItemsUnsupportedByTheConfiguration(t *testing.T) {
	sale := stock.ServiceConfig{Fencing: true}
	for _, tc := range []struct {
		name    string
		edit    func(c *Config)
		witness bool
		want    string // "" = supported
	}{
		{"defaults", nil, false, ""},
		{"witness", func(c *Config) { c.Stock.Witness = "etcd" }, true, ""},
		{"durable orders", func(c *Config) { c.Orders.Durable = true }, false, ""},
		{"segments", func(c *Config) { c.Stock.Segments = 4 }, false, "segmented stock (4 segments)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig(t)
			if tc.edit != nil {
				tc.edit(c)
			}
			var regs witnessRegisters
			if tc.witness {
				regs = func(string) stock.Register { return nullRegister{} }
			}
			ic := salesConfig(c, nil, regs, true, false, nil)
			ic.Service = sale
			err := redisstore.NewItems(ic).Unsupported()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want items supported", err)
				}
				return
			}
			if !errors.Is(err, stock.ErrItemsUnsupported) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrItemsUnsupported naming %q", err, tc.want)
			}
		})
	}
}

// The items' routes through a real stockd and Redis: made, refused before
// the window, sold, ended; the default sale beside them unchanged.
func TestItemsThroughStockd(t *testing.T) {
	p := startStockd(t)
	resetStock(t, p.Addr(), 2)
	call := func(method, path, body string, admin bool) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, "http://"+p.Addr()+path, strings.NewReader(body))
		if admin {
			req.Header.Set("X-Admin-Token", testAdminToken)
		}
		code, raw := send(t, req)
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s %s: %d %s: not JSON", method, path, code, raw)
		}
		return code, v
	}
	starts := time.Now().Add(time.Hour).UnixMilli()
	if code, v := call(http.MethodPost, "/items", fmt.Sprintf(`{"id":"x","stock":3,"starts_at":%d}`, starts), true); code != http.StatusCreated || v["state"] != "upcoming" {
		t.Fatalf("create: got %d %v, want 201 upcoming", code, v)
	}
	if code, v := call(http.MethodPost, "/items/x/reduce", "", false); code != http.StatusConflict || v["result"] != "not_started" || v["starts_at"] != float64(starts) {
		t.Fatalf("sale before the window: got %d %v, want 409 not_started at %d", code, v, starts)
	}
	if code, v := call(http.MethodPost, "/items/x/reset", `{"stock":3}`, true); code != http.StatusOK || v["state"] != "open" {
		t.Fatalf("reset: got %d %v, want 200 open", code, v)
	}
	if code, v := call(http.MethodPost, "/items/x/reduce", "", false); code != http.StatusOK || v["result"] != "sold" || v["stock"] != float64(2) {
		t.Fatalf("sale: got %d %v, want 200 sold, 2 left", code, v)
	}
	// The item's own gauges, read from Redis (a survey at most 5 s old:
	// this scrape is the first, so it reads now).
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+p.Addr()+"/metrics", nil)
	if code, raw := send(t, req); code != http.StatusOK {
		t.Fatalf("metrics: got %d", code)
	} else {
		for name, want := range map[string]string{"seckill_item_stock": "2", "seckill_item_lucky": "1"} {
			m := regexp.MustCompile(`(?m)^` + name + `\{[^}]*item="x"[^}]*\} (\S+)$`).FindStringSubmatch(string(raw))
			if m == nil || m[1] != want {
				t.Fatalf("metrics: %s{item=\"x\"} = %v, want %s", name, m, want)
			}
		}
	}
	if code, v := call(http.MethodPost, "/items/x/reset", `{"stock":3,"ends_at":1}`, true); code != http.StatusOK || v["state"] != "ended" {
		t.Fatalf("reset to an ended window: got %d %v", code, v)
	}
	if code, v := call(http.MethodPost, "/items/x/reduce", "", false); code != http.StatusConflict || v["result"] != "ended" {
		t.Fatalf("sale after the window: got %d %v, want 409 ended", code, v)
	}
	if code, v := call(http.MethodGet, "/items/nope", "", false); code != http.StatusNotFound || v["error"] == nil {
		t.Fatalf("unknown item: got %d %v, want 404 with an error", code, v)
	}
	if code, v := call(http.MethodGet, "/stock", "", false); code != http.StatusOK || v["stock"] != float64(2) || v["lucky"] != float64(0) {
		t.Fatalf("the default sale: got %d %v, want untouched (2 left, none sold)", code, v)
	}
}
