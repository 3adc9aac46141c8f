package audit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/election/audit"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// With stock.segments the stock is the sum of the segment keys: the audit
// must add them up (or every segmented sale reads as oversold) and flag a
// negative segment even when the sum balances.
func TestCheckSumsSegments(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	aud := audit.New(rdb, audit.Config{
		Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Initial: "stock:initial",
		Segments: 3, Replica: "r-1", Backend: "etcd",
	})

	// 10 units over 3 segments, 4 sold: 6 left.
	if err := rdb.MSet(ctx, "stock", 2, "stock:1", 1, "stock:2", 3, "lucky", 4, "stock:initial", 10).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := aud.Check(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || r.Stock != 6 || r.Lucky != 4 || r.Initial != 10 {
		t.Fatalf("balanced segmented sale: got %+v, want OK with stock 6, lucky 4, initial 10", r)
	}

	// A segment sold one unit too many while another undersold: the sum
	// still balances, the segment does not.
	if err := rdb.MSet(ctx, "stock", 3, "stock:1", -1, "stock:2", 4).Err(); err != nil {
		t.Fatal(err)
	}
	r, err = aud.Check(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "segment 1 is negative") {
		t.Fatalf("negative segment: got OK=%v problems %q, want one problem naming stock:1", r.OK, r.Problems)
	}

	// A counter no sale can use (lucky overwritten by hand) is a problem
	// the audit records, naming the key, not an error that skips the run.
	if err := rdb.Set(ctx, "lucky", "four", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if r, err = aud.Check(ctx, 1); err != nil || r.OK || len(r.Problems) != 1 ||
		!strings.Contains(r.Problems[0], "lucky") || !strings.Contains(r.Problems[0], "integer") {
		t.Fatalf("lucky not an integer: got %+v, %v; want one problem naming the key", r, err)
	}
	if err := rdb.Set(ctx, "lucky", 4, 0).Err(); err != nil {
		t.Fatal(err)
	}

	// One segment (the default) reads the key alone, as before segments:
	// stock:1 and stock:2 are not part of the sale.
	one := audit.New(rdb, audit.Config{
		Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Initial: "stock:initial",
		Replica: "r-1", Backend: "etcd",
	})
	if err := rdb.MSet(ctx, "stock", 6).Err(); err != nil {
		t.Fatal(err)
	}
	if r, err = one.Check(ctx, 1); err != nil || !r.OK || r.Stock != 6 {
		t.Fatalf("one segment: got %+v, %v; want OK with stock 6", r, err)
	}

	// Reservations gave 2 units back: lucky still counts the 4 taken, and
	// the books are stock + lucky - returned = initial (8 + 4 - 2 = 10).
	if err := rdb.MSet(ctx, "stock", 8, "stock:returned", 2).Err(); err != nil {
		t.Fatal(err)
	}
	if r, err = one.Check(ctx, 1); err != nil || !r.OK || r.Returned != 2 {
		t.Fatalf("2 units returned: got %+v, %v; want OK, returned 2", r, err)
	}
	if err := rdb.Del(ctx, "stock:returned").Err(); err != nil {
		t.Fatal(err)
	}
	if r, err = one.Check(ctx, 1); err != nil || r.OK {
		t.Fatalf("the same stock with no returns recorded: got %+v, %v; want 2 units oversold", r, err)
	}
}

// The audit recorded the fence as ":<token>": it read the hash's field
// "backend", but the fenced read writes the lock identity under "lock".
// The fence here is written by the store itself, as a sale's read does.
func TestCheckRecordsTheFencesLock(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}.Derive(false)
	store := redisstore.NewStore(rdb, keys)
	if err := store.Reset(ctx, 10); err != nil {
		t.Fatal(err)
	}
	aud := audit.New(rdb, audit.Config{
		Stock: keys.Stock, Lucky: keys.Lucky, Fence: keys.Fence, Initial: keys.Initial, Replica: "r-1", Backend: "redis",
	})
	if r, err := aud.Check(ctx, 1); err != nil || r.Fence != "" {
		t.Fatalf("before any sale: got fence %q, %v; want none", r.Fence, err)
	}
	if _, err := store.Read(ctx, stock.Fence{Lock: "redis/seckill:lock", Token: 7, Lease: "a1"}); err != nil {
		t.Fatal(err)
	}
	r, err := aud.Check(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := "redis/seckill:lock:7"; r.Fence != want {
		t.Fatalf("got fence %q, want %q (the lock identity, then the token)", r.Fence, want)
	}
}

// With items, the audit checks every item's books beside the default
// sale's: an oversold item is a problem named for it, and the record
// carries how many items it checked.
func TestCheckItems(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	base := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}.Derive(false)
	items := redisstore.NewItems(redisstore.ItemsConfig{Redis: rdb, Base: base,
		Service: stock.ServiceConfig{Backend: "none", Mode: stock.ModeAtomic}})
	for _, id := range []string{"a", "b"} {
		if _, err := items.Create(ctx, redisstore.Item{ID: id, Stock: 5}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.MSet(ctx, "stock", 10, "lucky", 0, "stock:initial", 10).Err(); err != nil {
		t.Fatal(err)
	}
	aud := audit.New(rdb, audit.Config{
		Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Initial: "stock:initial",
		Replica: "r-1", Backend: "etcd", Items: items,
	})
	r, err := aud.Run(ctx, 1)
	if err != nil || !r.OK || r.Items != 2 {
		t.Fatalf("two balanced items: got %+v, %v; want OK, 2 items checked", r, err)
	}
	// a's sale took 2 units and reservations gave 1 back: balanced, as
	// long as the survey reads what was returned.
	ak := redisstore.ItemKeys(base, "a")
	if err := rdb.MSet(ctx, ak.Stock, 4, ak.Lucky, 2, ak.Returned, 1).Err(); err != nil {
		t.Fatal(err)
	}
	if r, err := aud.Check(ctx, 1); err != nil || !r.OK { // not recorded: the stream is counted below
		t.Fatalf("item a with 1 unit returned: got %+v, %v; want OK", r, err)
	}
	if err := rdb.Incr(ctx, redisstore.ItemKeys(base, "b").Lucky).Err(); err != nil {
		t.Fatal(err)
	}
	r, err = aud.Run(ctx, 1)
	if err != nil || r.OK || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "item b: stock+lucky = 5+1 = 6, want initial 5") {
		t.Fatalf("an oversold item: got %+v, %v; want one problem naming item b", r, err)
	}
	recs, err := audit.ReadStream(ctx, rdb, audit.DefaultStream)
	if err != nil || len(recs) != 2 || recs[1].Items != 2 || recs[1].OK {
		t.Fatalf("the stream's records: got %+v, %v; want 2, the last with 2 items, not OK", recs, err)
	}
}

// With the ledger on, an item whose ledger lost an order is a problem
// named for it; its books may balance all the same.
func TestCheckItemsLedger(t *testing.T) {
	rdb, items, base := soldItems(t, "a")
	ctx := t.Context()
	aud := audit.New(rdb, audit.Config{
		Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Initial: "stock:initial",
		Replica: "r-1", Backend: "etcd", Items: items,
	})
	if r, err := aud.Run(ctx, 1); err != nil || !r.OK || r.Items != 1 {
		t.Fatalf("an item with its orders: got %+v, %v; want OK", r, err)
	}
	if err := rdb.XTrimMaxLen(ctx, redisstore.ItemKeys(base, "a").Orders, 1).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := aud.Run(ctx, 1)
	if err != nil || r.OK || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "item a: ledger orders = 1, want lucky 2") {
		t.Fatalf("an item that lost an order: got %+v, %v; want one problem naming item a's ledger", r, err)
	}
}

// With ItemLedgers, each run reconciles one item's durable copy, the next
// in id order, wrapping around: a copy short of an order is a problem
// named for its item.
func TestCheckItemsDurable(t *testing.T) {
	rdb, items, _ := soldItems(t, "b", "a")
	ctx := t.Context()
	rows := map[string]int64{"a": 2, "b": 1} // b's copy lost an order
	aud := audit.New(rdb, audit.Config{
		Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Initial: "stock:initial",
		Replica: "r-1", Backend: "etcd", Items: items,
		ItemLedgers: func(ctx context.Context, id string) (audit.Ledger, audit.DurableOrders, error) {
			r, err := items.Orders(ctx, id)
			return r, &fakeDurable{rows: rows[id]}, err
		},
	})
	for i, want := range []struct {
		item string
		ok   bool
	}{{"a", true}, {"b", false}, {"a", true}} {
		r, err := aud.Run(ctx, 1)
		if err != nil || r.ItemLedger == nil || r.ItemLedger.Item != want.item || r.OK != want.ok {
			t.Fatalf("run %d: got %+v (item ledger %+v), %v; want item %s reconciled, OK %v", i, r, r.ItemLedger, err, want.item, want.ok)
		}
		if !want.ok && (len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "item b: durable orders = 1, want the ledger's 2")) {
			t.Fatalf("run %d: problems %v; want item b's durable copy named", i, r.Problems)
		}
	}
	recs, err := audit.ReadStream(ctx, rdb, audit.DefaultStream)
	if err != nil || len(recs) != 3 || recs[1].ItemLedger == nil || recs[1].ItemLedger.Item != "b" || recs[1].ItemLedger.Durable == nil || *recs[1].ItemLedger.Durable != 1 {
		t.Fatalf("the stream's records: %+v, %v; want the second naming item b's 1 durable order", recs, err)
	}
}

