package orders

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

// An entry of a newer ledger format than this build reads is not stored,
// dead-lettered nor acknowledged: the entries around it are stored, it
// stays pending (met again at each claim round), for a newer replica's
// consumer to claim; a consumer restarted under the same name, which
// reads its own pending entries first, gets past it to the new ones.
func TestNewerEntriesWaitForANewerReplica(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	const stream = "seckill:orders"
	entry := func(id, format string) map[string]any {
		v := order{id: id, sale: "s", token: 1, replica: "r0", stockAfter: 1, ms: 1795420836805}.values()
		if format != "" {
			v["format"] = format
		}
		return v
	}
	e.xadd(t, stream, entry("before-formats", ""))
	newer := e.xadd(t, stream, entry("newer", "2"))
	e.xadd(t, stream, entry("this-build", "1"))

	c := e.consumer(t, Config{})
	stop := run(t, c)
	// Met at the read, then again at a claim round (ClaimIdle 300ms).
	eventually(t, func() (bool, string) {
		s := c.Stats()
		return s.Inserted == 2 && s.Newer >= 2, fmt.Sprintf("stats %+v; want 2 inserted, the newer entry met twice", s)
	})
	stop()
	if n := e.count(t, "SELECT COUNT(*) FROM orders WHERE id IN ('before-formats', 'this-build') AND format = 1"); n != 2 {
		t.Errorf("%d rows of format 1 for the two entries this build reads; want 2", n)
	}
	if n := e.count(t, "SELECT COUNT(*) FROM orders WHERE id = 'newer'"); n != 0 {
		t.Error("the newer entry was stored as a row of this build's")
	}
	if n := e.count(t, "SELECT COUNT(*) FROM orders_dead"); n != 0 {
		t.Errorf("%d dead letters; want none: a newer entry is not malformed", n)
	}
	pending, err := e.rdb.XPending(ctx, stream, DefaultGroup).Result()
	if err != nil || pending.Count != 1 || pending.Lower != newer {
		t.Fatalf("pending %+v (%v); want the newer entry alone", pending, err)
	}
	if s := c.Stats(); s.Malformed != 0 {
		t.Errorf("stats %+v: want nothing malformed", s)
	}

	// Restarted under its name, with the newer entry in its own pending
	// list: it stores what comes next.
	e.xadd(t, stream, entry("after-restart", "1"))
	again := e.consumer(t, Config{})
	run(t, again)
	// Stored, then acknowledged: the lag is the newer entry alone.
	eventually(t, func() (bool, string) {
		n := e.count(t, "SELECT COUNT(*) FROM orders")
		lag, err := again.Lag(ctx)
		return n == 3 && err == nil && lag == 1, fmt.Sprintf("%d rows, lag %d (%v); want 3 rows and the newer entry pending (stats %+v)", n, lag, err, again.Stats())
	})

	// A newer replica's consumer claims it, stores it and acknowledges it
	// (done here by hand): the lag is 0.
	claimed, err := e.rdb.XClaim(ctx, &redis.XClaimArgs{Stream: stream, Group: DefaultGroup, Consumer: "newer-replica",
		Messages: []string{newer}}).Result()
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	if err := e.rdb.XAck(ctx, stream, DefaultGroup, newer).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() (bool, string) {
		lag, err := again.Lag(ctx)
		return err == nil && lag == 0, fmt.Sprintf("lag %d (%v); want 0", lag, err)
	})
}

// Rows carry their format; a row of a newer one is refused when read, as
// unavailable, not read as this build's.
func TestNewerRowsAreRefused(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := e.consumer(t, Config{})
	e.sell(t, "seckill:orders", "s", "o", 2)
	run(t, c)
	e.drained(t, c, "orders", 2)
	if got, err := c.Orders(ctx, "s", []string{"o-0", "o-1"}); err != nil || len(got) != 2 {
		t.Fatalf("Orders: %+v, %v; want both", got, err)
	}
	if _, err := e.db.ExecContext(ctx, "UPDATE orders SET format = 2 WHERE id = 'o-1'"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Orders(ctx, "s", []string{"o-0", "o-1"})
	if !errors.Is(err, stock.ErrOrderFormat) || !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("Orders over a row of format 2: %v; want ErrOrderFormat (unavailable)", err)
	}
	if got, err := c.Orders(ctx, "s", []string{"o-0"}); err != nil || len(got) != 1 {
		t.Fatalf("Orders of the row of format 1 alone: %+v, %v", got, err)
	}
}
