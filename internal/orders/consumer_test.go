package orders

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/testwait"
)

// The happy path: every entry becomes one row with its fields, lag ends at
// 0; the same entries delivered again to another group leave the rows as
// they are.
func TestDrainAndRedeliver(t *testing.T) {
	e := newEnv(t)
	const n = 250 // more than two batches
	c := e.consumer(t, Config{})
	orders := e.sell(t, "seckill:orders", "sale-a", "a", n)
	named := order{id: "named-1", sale: "sale-a", user: "U1", key: "k-1", token: 1<<63 + 5,
		replica: "replica-é", stockAfter: 0, ms: 1795420836805}
	entry := e.xadd(t, "seckill:orders", named.values())
	run(t, c)
	e.drained(t, c, "orders", n+1)
	if s := c.Stats(); s.Inserted != n+1 || s.Duplicates != 0 || s.Malformed != 0 {
		t.Errorf("stats %+v, want %d inserted, 0 duplicates, 0 malformed", s, n+1)
	}
	if got, err := c.Durable(t.Context(), "sale-a"); err != nil || got != n+1 {
		t.Errorf("Durable(sale-a) = %d, %v; want %d", got, err, n+1)
	}

	// The row holds the entry's fields; anonymous and keyless is NULL.
	var (
		user, key       sql.NullString
		token           uint64
		replica, sEntry string
		stockAfter      int64
		soldAt          time.Time
	)
	err := e.db.QueryRowContext(t.Context(), "SELECT `user`, idem_key, token, replica, stock_after, sold_at, entry FROM orders WHERE id = ?",
		named.id).Scan(&user, &key, &token, &replica, &stockAfter, &soldAt, &sEntry)
	if err != nil {
		t.Fatal(err)
	}
	if user.String != "U1" || key.String != "k-1" || token != named.token || replica != named.replica ||
		stockAfter != 0 || sEntry != entry {
		t.Errorf("row = %v %v %d %q %d %q, want U1 k-1 %d %q 0 %q", user, key, token, replica, stockAfter, sEntry,
			named.token, named.replica, entry)
	}
	if want := time.UnixMilli(named.ms).UTC(); !soldAt.Equal(want) {
		t.Errorf("sold_at = %v, want %v", soldAt, want)
	}
	if got := e.count(t, "SELECT COUNT(*) FROM orders WHERE `user` IS NULL AND idem_key IS NULL"); got != n {
		t.Errorf("%d anonymous keyless rows with NULL user and key, want %d", got, n)
	}
	if got := e.count(t, "SELECT COUNT(*) FROM orders WHERE id = ? AND token = ?", orders[7].id, orders[7].token); got != 1 {
		t.Errorf("order %s: %d rows with its token, want 1", orders[7].id, got)
	}

	// Another group delivers every entry a second time.
	again := e.consumer(t, Config{Group: "again", Consumer: "r2"})
	run(t, again)
	e.drained(t, again, "orders", n+1)
	if s := again.Stats(); s.Inserted != 0 || s.Duplicates != n+1 || s.Conflicts != 0 {
		t.Errorf("second delivery: stats %+v, want 0 inserted, %d duplicates, 0 conflicts", s, n+1)
	}
}

// A consumer that read entries and died before XACK leaves them pending;
// another one claims them once idle and stores them.
func TestCrashedConsumerIsClaimed(t *testing.T) {
	e := newEnv(t)
	const n = 120
	ctx := t.Context()
	if err := e.rdb.XGroupCreateMkStream(ctx, "seckill:orders", "orders", "0").Err(); err != nil {
		t.Fatal(err)
	}
	e.sell(t, "seckill:orders", "sale-a", "a", n)
	res, err := e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "orders", Consumer: "crashed",
		Streams: []string{"seckill:orders", ">"}, Count: n}).Result()
	if err != nil || len(res[0].Messages) != n {
		t.Fatalf("the crashing consumer read %v, %v; want %d entries", res, err, n)
	}
	c := e.consumer(t, Config{Consumer: "survivor"})
	if lag, err := c.Lag(ctx); err != nil || lag != n {
		t.Errorf("Lag with %d pending = %d, %v; want %d", n, lag, err, n)
	}
	run(t, c)
	e.drained(t, c, "orders", n)
	if s := c.Stats(); s.Claimed < n || s.Inserted != n {
		t.Errorf("stats %+v, want at least %d claimed and %d inserted", s, n, n)
	}
	p, err := e.rdb.XPending(ctx, "seckill:orders", "orders").Result()
	if err != nil || p.Count != 0 {
		t.Errorf("pending after the claim: %+v, %v; want none", p, err)
	}
}

