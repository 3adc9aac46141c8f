package orders

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"seckill/internal/servers/servertest"

	"github.com/redis/go-redis/v9"
)

// itemList is the items' ids a test adds to while the consumers run.
type itemList struct {
	mu  sync.Mutex
	ids []string
}

func (l *itemList) add(id string) { l.mu.Lock(); l.ids = append(l.ids, id); l.mu.Unlock() }

func (l *itemList) get(context.Context) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ids), nil
}

func itemStream(id string) string { return "{item:" + id + "}:stock:orders" }

// itemConsumers makes the items' tables and consumers on them, named
// replica.
func (e *env) itemConsumers(t *testing.T, ids *itemList, replica string) *ItemConsumers {
	t.Helper()
	if err := EnsureItemsSchema(t.Context(), e.db, DefaultItemsTable); err != nil {
		t.Fatal(err)
	}
	m, err := NewItemConsumers(ItemsConfig{
		Config: Config{Redis: e.rdb, DB: e.db, Consumer: replica, ClaimIdle: 300 * time.Millisecond, TrimEvery: trimEvery,
			Logger: slog.New(slog.NewTextHandler(t.Output(), nil))},
		Items: ids.get, Stream: itemStream,
	})
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	return m
}

// Two replicas store every item's orders, each row with its item, and
// trim each item's stream once stored: items sold before the consumers
// start, one added while they run, and one reset (its stream and group
// deleted) and sold again. A buyer with two orders of one item is two
// rows (the items' table binds no buyer to one order). Two items'
// malformed entries with one entry id are two dead letters.
func TestItemConsumersStoreEveryItem(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	ids := &itemList{ids: []string{"a", "b"}}
	e.sell(t, itemStream("a"), "sale-a", "a", 150)
	e.sell(t, itemStream("b"), "sale-b", "b", 50)
	alice := order{id: "alice-2", sale: "sale-b", user: "alice", token: 99, replica: "r0", stockAfter: 0, ms: time.Now().UnixMilli()}
	e.xadd(t, itemStream("b"), order{id: "alice-1", sale: "sale-b", user: "alice", token: 98, replica: "r0", ms: alice.ms}.values())
	e.xadd(t, itemStream("b"), alice.values())
	for _, id := range []string{"a", "b"} {
		if err := e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: itemStream(id), ID: "9999999999999-1", Values: map[string]any{"bad": "entry"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	r1, r2 := e.itemConsumers(t, ids, "r1"), e.itemConsumers(t, ids, "r2")

	rows := func(item, sale string) int64 {
		return e.count(t, "SELECT COUNT(*) FROM `"+DefaultItemsTable+"` WHERE item = ? AND sale = ?", item, sale)
	}
	stored := func(item, sale string, want int64) {
		t.Helper()
		c, err := r1.For(item)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, func() (bool, string) {
			n := rows(item, sale)
			lag, err := c.Lag(ctx)
			xlen, _ := e.rdb.XLen(ctx, itemStream(item)).Result()
			return n == want && lag == 0 && err == nil && xlen == 0,
				fmt.Sprintf("item %s: %d rows of %s (want %d), lag %d (%v), stream %d (want 0: trimmed); stats %+v %+v",
					item, n, sale, want, lag, err, xlen, r1.Stats(), r2.Stats())
		})
		if d, err := c.Durable(ctx, sale); err != nil || d != want {
			t.Fatalf("item %s: Durable(%s) = %d, %v; want %d", item, sale, d, err, want)
		}
	}
	stored("a", "sale-a", 150)
	stored("b", "sale-b", 52)
	c, _ := r2.For("b")
	got, err := c.Orders(ctx, "sale-b", []string{"alice-1", "alice-2", "nobody"})
	if err != nil || len(got) != 2 || got[1].ID != "alice-2" || got[1].User != "alice" || got[1].Token != 99 {
		t.Fatalf("alice's orders of b from MySQL: %+v, %v; want alice-1 and alice-2", got, err)
	}
	if n := e.count(t, "SELECT COUNT(*) FROM `"+DefaultItemsTable+"_dead` WHERE entry = '9999999999999-1'"); n != 2 {
		t.Fatalf("dead letters of entry 9999999999999-1: %d, want 2 (one per item)", n)
	}

	// An item made while they run is found at the next listing.
	e.sell(t, itemStream("c"), "sale-c", "c", 30)
	ids.add("c")
	stored("c", "sale-c", 30)

	// A reset deletes a's stream and its group; the next sale's are
	// stored all the same.
	if err := e.rdb.Del(ctx, itemStream("a")).Err(); err != nil {
		t.Fatal(err)
	}
	e.sell(t, itemStream("a"), "sale-a2", "a2", 40)
	stored("a", "sale-a2", 40)
	if n := rows("a", "sale-a"); n != 150 {
		t.Fatalf("a's first sale: %d rows after the reset, want 150", n)
	}
	s1, s2 := r1.Stats(), r2.Stats()
	if s1.Inserted+s2.Inserted != 150+52+30+40 || s1.Malformed+s2.Malformed != 2 || s1.Conflicts+s2.Conflicts != 0 {
		t.Fatalf("stats %+v and %+v: want 272 inserted, 2 malformed, no conflicts", s1, s2)
	}
}

// An item's failing store backs off alone: a table that refuses a's rows
// (a column too narrow for its replica names, altered by hand) leaves b's
// stored, and a's are stored once the table is mended.
func TestItemConsumersIsolateAFailingItem(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if err := EnsureItemsSchema(ctx, e.db, DefaultItemsTable); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(ctx, "ALTER TABLE `"+DefaultItemsTable+"` MODIFY replica VARCHAR(4) NOT NULL"); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		e.xadd(t, itemStream("a"), order{id: fmt.Sprintf("a-%d", i), sale: "sale-a", token: uint64(i + 1),
			replica: "a-long-replica-name", ms: time.Now().UnixMilli()}.values())
	}
	e.sell(t, itemStream("b"), "sale-b", "b", 20)
	m := e.itemConsumers(t, &itemList{ids: []string{"a", "b"}}, "r1")
	eventually(t, func() (bool, string) {
		b := e.count(t, "SELECT COUNT(*) FROM `"+DefaultItemsTable+"` WHERE item = 'b'")
		return b == 20 && m.Stats().Errors > 0, fmt.Sprintf("b: %d rows (want 20) while a fails; stats %+v", b, m.Stats())
	})
	if a := e.count(t, "SELECT COUNT(*) FROM `"+DefaultItemsTable+"` WHERE item = 'a'"); a != 0 {
		t.Fatalf("a: %d rows stored by a table that refuses them", a)
	}
	if _, err := e.db.ExecContext(ctx, "ALTER TABLE `"+DefaultItemsTable+"` MODIFY replica VARCHAR(64) CHARACTER SET utf8mb4 NOT NULL"); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() (bool, string) {
		a := e.count(t, "SELECT COUNT(*) FROM `"+DefaultItemsTable+"` WHERE item = 'a'")
		return a == 20, fmt.Sprintf("a: %d rows once the table is mended, want 20; stats %+v", a, m.Stats())
	})
}

