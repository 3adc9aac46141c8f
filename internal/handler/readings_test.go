package handler_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/handler"
	"seckill/internal/health"
	"seckill/internal/lock/locallock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
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
		key := redisstore.ItemKeys(redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}.Derive(true), id).Halt
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

// A step of the primary's clock (or this process's) shows in /readyz at
// the next probe a second later, though the full reading (every replica)
// is taken only every ClockWatch.Every.
func TestReadyShowsAClockStepAtOnce(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Cleanup(handler.SetNow(func() time.Time { return clock }))
	ok := health.Clocks{Process: health.ClockSkew{Of: health.ThisProcess, Skew: 3 * time.Millisecond, Uncertainty: time.Millisecond}}
	reading, full, fresh := ok, 0, 0
	read := clocksReader{
		all:     func() health.Clocks { full++; return reading },
		process: func() health.ClockSkew { fresh++; return reading.Process },
	}
	e := &env{}
	e.h = handler.New(handler.Config{Replica: replica},
		handler.Deps{
			Seller: sellerFunc(func(context.Context) (stock.Sale, error) { return stock.Sale{}, nil }), Inventory: &cannedInventory{},
			Health: health.New(health.Config{Now: func() time.Time { return clock },
				Clocks: &health.ClockWatch{Clocks: read, MaxSkew: time.Second, Known: &ok, Every: time.Minute}}),
		})
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusOK || r.body["clock"] != nil {
		t.Fatalf("readyz in step: got %d %s, want 200 without clock", r.code, r.raw)
	}
	// The primary's clock steps back 6 s: this process is 6 s ahead.
	reading.Process.Skew = 6 * time.Second
	clock = clock.Add(time.Second)
	r := e.do(t, http.MethodGet, "/readyz", "")
	if msg, _ := r.body["clock"].(string); r.code != http.StatusOK || !strings.Contains(msg, "this process +6s") {
		t.Fatalf("readyz a second after a 6 s step: got %d %s, want 200 with a clock naming this process +6s", r.code, r.raw)
	}
	if full != 0 || fresh != 2 {
		t.Fatalf("got %d full readings and %d of this process, want 0 and 2 (one per probe a second apart)", full, fresh)
	}
}

// clocksReader answers the full reading and this process's apart.
type clocksReader struct {
	all     func() health.Clocks
	process func() health.ClockSkew
}

func (c clocksReader) ReadClocks(context.Context) (health.Clocks, error) { return c.all(), nil }
func (c clocksReader) ReadProcess(context.Context) (health.ClockSkew, error) {
	return c.process(), nil
}

// A replica's clock off the primary's by more than stock.max_clock_skew
// shows in /readyz's "clock", and the replica stays ready; read again at
// most every ClockWatch.Every, from the reading taken at start.
func TestReadyWarnsOfClockSkew(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Cleanup(handler.SetNow(func() time.Time { return clock }))
	ok := health.Clocks{
		Process:  health.ClockSkew{Of: health.ThisProcess, Skew: 3 * time.Millisecond, Uncertainty: time.Millisecond},
		Replicas: []health.ClockSkew{{Of: "replica 10.0.0.2:6379", Skew: -20 * time.Millisecond, Uncertainty: time.Millisecond}},
	}
	skewed := ok
	skewed.Replicas = []health.ClockSkew{{Of: "replica 10.0.0.2:6379", Skew: 1800 * time.Millisecond, Uncertainty: 2 * time.Millisecond}}
	reading, reads := skewed, 0
	read := clocksReader{
		all:     func() health.Clocks { reads++; return reading },
		process: func() health.ClockSkew { return reading.Process },
	}
	e := &env{}
	e.h = handler.New(handler.Config{Replica: replica},
		handler.Deps{
			Seller: sellerFunc(func(context.Context) (stock.Sale, error) { return stock.Sale{}, nil }), Inventory: &cannedInventory{},
			Health: health.New(health.Config{Now: func() time.Time { return clock },
				Clocks: &health.ClockWatch{Clocks: read, MaxSkew: time.Second, Known: &ok, Every: time.Minute}}),
		})
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusOK || r.body["clock"] != nil || reads != 0 {
		t.Fatalf("readyz with the start's reading within bounds: got %d %s after %d reads, want 200 without clock, no read", r.code, r.raw, reads)
	}
	clock = clock.Add(time.Minute)
	r := e.do(t, http.MethodGet, "/readyz", "")
	msg, _ := r.body["clock"].(string)
	if r.code != http.StatusOK || reads != 1 || !strings.Contains(msg, "more than 1s (stock.max_clock_skew)") ||
		!strings.Contains(msg, "replica 10.0.0.2:6379 +1.8s (±2ms)") {
		t.Fatalf("readyz with a replica 1.8 s ahead: got %d %s after %d reads, want 200 with a clock naming it", r.code, r.raw, reads)
	}
	reading = ok
	clock = clock.Add(time.Minute)
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusOK || r.body["clock"] != nil || reads != 2 {
		t.Fatalf("readyz once the clocks agree again: got %d %s after %d reads, want 200 without clock", r.code, r.raw, reads)
	}
}

// With a maxmemory leaving less room than the units left need (the
// default sale's and the items'), /readyz warns in "memory" with the
// figures, and stays ready; with no maxmemory it says nothing.
func TestReadyWarnsOfMemoryHeadroom(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Cleanup(handler.SetNow(func() time.Time { return clock }))
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	base := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}.Derive(true)
	store := redisstore.NewStore(rdb, base)
	if err := store.Reset(t.Context(), 6000); err != nil {
		t.Fatal(err)
	}
	items := redisstore.NewItems(redisstore.ItemsConfig{
		Redis: rdb, Base: base,
		Service: stock.ServiceConfig{Locker: locallock.New(), Backend: "local", LockKey: "k", Fencing: true},
	})
	if _, err := items.Create(t.Context(), redisstore.Item{ID: "x", Stock: 4000}); err != nil {
		t.Fatal(err)
	}
	e := &env{rdb: rdb, store: store}
	e.h = handler.New(handler.Config{Replica: replica},
		handler.Deps{Seller: sellerFunc(func(context.Context) (stock.Sale, error) { return stock.Sale{}, nil }),
			Inventory: store, Items: items, Health: health.New(health.Config{Now: func() time.Time { return clock }, Memory: rdb})})

	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusOK || r.body["memory"] != nil {
		t.Fatalf("readyz without maxmemory: got %d %s, want 200 without memory", r.code, r.raw)
	}
	// 1 MiB of room; 10000 units at 1 KiB need 9.8 MiB.
	used, err := health.UsedMemory(t.Context(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(t.Context(), "maxmemory", strconv.FormatInt(used+1<<20, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(5 * time.Second)
	r := e.do(t, http.MethodGet, "/readyz", "")
	msg, _ := r.body["memory"].(string)
	if r.code != http.StatusOK || !strings.Contains(msg, "below the 9.8 MiB that the 10000 units left need at 1024 B each") {
		t.Fatalf("readyz with 1 MiB of room: got %d %s, want 200 with memory saying 10000 units need 9.8 MiB", r.code, r.raw)
	}
	if err := rdb.ConfigSet(t.Context(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(5 * time.Second)
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.code != http.StatusOK || r.body["memory"] != nil {
		t.Fatalf("readyz with maxmemory 0 again: got %d %s, want 200 without memory", r.code, r.raw)
	}
}