// A consumer restarted under the same name stores its own pending entries
// first, without waiting for ClaimIdle.
func TestRestartedConsumerStoresItsPending(t *testing.T) {
	e := newEnv(t)
	const n = 30
	ctx := t.Context()
	if err := e.rdb.XGroupCreateMkStream(ctx, "seckill:orders", "orders", "0").Err(); err != nil {
		t.Fatal(err)
	}
	e.sell(t, "seckill:orders", "sale-a", "a", n)
	if err := e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "orders", Consumer: "r1",
		Streams: []string{"seckill:orders", ">"}, Count: n}).Err(); err != nil {
		t.Fatal(err)
	}
	c := e.consumer(t, Config{Consumer: "r1", ClaimIdle: time.Hour})
	run(t, c)
	e.drained(t, c, "orders", n)
	if s := c.Stats(); s.Claimed != 0 || s.Inserted != n {
		t.Errorf("stats %+v, want 0 claimed, %d inserted", s, n)
	}
}

// A reset deletes the stream and its group under a running consumer: it
// makes the group again and stores the next sale's entries.
func TestResetRecreatesGroup(t *testing.T) {
	e := newEnv(t)
	c := e.consumer(t, Config{})
	run(t, c)
	e.sell(t, "seckill:orders", "sale-a", "a", 40)
	e.drained(t, c, "orders", 40)
	if err := e.rdb.Del(t.Context(), "seckill:orders").Err(); err != nil {
		t.Fatal(err)
	}
	e.sell(t, "seckill:orders", "sale-b", "b", 25)
	e.drained(t, c, "orders", 65)
	for sale, want := range map[string]int64{"sale-a": 40, "sale-b": 25, "sale-c": 0} {
		if got, err := c.Durable(t.Context(), sale); err != nil || got != want {
			t.Errorf("Durable(%s) = %d, %v; want %d", sale, got, err, want)
		}
	}
	if s := c.Stats(); s.Groups < 2 {
		t.Errorf("stats %+v, want the group created at least twice (start, reset)", s)
	}
}

// With a per-user limit of 1 a second order of one buyer in one sale is
// refused by the table, counted as a duplicate and a conflict, and
// acknowledged; anonymous buyers and other sales are not bound.
func TestUniqueBuyer(t *testing.T) {
	e := newEnv(t)
	c := e.consumer(t, Config{UniqueBuyer: true})
	base := order{sale: "sale-a", replica: "r0", token: 1, ms: time.Now().UnixMilli()}
	add := func(id, sale, user string) {
		o := base
		o.id, o.sale, o.user = id, sale, user
		e.xadd(t, "seckill:orders", o.values())
	}
	add("o1", "sale-a", "U1")
	add("o2", "sale-a", "U1") // oversold: the same buyer again
	add("o3", "sale-a", "u1") // another buyer (case matters)
	add("o4", "sale-a", "")   // anonymous
	add("o5", "sale-a", "")   // anonymous again
	add("o6", "sale-b", "U1") // the next sale
	run(t, c)
	e.drained(t, c, "orders", 5)
	if got := e.count(t, "SELECT COUNT(*) FROM orders WHERE id = 'o2'"); got != 0 {
		t.Errorf("the second order of U1 in sale-a was stored")
	}
	if s := c.Stats(); s.Inserted != 5 || s.Duplicates != 1 || s.Conflicts != 1 {
		t.Errorf("stats %+v, want 5 inserted, 1 duplicate, 1 conflict", s)
	}
}

