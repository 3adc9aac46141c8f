package orders

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// Lag counts what the group has not stored, from no stream at all to a
// stream whose lag Redis cannot compute.
func TestLag(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := e.consumer(t, Config{})
	lag := func(want int64, when string) {
		t.Helper()
		if got, err := c.Lag(ctx); err != nil || got != want {
			t.Errorf("%s: Lag = %d, %v; want %d", when, got, err, want)
		}
	}
	lag(0, "no stream")
	e.sell(t, "seckill:orders", "sale-a", "a", 5)
	lag(5, "no group yet")
	if err := e.rdb.XGroupCreate(ctx, "seckill:orders", "orders", "0").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "orders", Consumer: "dead",
		Streams: []string{"seckill:orders", ">"}, Count: 3}).Result()
	if err != nil {
		t.Fatal(err)
	}
	lag(5, "3 pending, 2 undelivered")

	// Deleting an undelivered entry leaves Redis unable to compute lag.
	all, err := e.rdb.XRange(ctx, "seckill:orders", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.XDel(ctx, "seckill:orders", all[3].ID).Err(); err != nil {
		t.Fatal(err)
	}
	groups, err := e.rdb.XInfoGroups(ctx, "seckill:orders").Result()
	if err != nil || len(groups) != 1 || groups[0].Lag != -1 {
		t.Fatalf("XINFO GROUPS after XDEL: %+v, %v; want one group with unknown lag (-1)", groups, err)
	}
	lag(4, "3 pending, 1 undelivered after a hole")

	if err := e.rdb.XAck(ctx, "seckill:orders", "orders", res[0].Messages[0].ID).Err(); err != nil {
		t.Fatal(err)
	}
	lag(3, "one acknowledged")
}
