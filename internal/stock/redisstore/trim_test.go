package redisstore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// TrimLedger takes only what every group acknowledged: never an entry
// that is pending or undelivered, in any group; it removes each trimmed
// order's index entry, counts it in LedgerStats (orders == lucky still),
// lists it by id in OrdersByUser, and a Reset starts the count over.
func TestTrimLedgerTakesOnlyAcknowledged(t *testing.T) {
	ctx := t.Context()
	s, rdb := ledgerStore(t, 40, 1)
	svc := ledgerModes[1].service(s, nil)
	for i := range 30 {
		if _, err := svc.ReduceFor(ctx, stock.Buyer{User: fmt.Sprintf("u%d", i%3)}); err != nil {
			t.Fatal(err)
		}
	}
	keys := ledgerKeys(1)
	trim := func(limit int) int64 {
		t.Helper()
		n, err := redisstore.TrimLedger(ctx, rdb, keys, limit)
		if err != nil {
			t.Fatalf("TrimLedger: %v", err)
		}
		return n
	}
	entries, err := rdb.XRange(ctx, ordersKey, "-", "+").Result()
	if err != nil || len(entries) != 30 {
		t.Fatalf("stream: %d entries, %v; want 30", len(entries), err)
	}
	if n := trim(100); n != 0 {
		t.Fatalf("no group: trimmed %d, want 0 (nothing is stored)", n)
	}
	if err := rdb.XGroupCreate(ctx, ordersKey, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if n := trim(100); n != 0 {
		t.Fatalf("nothing delivered: trimmed %d, want 0", n)
	}
	read := func(group string, n int64) {
		t.Helper()
		err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "c", Streams: []string{ordersKey, ">"}, Count: n}).Err()
		if err != nil {
			t.Fatal(err)
		}
	}
	ack := func(group string, from, to int) {
		t.Helper()
		var ids []string
		for _, e := range entries[from:to] {
			ids = append(ids, e.ID)
		}
		if err := rdb.XAck(ctx, ordersKey, group, ids...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// 20 delivered, 0..9 and 15..19 acknowledged: 10..14 are pending.
	read("g", 20)
	ack("g", 0, 10)
	ack("g", 15, 20)
	if n := trim(100); n != 10 {
		t.Fatalf("trimmed %d, want the 10 below the oldest pending entry", n)
	}
	first, err := rdb.XRangeN(ctx, ordersKey, "-", "+", 1).Result()
	if err != nil || len(first) != 1 || first[0].ID != entries[10].ID {
		t.Fatalf("first entry left %v (%v), want the oldest pending one %s", first, err, entries[10].ID)
	}
	st := wantLedger(t, s, 30, 3, 30)
	if st.Trimmed != 10 {
		t.Fatalf("ledger %+v: want 10 trimmed", st)
	}
	gone, kept := entries[0].Values["id"].(string), entries[10].Values["id"].(string)
	if _, err := s.Order(ctx, gone); !errors.Is(err, stock.ErrNoOrder) {
		t.Fatalf("Order(trimmed): %v, want ErrNoOrder (the durable copy answers it)", err)
	}
	if o, err := s.Order(ctx, kept); err != nil || o.Trimmed() {
		t.Fatalf("Order(pending): %+v, %v; want it from the stream", o, err)
	}
	if n, err := rdb.HLen(ctx, keys.Derive(true).OrderIndex).Result(); err != nil || n != 20 {
		t.Fatalf("index holds %d entries (%v), want the 20 untrimmed orders'", n, err)
	}
	page, total, err := s.OrdersByUser(ctx, "u0", 0, 100)
	if err != nil || total != 10 || len(page) != 10 {
		t.Fatalf("u0's orders: %d of %d, %v; want 10 of 10", len(page), total, err)
	}
	var trimmed int
	for _, o := range page {
		if o.Trimmed() {
			trimmed++
			if o.ID == "" || o.Sale != st.Sale || o.User != "" {
				t.Fatalf("trimmed order listed as %+v, want its id and sale alone", o)
			}
		}
	}
	if trimmed != 4 { // u0 bought entries 0, 3, 6 and 9
		t.Fatalf("u0 has %d trimmed orders listed, want 4", trimmed)
	}

	// A second group that read nothing holds everything back.
	if err := rdb.XGroupCreate(ctx, ordersKey, "g2", "0").Err(); err != nil {
		t.Fatal(err)
	}
	ack("g", 10, 15)
	if n := trim(100); n != 0 {
		t.Fatalf("with a group that read nothing: trimmed %d, want 0", n)
	}
	if err := rdb.XGroupDestroy(ctx, ordersKey, "g2").Err(); err != nil {
		t.Fatal(err)
	}
	// At most limit a run; the undelivered 20..29 stay.
	if n := trim(3); n != 3 {
		t.Fatalf("limit 3: trimmed %d", n)
	}
	if n := trim(100); n != 7 {
		t.Fatalf("trimmed %d, want the other 7 delivered and acknowledged", n)
	}
	if n := trim(100); n != 0 {
		t.Fatalf("again: trimmed %d, want 0", n)
	}
	if n, err := rdb.XLen(ctx, ordersKey).Result(); err != nil || n != 10 {
		t.Fatalf("stream holds %d (%v), want the 10 undelivered", n, err)
	}
	if st := wantLedger(t, s, 30, 3, 30); st.Trimmed != 20 {
		t.Fatalf("ledger %+v: want 20 trimmed", st)
	}

	if err := s.Reset(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if st := wantLedger(t, s, 0, 0, 0); st.Trimmed != 0 {
		t.Fatalf("after a reset: %+v, want the trimmed count gone", st)
	}
	if _, err := redisstore.TrimLedger(ctx, rdb, redisstore.Keys{}, 1); !errors.Is(err, redisstore.ErrNoStream) {
		t.Fatalf("no stream: %v, want ErrNoStream", err)
	}
}