// soldItems is a Redis whose default sale is balanced (10 left, none
// sold) and whose items ids, ledger on, have each sold 2 of 5.
func soldItems(t *testing.T, ids ...string) (*redis.Client, *redisstore.Items, redisstore.Keys) {
	t.Helper()
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	base := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}.Derive(true)
	items := redisstore.NewItems(redisstore.ItemsConfig{Redis: rdb, Base: base,
		Service: stock.ServiceConfig{Backend: "none", Mode: stock.ModeAtomic, Replica: "r-1"}})
	for _, id := range ids {
		if _, err := items.Create(ctx, redisstore.Item{ID: id, Stock: 5}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := items.ReduceFor(ctx, id, stock.Buyer{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := rdb.MSet(ctx, "stock", 10, "lucky", 0, "stock:initial", 10).Err(); err != nil {
		t.Fatal(err)
	}
	return rdb, items, base
}

// censusOf is a canned census (the real one is redisstore's, tested on a
// real Redis there and through stockd).
type censusOf struct {
	c   redisstore.Census
	err error
}

func (f censusOf) Census(context.Context) (redisstore.Census, error) { return f.c, f.err }

// With reservations the audit takes their census too: books that balance
// do not hide a unit returned twice, and a census unread is Redis's
// failure, not a sound sale.
func TestCheckTakesTheReservationsCensus(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	// 10 units, 4 taken, 1 back: 7 left (7 + 4 - 1 = 10).
	if err := rdb.MSet(ctx, "stock", 7, "lucky", 4, "stock:returned", 1, "stock:initial", 10).Err(); err != nil {
		t.Fatal(err)
	}
	sound := redisstore.Census{Reserved: 1, Paid: 2, Expired: 1, Stock: 7, Lucky: 4, Returned: 1, Initial: 10}
	twice := sound
	twice.Expired = 0 // 1 unit back, no order ended for it
	cases := []struct {
		name string
		res  audit.Reservations
		ok   bool
		want string // in the problems, or the error
	}{
		{"sound", censusOf{c: sound}, true, ""},
		{"a return with no order", censusOf{c: twice}, false, "units returned"},
		{"unread", censusOf{err: stock.ErrUnavailable}, false, "census"},
	}
	for _, tc := range cases {
		aud := audit.New(rdb, audit.Config{
			Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Initial: "stock:initial",
			Replica: "r-1", Backend: "etcd", Reservations: tc.res,
		})
		r, err := aud.Check(ctx, 1)
		switch {
		case tc.name == "unread":
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got %+v, %v; want an error naming the %s", tc.name, r, err, tc.want)
			}
		case err != nil || r.OK != tc.ok || !strings.Contains(strings.Join(r.Problems, "; "), tc.want):
			t.Errorf("%s: got %+v, %v; want OK %v, a problem saying %q", tc.name, r, err, tc.ok, tc.want)
		}
	}
}
