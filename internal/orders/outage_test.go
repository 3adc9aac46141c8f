package orders

import (
	"fmt"
	"testing"
	"time"

	"seckill/internal/testwait"
)

// MariaDB stops during the drain: the consumer keeps running and failing,
// the entries stay pending and counted by Lag, and once the server is back
// every one is stored. A batch read before a reset is kept through it.
func TestMySQLDown(t *testing.T) {
	e := newEnv(t)
	c := e.consumer(t, Config{})
	stop := run(t, c)
	e.sell(t, "seckill:orders", "sale-a", "a", 20)
	e.drained(t, c, "orders", 20)

	if err := e.maria.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	e.sell(t, "seckill:orders", "sale-a", "b", 200)
	waitHeld(t, e, c, 200) // a batch read and held, the rest waiting
	if !c.running.Load() {
		t.Fatal("Run returned while MariaDB was down")
	}
	startMaria(t, e)
	e.drained(t, c, "orders", 220)
	if s := c.Stats(); s.Inserted != 220 || s.Errors < 2 {
		t.Errorf("stats %+v, want 220 inserted and the outage's errors counted", s)
	}

	// Down again, and the sale is reset while a batch of all its orders is
	// held: they were sold, so they are stored although their stream is
	// gone. (Stopped while they are added, so that one read takes them all.)
	stop()
	e.sell(t, "seckill:orders", "sale-c", "c", 30)
	if err := e.maria.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	run(t, c)
	waitHeld(t, e, c, 30)
	if p, err := e.rdb.XPending(t.Context(), "seckill:orders", "orders").Result(); err != nil || p.Count != 30 {
		t.Fatalf("pending %+v, %v; want the 30 entries in one held batch", p, err)
	}
	if err := e.rdb.Del(t.Context(), "seckill:orders").Err(); err != nil {
		t.Fatal(err)
	}
	e.sell(t, "seckill:orders", "sale-d", "d", 5)
	startMaria(t, e)
	e.drained(t, c, "orders", 255)
	for sale, want := range map[string]int64{"sale-a": 220, "sale-c": 30, "sale-d": 5} {
		if got, err := c.Durable(t.Context(), sale); err != nil || got != want {
			t.Errorf("Durable(%s) = %d, %v; want %d", sale, got, err, want)
		}
	}
}

// waitHeld waits until the group has pending entries (a batch read and not
// stored), a failed attempt has been counted, and Lag still counts all
// lag entries.
func waitHeld(t *testing.T, e *env, c *Consumer, lag int64) {
	t.Helper()
	errs := c.Stats().Errors
	eventually(t, func() (bool, string) {
		p, err := e.rdb.XPending(t.Context(), "seckill:orders", "orders").Result()
		l, lerr := c.Lag(t.Context())
		s := c.Stats()
		return err == nil && p.Count > 0 && lerr == nil && l == lag && s.Errors > errs,
			fmt.Sprintf("pending %v (err %v), lag %d (err %v), stats %+v; want some pending, lag %d, errors above %d",
				p, err, l, lerr, s, lag, errs)
	})
}

func startMaria(t *testing.T, e *env) {
	t.Helper()
	if err := e.maria.Start(testwait.Until(t)); err != nil {
		t.Fatal(err)
	}
}

// Redis restarts empty (no persistence, like a lost server): the consumer
// rides out the outage, makes the group again and stores the new entries.
func TestRedisDown(t *testing.T) {
	e := newEnv(t)
	c := e.consumer(t, Config{})
	run(t, c)
	e.sell(t, "seckill:orders", "sale-a", "a", 10)
	e.drained(t, c, "orders", 10)
	if err := e.redis.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	errs := c.Stats().Errors
	eventually(t, func() (bool, string) {
		return c.Stats().Errors >= errs+2, fmt.Sprintf("stats %+v, want at least 2 more errors", c.Stats())
	})
	if err := e.redis.Start(testwait.Until(t)); err != nil {
		t.Fatal(err)
	}
	e.sell(t, "seckill:orders", "sale-b", "b", 15)
	e.drained(t, c, "orders", 25)
	if got, err := c.Durable(t.Context(), "sale-b"); err != nil || got != 15 {
		t.Errorf("Durable(sale-b) = %d, %v; want 15", got, err)
	}
}
