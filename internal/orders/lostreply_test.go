package orders

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/servers/servertest"
)

// Replies that never come back: a read that delivered entries into this
// consumer's pending list without the consumer seeing them, and an
// acknowledgement that ran unseen. The first are found by XAUTOCLAIM, the
// second cost at most a repeated XACK; every order has one row.
func TestLostReplies(t *testing.T) {
	e := newEnv(t)
	hop := servertest.NewReplyLoser(t, e.redis.Addr())
	lossy := redis.NewClient(&redis.Options{Addr: hop.Addr()})
	t.Cleanup(func() { _ = lossy.Close() })
	c := e.consumer(t, Config{Redis: lossy})

	// Lose the reply of the read that would carry the first sale.
	hop.Lose([]byte("xreadgroup"), 1)
	e.sell(t, "seckill:orders", "sale-a", "a", 50)
	run(t, c)
	e.drained(t, c, "orders", 50)
	if hop.Lost() != 1 {
		t.Fatalf("%d replies lost, want the read's", hop.Lost())
	}
	if s := c.Stats(); s.Claimed == 0 || s.Inserted != 50 {
		t.Errorf("stats %+v: want the unseen delivery claimed back and 50 inserted", s)
	}

	// Lose an acknowledgement's reply.
	hop.Lose([]byte("xack"), 1)
	e.sell(t, "seckill:orders", "sale-a", "b", 50)
	e.drained(t, c, "orders", 100)
	if hop.Lost() != 2 {
		t.Fatalf("%d replies lost, want the read's and the ack's", hop.Lost())
	}
	if s := c.Stats(); s.Inserted != 100 {
		t.Errorf("stats %+v, want 100 inserted", s)
	}

	// Lose every XACK reply for a while, past go-redis's own retries: the
	// consumer retries only the acknowledgement of its committed batch,
	// never the insert.
	hop.Lose([]byte("xack"), 8)
	e.sell(t, "seckill:orders", "sale-a", "c", 50)
	e.drained(t, c, "orders", 150)
	// Drained (the rows in, the acks done on the server) comes before the
	// consumer counts the failure: the lost replies are waited out first.
	eventually(t, func() (bool, string) {
		s := c.Stats()
		return s.Errors > 0, fmt.Sprintf("stats %+v, want the failed acknowledgements counted", s)
	})
	if s := c.Stats(); s.Inserted != 150 || s.Duplicates != 0 {
		t.Errorf("stats %+v, want 150 inserted, no duplicate", s)
	}
}