// A unit has one order and a buyer's key one order, whatever the per-user
// limit: a second is refused by the table, counted as a conflict and
// acknowledged, and the first one stays. It is what a stock Redis that went
// back in time and sold a unit again leaves in the stream. Entries without
// a unit (from before units were numbered) and anonymous keys are not
// bound by those keys.
func TestUnitAndKeySoldOnce(t *testing.T) {
	e := newEnv(t)
	c := e.consumer(t, Config{})
	base := order{sale: "sale-a", replica: "r0", token: 1, ms: time.Now().UnixMilli()}
	add := func(id, user, key string, unit int64) {
		o := base
		o.id, o.user, o.key, o.unit = id, user, key, unit
		e.xadd(t, "seckill:orders", o.values())
	}
	add("o1", "U1", "k1", 1)
	add("o2", "U2", "k2", 1) // unit 1 again: sold twice
	add("o3", "U1", "k1", 2) // U1's key k1 again: sold twice
	add("o4", "U2", "k1", 3) // another buyer's k1: its own purchase
	add("o5", "", "k9", 4)   // anonymous
	add("o6", "", "k9", 5)   // anonymous, same key: not bound (NULL user)
	add("o7", "U3", "", 0)   // no unit: not bound
	add("o8", "U4", "", 0)
	run(t, c)
	e.drained(t, c, "orders", 6)
	if got := e.count(t, "SELECT COUNT(*) FROM orders WHERE id IN ('o2', 'o3')"); got != 0 {
		t.Errorf("a unit or a key sold twice was stored")
	}
	if got := e.count(t, "SELECT COUNT(*) FROM orders WHERE id = 'o1' AND unit = 1"); got != 1 {
		t.Errorf("the unit's first order is not stored with its unit")
	}
	if s := c.Stats(); s.Inserted != 6 || s.Conflicts != 2 {
		t.Errorf("stats %+v, want 6 inserted, 2 conflicts", s)
	}
	// Kept in the dead-letter table: acknowledged, they may be trimmed
	// from Redis.
	if got := e.count(t, "SELECT COUNT(*) FROM orders_dead WHERE reason LIKE 'refused%' AND (raw LIKE '%\"o2\"%' OR raw LIKE '%\"o3\"%')"); got != 2 {
		t.Errorf("%d dead letters of the refused orders, want 2", got)
	}
}

// A malformed entry is dead-lettered and acknowledged with its batch; the
// good ones around it are stored.
func TestMalformedEntryIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	c := e.consumer(t, Config{})
	good := order{id: "o1", sale: "sale-a", replica: "r0", token: 1, ms: time.Now().UnixMilli()}
	e.xadd(t, "seckill:orders", good.values())
	noToken := good.values()
	noToken["id"] = "o2"
	delete(noToken, "token")
	bad := e.xadd(t, "seckill:orders", noToken)
	spaced := good.values()
	spaced["id"], spaced["user"] = "o3", "U 1"
	bad2 := e.xadd(t, "seckill:orders", spaced)
	good.id = "o4"
	e.xadd(t, "seckill:orders", good.values())
	run(t, c)
	e.drained(t, c, "orders", 2)
	if s := c.Stats(); s.Malformed != 2 || s.Inserted != 2 {
		t.Errorf("stats %+v, want 2 malformed, 2 inserted", s)
	}
	for entry, reason := range map[string]string{bad: "%token%", bad2: "%user%"} {
		if got := e.count(t, "SELECT COUNT(*) FROM orders_dead WHERE entry = ? AND reason LIKE ? AND raw LIKE '%sale-a%'", entry, reason); got != 1 {
			t.Errorf("dead letter of %s (reason like %s): %d rows, want 1", entry, reason, got)
		}
	}
}

