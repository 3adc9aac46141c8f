package orders

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"seckill/internal/lock/locallock"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// Once stored and trimmed from Redis, an order is no longer in the
// ledger's stream: the ledger lists it by id (OrdersByUser) and Orders
// reads it from the table, equal to what the ledger had, for its sale
// only.
func TestTrimmedOrdersAreRead(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	keys := redisstore.Keys{Stock: "r:stock", Lucky: "r:lucky", Fence: "r:fence", Orders: "r:orders"}.Derive(true)
	store := redisstore.NewStore(e.rdb, keys)
	if err := store.Reset(ctx, 30); err != nil {
		t.Fatal(err)
	}
	svc := stock.NewService(stock.ServiceConfig{Store: store, Locker: locallock.New(), Backend: "test",
		LockKey: "r:lock", Replica: "r1", Fencing: true, WaitTimeout: time.Minute}) // every buyer served, however loaded the machine
	buyer := func(i int) stock.Buyer {
		if i%3 == 0 {
			return stock.Buyer{}
		}
		return stock.Buyer{User: fmt.Sprintf("u%d", i), Key: fmt.Sprintf("k%d", i)}
	}
	ids := sell(t, svc, 30, buyer)
	want := map[string]stock.Order{}
	for _, id := range ids {
		o, err := store.Order(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		o.Time = o.Time.UTC()
		want[id] = o
	}

	c := e.consumer(t, Config{Stream: keys.Orders, Table: "read_orders", TrimEvery: trimEvery})
	run(t, c)
	e.trimmed(t, keys, "read_orders", 30)

	sale := want[ids[0]].Sale
	got, err := c.Orders(ctx, sale, append(slices.Clone(ids), "no-such-order"))
	if err != nil || len(got) != len(ids) {
		t.Fatalf("Orders: %d orders, %v; want %d", len(got), err, len(ids))
	}
	for i, o := range got {
		if o != want[ids[i]] {
			t.Errorf("order %d from MySQL %+v, want the ledger's %+v", i, o, want[ids[i]])
		}
		if _, err := store.Order(ctx, o.ID); !errors.Is(err, stock.ErrNoOrder) {
			t.Errorf("Order(%s) from Redis: %v, want ErrNoOrder once trimmed", o.ID, err)
		}
	}
	page, total, err := store.OrdersByUser(ctx, "u1", 0, 10)
	if err != nil || total != 1 || len(page) != 1 || !page[0].Trimmed() || page[0].ID != ids[1] || page[0].Sale != sale {
		t.Fatalf("u1's orders: %+v of %d, %v; want %s listed as trimmed", page, total, err, ids[1])
	}
	if got, err := c.Orders(ctx, "another-sale", ids[:3]); err != nil || len(got) != 0 {
		t.Fatalf("Orders of another sale: %+v, %v; want none", got, err)
	}
	if _, err := c.Orders(ctx, sale, make([]string, MaxRead+1)); !errors.Is(err, ErrTooManyIDs) {
		t.Fatalf("Orders of %d ids: %v, want ErrTooManyIDs", MaxRead+1, err)
	}
}
