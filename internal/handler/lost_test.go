package handler_test

import (
	"net/http"
	"strings"
	"testing"
)

// A sale whose stock Redis lost its data answers 503 store_lost, not 409
// sold_out; one whose Redis went back in time (a selling script halted it)
// answers the same, /readyz is 503 saying store_rewound, and a reset is
// refused until an operator removes the halt.
func TestLostAndRewoundStore(t *testing.T) {
	e := newEnv(t, 5, nil, nil)
	e.rdb.Del(t.Context(), "stock")
	r := e.do(t, http.MethodPost, "/stock/reduce", "")
	if r.code != http.StatusServiceUnavailable || r.body["result"] != "store_lost" {
		t.Fatalf("reduce with the stock key gone: got %d %s, want 503 store_lost", r.code, r.raw)
	}
	if r := e.do(t, http.MethodPost, "/stock/reset", `{"stock":5}`, "X-Admin-Token", token); r.code != http.StatusOK {
		t.Fatalf("reset: got %d %s", r.code, r.raw)
	}

	e.rdb.Set(t.Context(), "stock:halt", "rewound: stock 5 above 3", 0)
	r = e.do(t, http.MethodPost, "/stock/reduce", "")
	if msg, _ := r.body["error"].(string); r.code != http.StatusServiceUnavailable || r.body["result"] != "store_lost" || !strings.Contains(msg, "went back in time") {
		t.Fatalf("reduce on a halted sale: got %d %s, want 503 store_lost saying the Redis went back in time", r.code, r.raw)
	}
	r = e.do(t, http.MethodGet, "/readyz", "")
	if st, _ := r.body["stock"].(string); r.code != http.StatusServiceUnavailable || !strings.HasPrefix(st, "store_rewound: rewound: stock 5 above 3") {
		t.Fatalf("readyz on a halted sale: got %d %s, want 503 with stock store_rewound", r.code, r.raw)
	}
	if r := e.do(t, http.MethodPost, "/stock/reset", `{"stock":5}`, "X-Admin-Token", token); r.code != http.StatusServiceUnavailable {
		t.Fatalf("reset of a halted sale: got %d %s, want 503 until the halt is removed", r.code, r.raw)
	}
	e.rdb.Del(t.Context(), "stock:halt")
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusOK {
		t.Fatalf("readyz once the operator removed the halt: got %d %s, want 200", r.code, r.raw)
	}
}
