package handler_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"seckill/internal/handler"
	"seckill/internal/stock"
)

// A halted item is named in /readyz's "items", read again at most every
// 5 s, and the replica stays ready: the default sale and the other items
// still sell. Past 10 halted items the rest are counted.
func TestReadyNamesHaltedItems(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Cleanup(handler.SetNow(func() time.Time { return clock }))
	e := itemsEnv(t)
	for i := range 12 {
		wantAnswer(t, "create", e.admin(t, http.MethodPost, "/items", fmt.Sprintf(`{"id":"i%02d","stock":3}`, i)), http.StatusCreated, nil)
	}
	r := e.do(t, http.MethodGet, "/readyz", "")
	if _, has := r.body["items"]; r.code != http.StatusOK || has {
		t.Fatalf("readyz, no item halted: got %d %s, want 200 without items", r.code, r.raw)
	}
	halt := func(id string) {
		t.Helper()
		key := stock.ItemKeys(stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}.Derive(true), id).Halt
		if err := e.rdb.Set(t.Context(), key, "rewound: test", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	halt("i03")
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusOK || r.body["items"] != nil {
		t.Fatalf("readyz within 5 s of the last reading: got %d %s, want the last reading (none halted)", r.code, r.raw)
	}
	clock = clock.Add(5 * time.Second)
	r = e.do(t, http.MethodGet, "/readyz", "")
	if msg, _ := r.body["items"].(string); r.code != http.StatusOK || !strings.HasPrefix(msg, "halted: i03 (") {
		t.Fatalf("readyz with i03 halted: got %d %s, want 200 with items naming i03", r.code, r.raw)
	}
	wantAnswer(t, "another item's sale", e.do(t, http.MethodPost, "/items/i04/reduce", ""), http.StatusOK, map[string]any{"result": "sold"})

	for i := range 12 {
		halt(fmt.Sprintf("i%02d", i))
	}
	clock = clock.Add(5 * time.Second)
	r = e.do(t, http.MethodGet, "/readyz", "")
	if msg, _ := r.body["items"].(string); r.code != http.StatusOK ||
		!strings.HasPrefix(msg, "halted: i00, i01, i02, i03, i04, i05, i06, i07, i08, i09 and 2 more (") {
		t.Fatalf("readyz with 12 items halted: got %d %s, want 200 naming 10 and counting 2", r.code, r.raw)
	}
}