// The items' schema is made once by concurrent replicas, and a second
// run finds it whole.
func TestEnsureItemsSchemaConcurrent(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- EnsureItemsSchema(t.Context(), e.db, "race_items") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := EnsureItemsSchema(t.Context(), e.db, "race_items"); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'race_items' AND column_name = 'item'"); n != 1 {
		t.Fatalf("item columns: %d, want 1", n)
	}
	// A table made by 0.9.0, without the format column, gets it at start,
	// its rows format 1.
	if _, err := e.db.ExecContext(t.Context(), "ALTER TABLE race_items DROP COLUMN format"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(t.Context(), "INSERT INTO race_items (item, id, sale, token, replica, stock_after, sold_at, entry) VALUES "+
		"('i', 'o1', 's', 1, 'r', 0, NOW(), '1-0')"); err != nil {
		t.Fatal(err)
	}
	if err := EnsureItemsSchema(t.Context(), e.db, "race_items"); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, "SELECT COUNT(*) FROM race_items WHERE id = 'o1' AND format = 1"); n != 1 {
		t.Fatalf("the 0.9.0 table's row after the migration: %d of format 1, want 1", n)
	}
}

// On a Redis Cluster each item's stream, group and trim are one slot: the
// items' consumers store and trim items spread over the masters.
func TestItemConsumersOnACluster(t *testing.T) {
	e := newEnv(t)
	cl := servertest.RedisCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRetries: -1})
	t.Cleanup(func() { _ = cc.Close() })
	ctx := t.Context()
	ids := []string{"a", "b", "c", "d"}
	for _, id := range ids {
		for i := range 50 {
			o := order{id: fmt.Sprintf("%s-%d", id, i), sale: "sale-" + id, token: uint64(i + 1), replica: "r0", ms: time.Now().UnixMilli()}
			if err := cc.XAdd(ctx, &redis.XAddArgs{Stream: itemStream(id), Values: o.values()}).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := EnsureItemsSchema(ctx, e.db, "cluster_items"); err != nil {
		t.Fatal(err)
	}
	m, err := NewItemConsumers(ItemsConfig{
		Config: Config{Redis: cc, DB: e.db, Table: "cluster_items", Consumer: "r1", TrimEvery: trimEvery,
			Logger: slog.New(slog.NewTextHandler(t.Output(), nil))},
		Items: (&itemList{ids: ids}).get, Stream: itemStream,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer run(t, m)()
	eventually(t, func() (bool, string) {
		rows := e.count(t, "SELECT COUNT(*) FROM cluster_items")
		var left int64
		for _, id := range ids {
			n, _ := cc.XLen(ctx, itemStream(id)).Result()
			left += n
		}
		return rows == 200 && left == 0, fmt.Sprintf("%d rows (want 200), %d entries left in the streams (want 0); %+v", rows, left, m.Stats())
	})
}