// Run returns promptly when its context ends, whether it is blocked in a
// read or backing off from a dead database, and leaves no goroutine.
func TestRunStopsPromptly(t *testing.T) {
	e := newEnv(t)
	base := runtime.NumGoroutine()
	backoffs := &retryLog{Handler: slog.NewTextHandler(t.Output(), nil), ch: make(chan retryRecord, 64)}
	c := e.consumer(t, Config{Logger: slog.New(backoffs)})
	// Blocked in XREADGROUP: nothing to read. The read ends by its block
	// (readBlock), by design; a Run that did not end at all fails in stop.
	// How long it took is only noted.
	stop := run(t, c)
	e.sell(t, "seckill:orders", "sale-a", "a", 3)
	e.drained(t, c, "orders", 3)
	start := time.Now()
	stop()
	d := time.Since(start)
	note := ""
	if d > 1500*time.Millisecond {
		note = " (SLOW)"
	}
	t.Logf("Run returned %v after its context ended, from a blocked read (block %v)%s", d.Round(time.Millisecond), readBlock, note)

	// Backing off: the table is gone. Cancelled at the start of a backoff
	// of at least minBackoff, Run must return before that backoff would
	// have ended: measured against the backoff it was in, not a number a
	// busy machine can outrun.
	const minBackoff = 400 * time.Millisecond // the fifth backoff at the latest
	if _, err := e.db.ExecContext(t.Context(), "DROP TABLE orders"); err != nil {
		t.Fatal(err)
	}
	stop = run(t, c)
	e.sell(t, "seckill:orders", "sale-a", "b", 3)
	until := testwait.Until(t)
	var last retryRecord
	for last.in < minBackoff {
		select {
		case last = <-backoffs.ch:
		case <-until.Done():
			t.Fatalf("no backoff of %v or more logged; stats %+v", minBackoff, c.Stats())
		}
	}
	stop()
	if d := time.Since(last.at); d >= last.in {
		t.Errorf("Run returned %v after it began a %v backoff: it slept the backoff out instead of returning when cancelled", d, last.in)
	} else {
		t.Logf("Run returned %v into a %v backoff", d, last.in.Round(time.Millisecond))
	}
	_ = e.rdb.Close()
	_ = e.db.Close()
	eventually(t, func() (bool, string) {
		n := runtime.NumGoroutine()
		return n <= base, fmt.Sprintf("%d goroutines, %d before the consumer", n, base)
	})
}

// Two replicas drain one sale together and one of them is stopped midway:
// the other finishes (claiming what the stopped one left pending), every
// order has one row, and between them they inserted each exactly once.
func TestReplicasShareAndOneStops(t *testing.T) {
	e := newEnv(t)
	const n = 3000
	c1 := e.consumer(t, Config{Consumer: "r1", Batch: 50})
	c2 := e.consumer(t, Config{Consumer: "r2", Batch: 50})
	e.sell(t, "seckill:orders", "sale-a", "a", n)
	stop1 := run(t, c1)
	run(t, c2)
	eventually(t, func() (bool, string) {
		return c1.Stats().Inserted > 0 && c2.Stats().Inserted > 0, fmt.Sprintf("r1 %+v, r2 %+v: want both inserting", c1.Stats(), c2.Stats())
	})
	stop1()
	e.drained(t, c2, "orders", n)
	s1, s2 := c1.Stats(), c2.Stats()
	if s1.Inserted+s2.Inserted != n {
		t.Errorf("r1 inserted %d, r2 %d: %d in all, want %d", s1.Inserted, s2.Inserted, s1.Inserted+s2.Inserted, n)
	}
	if s1.Inserted >= n {
		t.Errorf("r1 inserted all %d before it was stopped: nothing was left to share", n)
	}
}

// retryLog passes records on to its Handler and reports the backoff of
// each "orders: retrying" record on ch (dropped when ch is full).
type retryLog struct {
	slog.Handler
	ch chan retryRecord
}

// retryRecord is one logged backoff: when it was logged (just before the
// sleep began) and how long it is.
type retryRecord struct {
	at time.Time
	in time.Duration
}

func (h *retryLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "orders: retrying" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key != "in" {
				return true
			}
			select {
			case h.ch <- retryRecord{at: r.Time, in: a.Value.Duration()}:
			default:
			}
			return false
		})
	}
	return h.Handler.Handle(ctx, r)
}

func (h *retryLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &retryLog{Handler: h.Handler.WithAttrs(as), ch: h.ch}
}

func (h *retryLog) WithGroup(name string) slog.Handler {
	return &retryLog{Handler: h.Handler.WithGroup(name), ch: h.ch}
}
