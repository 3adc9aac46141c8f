package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/locallock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// The items' rules, on a real redis-server: each item's keys, window,
// ledger and limit are its own, and the default sale is left as it was.

var defaultBase = redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}

// itemMode is one way of selling an item.
type itemMode struct {
	name string
	cfg  func(*stock.ServiceConfig)
}

var itemModes = []itemMode{
	{"locked", func(c *stock.ServiceConfig) {}},
	{"atomic", func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }},
	{"combine", func(c *stock.ServiceConfig) { c.Combine = true }},
}

// newItems is Items on a fresh redis-server, fenced locked sales over the
// in-process lock unless mut says otherwise; with ledger, the order
// ledger is on.
func newItems(t *testing.T, ledger bool, mut func(*redisstore.ItemsConfig)) (*redisstore.Items, *redis.Client) {
	t.Helper()
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return itemsOver(rdb, ledger, mut), rdb
}

// itemsOver is another replica's Items over the same Redis.
func itemsOver(rdb redis.UniversalClient, ledger bool, mut func(*redisstore.ItemsConfig)) *redisstore.Items {
	cfg := redisstore.ItemsConfig{
		Redis: rdb,
		Base:  defaultBase.Derive(ledger),
		Service: stock.ServiceConfig{
			Locker: locallock.New(), Backend: "test", LockKey: "seckill:lock", Fencing: true, Replica: "r1",
		},
	}
	if mut != nil {
		mut(&cfg)
	}
	return redisstore.NewItems(cfg)
}

// redisNow is the test server's clock, unix ms: windows are set by it.
func redisNow(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	now, err := rdb.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMilli()
}

func create(t *testing.T, items *redisstore.Items, it redisstore.Item) redisstore.ItemStatus {
	t.Helper()
	st, err := items.Create(t.Context(), it)
	if err != nil {
		t.Fatalf("create %+v: %v", it, err)
	}
	return st
}

func wantItem(t *testing.T, items *redisstore.Items, id string, stockLeft, lucky int64) redisstore.ItemStatus {
	t.Helper()
	st, err := items.Status(t.Context(), id)
	if err != nil {
		t.Fatalf("status of %s: %v", id, err)
	}
	if st.Stock != stockLeft || st.Lucky != lucky || st.Stock+st.Lucky != st.Initial {
		t.Fatalf("item %s: got stock %d lucky %d initial %d, want stock %d lucky %d summing to the initial",
			id, st.Stock, st.Lucky, st.Initial, stockLeft, lucky)
	}
	return st
}

func TestItemKeys(t *testing.T) {
	k := redisstore.ItemKeys(defaultBase.Derive(true), "x")
	if k.Stock != "{item:x}:stock" || k.Lucky != "{item:x}:lucky" || k.Fence != "{item:x}:stock:fence" ||
		k.Window != "{item:x}:stock:window" || k.Orders != "{item:x}:stock:orders" || k.Segments != 1 {
		t.Fatalf("got %+v", k)
	}
	for _, n := range k.All() {
		if tag := redisstore.HashTag(n.Name); tag != "item:x" || !strings.HasPrefix(n.Name, redisstore.ItemKeyPrefix) {
			t.Errorf("%v: hash tag %q, want item:x, and the item prefix", n, tag)
		}
	}
	if o := redisstore.Overlaps(k.All()); len(o) != 0 {
		t.Fatalf("an item's names overlap: %v", o)
	}
	// Another item's names, and the default sale's, are apart from x's.
	other := redisstore.ItemKeys(defaultBase.Derive(true), "x1")
	if o := redisstore.Overlaps(slices.Concat(k.All(), other.All(), defaultBase.Derive(true).All())); len(o) != 0 {
		t.Fatalf("items x, x1 and the default sale overlap: %v", o)
	}
	// The base's hash tag does not reach the item; the ledger does.
	tagged := redisstore.Keys{Stock: "{s1}:stock", Lucky: "{s1}:lucky", Fence: "{s1}:stock:fence"}.Derive(true)
	if got := redisstore.ItemKeys(tagged, "x"); got != k {
		t.Fatalf("from a tagged base: got %+v, want %+v", got, k)
	}
	if got := redisstore.ItemKeys(defaultBase.Derive(false), "x"); got.Orders != "" || got.Window == "" {
		t.Fatalf("without the ledger: got %+v, want no ledger keys and a window", got)
	}
	if redisstore.ItemLockKey("seckill:lock", "x") != "seckill:lock:item:x" {
		t.Fatalf("got lock key %q", redisstore.ItemLockKey("seckill:lock", "x"))
	}
	if defaultBase.Derive(true).Window != "" {
		t.Fatal("the default sale has a window key: its scripts would read it")
	}
}

func TestCheckItemID(t *testing.T) {
	for id, ok := range map[string]bool{
		"x": true, "0": true, "spring-sale-2025": true, strings.Repeat("a", 32): true,
		"": false, "-x": false, "X": false, "a_b": false, "a b": false, "a}b": false, "é": false,
		strings.Repeat("a", 33): false, "a:b": false,
	} {
		err := redisstore.CheckItemID(id)
		if (err == nil) != ok || (err != nil && !errors.Is(err, stock.ErrBadItem)) {
			t.Errorf("CheckItemID(%q) = %v, want ok %v (else ErrBadItem)", id, err, ok)
		}
	}
}

func TestItemCheck(t *testing.T) {
	for _, tc := range []struct {
		it redisstore.Item
		ok bool
	}{
		{redisstore.Item{ID: "a", Stock: 5}, true},
		{redisstore.Item{ID: "a", Stock: 0, StartsAt: 10, EndsAt: 11, PerUserLimit: 2}, true},
		{redisstore.Item{ID: "a", EndsAt: 11}, true},
		{redisstore.Item{ID: "A", Stock: 5}, false},
		{redisstore.Item{ID: "a", Stock: -1}, false},
		{redisstore.Item{ID: "a", Stock: redisstore.MaxStock + 1}, false},
		{redisstore.Item{ID: "a", StartsAt: -1}, false},
		{redisstore.Item{ID: "a", StartsAt: 10, EndsAt: 10}, false},
		{redisstore.Item{ID: "a", StartsAt: 10, EndsAt: 9}, false},
		{redisstore.Item{ID: "a", PerUserLimit: -1}, false},
		{redisstore.Item{ID: "a", EndsAt: 1 << 60}, false},
	} {
		err := tc.it.Check()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, stock.ErrBadItem)) {
			t.Errorf("%+v: got %v, want ok %v (else ErrBadItem)", tc.it, err, tc.ok)
		}
	}
}

// Before starts_at every sale is refused with the start, in every mode,
// and nothing is written: no unit, no order, no receipt. The status says
// upcoming by Redis's clock.
func TestItemNotStarted(t *testing.T) {
	for _, m := range itemModes {
		t.Run(m.name, func(t *testing.T) {
			items, rdb := newItems(t, true, func(c *redisstore.ItemsConfig) { m.cfg(&c.Service) })
			starts := redisNow(t, rdb) + time.Hour.Milliseconds()
			st := create(t, items, redisstore.Item{ID: "x", Stock: 5, StartsAt: starts})
			if st.State != redisstore.ItemUpcoming || st.StartsAt != starts || st.Now >= starts {
				t.Fatalf("got status %+v, want upcoming until %d", st, starts)
			}
			before, _ := rdb.Keys(t.Context(), "*").Result()
			for _, b := range []stock.Buyer{{}, {User: "ann", Key: "k1"}} {
				_, err := items.ReduceFor(t.Context(), "x", b)
				var we *stock.WindowError
				if !errors.Is(err, stock.ErrNotStarted) || !errors.As(err, &we) || we.StartsAt != starts {
					t.Fatalf("buyer %+v: got %v, want ErrNotStarted carrying starts_at %d", b, err, starts)
				}
			}
			wantItem(t, items, "x", 5, 0)
			after, _ := rdb.Keys(t.Context(), "*").Result()
			slices.Sort(before)
			slices.Sort(after)
			if !slices.Equal(before, after) {
				t.Fatalf("keys went from %v to %v: a refused sale wrote", before, after)
			}
		})
	}
}

// From ends_at on every sale is refused, in every mode, ledger or not;
// a key that bought before the end is still answered its sale.
func TestItemEnded(t *testing.T) {
	for _, m := range itemModes {
		for _, ledger := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ledger %v", m.name, ledger), func(t *testing.T) {
				items, rdb := newItems(t, ledger, func(c *redisstore.ItemsConfig) { m.cfg(&c.Service) })
				create(t, items, redisstore.Item{ID: "x", Stock: 5, EndsAt: redisNow(t, rdb) + time.Hour.Milliseconds()})
				ann := stock.Buyer{User: "ann", Key: "k1"}
				if !ledger {
					ann = stock.Buyer{}
				}
				first, err := items.ReduceFor(t.Context(), "x", ann)
				if err != nil {
					t.Fatalf("sale in the window: %v", err)
				}
				// The window ends: an item reset to a window already past.
				ends := redisNow(t, rdb) - 1
				if err := rdb.HSet(t.Context(), "{item:x}:stock:window", "ends_at", ends).Err(); err != nil {
					t.Fatal(err)
				}
				_, err = items.ReduceFor(t.Context(), "x", stock.Buyer{})
				var we *stock.WindowError
				if !errors.Is(err, stock.ErrEnded) || !errors.As(err, &we) || we.EndsAt != ends {
					t.Fatalf("after the end: got %v, want ErrEnded carrying ends_at %d", err, ends)
				}
				if ledger {
					again, err := items.ReduceFor(t.Context(), "x", ann)
					if err != nil || !again.Replayed || again.OrderID != first.OrderID {
						t.Fatalf("ann's key after the end: got %+v, %v; want the replay of %s", again, err, first.OrderID)
					}
					if _, err := items.ReduceFor(t.Context(), "x", stock.Buyer{User: "ann", Key: "k2"}); !errors.Is(err, stock.ErrEnded) {
						t.Fatalf("a new key after the end: got %v, want ErrEnded", err)
					}
				}
				if st := wantItem(t, items, "x", 4, 1); st.State != redisstore.ItemEnded {
					t.Fatalf("got state %q, want ended", st.State)
				}
			})
		}
	}
}

// A locked sale that read inside the window and writes after its end is
// refused at the write, where the unit is taken: nothing is sold.
func TestItemEndsBetweenReadAndWrite(t *testing.T) {
	for _, ledger := range []bool{false, true} {
		t.Run(fmt.Sprintf("ledger %v", ledger), func(t *testing.T) {
			lease := newFakeLease(1)
			items, rdb := newItems(t, ledger, func(c *redisstore.ItemsConfig) {
				c.Service.Locker = one(lease)
				c.Service.Delay = stock.Delay{Min: time.Millisecond, Max: time.Millisecond}
			})
			create(t, items, redisstore.Item{ID: "x", Stock: 5, EndsAt: redisNow(t, rdb) + time.Hour.Milliseconds()})
			var ends int64
			lease.onDone = func() { // after the fenced read, before the write
				ends = redisNow(t, rdb) - 1
				if err := rdb.HSet(context.Background(), "{item:x}:stock:window", "ends_at", ends).Err(); err != nil {
					t.Error(err)
				}
			}
			_, err := items.ReduceFor(t.Context(), "x", stock.Buyer{})
			var we *stock.WindowError
			if !errors.Is(err, stock.ErrEnded) || !errors.As(err, &we) || we.EndsAt != ends || errors.Is(err, stock.ErrUnconfirmed) {
				t.Fatalf("got %v, want a definite ErrEnded at %d", err, ends)
			}
			wantItem(t, items, "x", 5, 0)
			if n, _ := rdb.Exists(t.Context(), "{item:x}:stock:orders").Result(); n != 0 {
				t.Fatal("the refused write left an order")
			}
		})
	}
}

// Two items sold at once, each by many buyers, each sell exactly their
// stock with a ledger of their own; resetting one leaves the other.
func TestItemsAreIndependent(t *testing.T) {
	for _, m := range itemModes {
		t.Run(m.name, func(t *testing.T) {
			items, _ := newItems(t, true, func(c *redisstore.ItemsConfig) { m.cfg(&c.Service) })
			stocks := map[string]int64{"a": 30, "b": 50}
			for id, n := range stocks {
				create(t, items, redisstore.Item{ID: id, Stock: n})
			}
			var mu sync.Mutex
			sold := map[string]int64{}
			buyer := map[string]string{} // one buyer who bought each item
			var wg sync.WaitGroup
			for i := range 160 {
				id := []string{"a", "b"}[i%2]
				wg.Go(func() {
					user := fmt.Sprintf("u%d", i)
					_, err := items.ReduceFor(t.Context(), id, stock.Buyer{User: user, Key: "k"})
					switch {
					case err == nil:
						mu.Lock()
						sold[id]++
						buyer[id] = user
						mu.Unlock()
					case !errors.Is(err, stock.ErrSoldOut):
						t.Errorf("item %s: %v", id, err)
					}
				})
			}
			wg.Wait()
			for id, n := range stocks {
				if sold[id] != n {
					t.Errorf("item %s: sold %d, want %d", id, sold[id], n)
				}
				wantItem(t, items, id, 0, n)
			}
			if _, err := items.Reset(t.Context(), redisstore.Item{ID: "a", Stock: 7}); err != nil {
				t.Fatal(err)
			}
			wantItem(t, items, "a", 7, 0)
			wantItem(t, items, "b", 0, 50)
			// a's ledger was cleared, b's kept: a buyer's key buys a
			// again, and another's replays its b sale.
			if s, err := items.ReduceFor(t.Context(), "a", stock.Buyer{User: buyer["a"], Key: "k"}); err != nil || s.Replayed {
				t.Fatalf("%s on the reset item: got %+v, %v; want a new sale", buyer["a"], s, err)
			}
			if s, err := items.ReduceFor(t.Context(), "b", stock.Buyer{User: buyer["b"], Key: "k"}); err != nil || !s.Replayed {
				t.Fatalf("%s on the untouched item: got %+v, %v; want its replay", buyer["b"], s, err)
			}
		})
	}
}

// Each item has its own per-user limit, and a reset's new limit applies
// on every replica from the reset on, even one whose service for the item
// was built before it: the old settings never sell in the new sale.
func TestItemPerUserLimit(t *testing.T) {
	for _, m := range itemModes {
		t.Run(m.name, func(t *testing.T) {
			items, rdb := newItems(t, true, func(c *redisstore.ItemsConfig) { m.cfg(&c.Service) })
			other := itemsOver(rdb, true, func(c *redisstore.ItemsConfig) { m.cfg(&c.Service) }) // another replica
			create(t, items, redisstore.Item{ID: "a", Stock: 100, PerUserLimit: 2})
			create(t, items, redisstore.Item{ID: "b", Stock: 100})
			buy := func(items *redisstore.Items, id string, n int) (sold int) {
				for range n {
					_, err := items.ReduceFor(t.Context(), id, stock.Buyer{User: "ann"})
					switch {
					case err == nil:
						sold++
					case !errors.Is(err, stock.ErrLimitReached):
						t.Fatalf("item %s: %v", id, err)
					}
				}
				return sold
			}
			if got := buy(items, "a", 5); got != 2 {
				t.Fatalf("item a, limit 2: ann bought %d", got)
			}
			if got := buy(items, "b", 5); got != 5 {
				t.Fatalf("item b, no limit: ann bought %d", got)
			}
			// The other replica resets a with a limit of 3; this one's
			// service for a was built with 2.
			if _, err := other.Reset(t.Context(), redisstore.Item{ID: "a", Stock: 100, PerUserLimit: 3}); err != nil {
				t.Fatal(err)
			}
			if got := buy(items, "a", 5); got != 3 {
				t.Fatalf("item a after the reset to limit 3: ann bought %d on the other replica", got)
			}
			wantItem(t, items, "a", 97, 3)
		})
	}
}

// An item without a per-user limit of its own keeps the default sale's
// (stock.per_user_limit), and says so; one with its own keeps its own,
// above or below the default.
func TestItemInheritsPerUserLimit(t *testing.T) {
	items, _ := newItems(t, true, func(c *redisstore.ItemsConfig) { c.Service.PerUserLimit = 2 })
	for _, tc := range []struct {
		id        string
		own, want int
	}{{"inherits", 0, 2}, {"higher", 4, 4}, {"lower", 1, 1}} {
		t.Run(tc.id, func(t *testing.T) {
			create(t, items, redisstore.Item{ID: tc.id, Stock: 10, PerUserLimit: tc.own})
			sold := 0
			for range 6 {
				_, err := items.ReduceFor(t.Context(), tc.id, stock.Buyer{User: "ann"})
				switch {
				case err == nil:
					sold++
				case !errors.Is(err, stock.ErrLimitReached):
					t.Fatal(err)
				}
			}
			if sold != tc.want {
				t.Fatalf("ann bought %d of 6 tries, want %d (the item's limit %d, the default 2)", sold, tc.want, tc.own)
			}
			if st := wantItem(t, items, tc.id, int64(10-tc.want), int64(tc.want)); st.PerUserLimit != tc.want || st.Item.PerUserLimit != tc.own {
				t.Fatalf("got limit %d in effect, %d set; want %d, %d", st.PerUserLimit, st.Item.PerUserLimit, tc.want, tc.own)
			}
		})
	}
	list, err := items.List(t.Context())
	if err != nil || len(list) != 3 || list[1].ID != "inherits" || list[1].PerUserLimit != 2 {
		t.Fatalf("got list %+v, %v; want inherits listed with its limit in effect, 2", list, err)
	}
}

func TestItemsRegistry(t *testing.T) {
	items, rdb := newItems(t, false, nil)
	ctx := t.Context()
	if _, err := items.Status(ctx, "nope"); !errors.Is(err, stock.ErrNoItem) {
		t.Fatalf("status of an unknown item: got %v, want ErrNoItem", err)
	}
	if _, err := items.ReduceFor(ctx, "nope", stock.Buyer{}); !errors.Is(err, stock.ErrNoItem) {
		t.Fatalf("sale of an unknown item: got %v, want ErrNoItem", err)
	}
	if _, err := items.Reset(ctx, redisstore.Item{ID: "nope", Stock: 1}); !errors.Is(err, stock.ErrNoItem) {
		t.Fatalf("reset of an unknown item: got %v, want ErrNoItem", err)
	}
	if _, err := items.ReduceFor(ctx, "Bad!", stock.Buyer{}); !errors.Is(err, stock.ErrBadItem) {
		t.Fatalf("sale of a bad id: got %v, want ErrBadItem", err)
	}
	if _, err := items.Create(ctx, redisstore.Item{ID: "a", Stock: 1, PerUserLimit: 1}); !errors.Is(err, stock.ErrBadItem) {
		t.Fatalf("a limit without the ledger: got %v, want ErrBadItem", err)
	}
	now := redisNow(t, rdb)
	st := create(t, items, redisstore.Item{ID: "b", Stock: 3, StartsAt: now - 1000, EndsAt: now + time.Hour.Milliseconds()})
	if st.State != redisstore.ItemOpen || st.Stock != 3 || st.Initial != 3 || st.SoldOut || st.Item.ID != "b" {
		t.Fatalf("got %+v, want b open with 3 units", st)
	}
	if _, err := items.Create(ctx, redisstore.Item{ID: "b", Stock: 9}); !errors.Is(err, stock.ErrItemExists) {
		t.Fatalf("create twice: got %v, want ErrItemExists", err)
	}
	wantItem(t, items, "b", 3, 0)
	create(t, items, redisstore.Item{ID: "a", Stock: 0})
	if st, _ := items.Status(ctx, "a"); !st.SoldOut || st.State != redisstore.ItemOpen {
		t.Fatalf("got %+v, want a sold out and open", st)
	}
	if _, err := items.ReduceFor(ctx, "a", stock.Buyer{}); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("sale of an empty item: got %v, want ErrSoldOut", err)
	}
	list, err := items.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "a" || list[1] != st.Item {
		t.Fatalf("got list %+v, %v; want a then b", list, err)
	}
	// A reset to no window opens it: the window key is gone.
	if st, err := items.Reset(ctx, redisstore.Item{ID: "b", Stock: 4}); err != nil || st.StartsAt != 0 || st.EndsAt != 0 || st.State != redisstore.ItemOpen {
		t.Fatalf("reset to no window: got %+v, %v", st, err)
	}
	// Redis lost the item's sale but not its entry: lost, not unknown.
	if err := rdb.Del(ctx, "{item:b}:stock").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := items.Status(ctx, "b"); !errors.Is(err, stock.ErrStoreLost) {
		t.Fatalf("status of a lost item: got %v, want ErrStoreLost", err)
	}
	if _, err := items.ReduceFor(ctx, "b", stock.Buyer{}); !errors.Is(err, stock.ErrStoreLost) {
		t.Fatalf("sale of a lost item: got %v, want ErrStoreLost", err)
	}
}

// The default sale's keys are not an item's, and items leave the default
// sale as it was.
func TestItemsLeaveTheDefaultSale(t *testing.T) {
	items, rdb := newItems(t, true, nil)
	def := redisstore.NewStore(rdb, defaultBase.Derive(true))
	if err := def.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	create(t, items, redisstore.Item{ID: "x", Stock: 5, EndsAt: redisNow(t, rdb) - 1})
	svc := newService(def, locallock.New(), func(c *stock.ServiceConfig) { c.Fencing = true })
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatalf("the default sale beside an ended item: %v", err)
	}
	storetest.WantStatus(t, def, stock.Status{Stock: 9, Lucky: 1})
	if _, err := items.ReduceFor(t.Context(), "x", stock.Buyer{}); !errors.Is(err, stock.ErrEnded) {
		t.Fatalf("the ended item: got %v, want ErrEnded", err)
	}
}

func TestItemsUnsupported(t *testing.T) {
	for name, mut := range map[string]func(*redisstore.ItemsConfig){
		"segments":  func(c *redisstore.ItemsConfig) { c.Base.Segments = 2 },
		"unfenced":  func(c *redisstore.ItemsConfig) { c.Service.Fencing = false },
		"durable":   func(c *redisstore.ItemsConfig) { c.Unsupported = []string{"orders.durable"} },
		"two kinds": func(c *redisstore.ItemsConfig) { c.Base.Segments, c.Unsupported = 4, []string{"orders.durable"} },
	} {
		t.Run(name, func(t *testing.T) {
			items, _ := newItems(t, true, mut)
			if _, err := items.Create(t.Context(), redisstore.Item{ID: "x", Stock: 5}); !errors.Is(err, stock.ErrItemsUnsupported) {
				t.Fatalf("create: got %v, want ErrItemsUnsupported", err)
			}
			if _, err := items.ReduceFor(t.Context(), "x", stock.Buyer{}); !errors.Is(err, stock.ErrItemsUnsupported) {
				t.Fatalf("sale: got %v, want ErrItemsUnsupported", err)
			}
		})
	}
	// Atomic sales need no fencing: supported.
	items, _ := newItems(t, true, func(c *redisstore.ItemsConfig) { c.Service.Fencing, c.Service.Mode = false, stock.ModeAtomic })
	if err := items.Unsupported(); err != nil {
		t.Fatalf("atomic: %v", err)
	}
}

// Every key an item's sales write carries the item's one hash tag and is
// named by ItemKeys(...).All(), besides the registry.
func TestItemNamesEveryKeyItsSaleWrites(t *testing.T) {
	var tokens atomic.Uint64
	locker := fakeLocker(func(context.Context) (lock.Lease, error) { return newFakeLease(tokens.Add(1)), nil })
	items, rdb := newItems(t, true, func(c *redisstore.ItemsConfig) { c.Service.Locker = locker })
	atomicItems := itemsOver(rdb, true, func(c *redisstore.ItemsConfig) { c.Service.Mode = stock.ModeAtomic })
	ctx := t.Context()
	create(t, items, redisstore.Item{ID: "x", Stock: 20, StartsAt: 1, EndsAt: redisNow(t, rdb) + time.Hour.Milliseconds(), PerUserLimit: 5})
	for i, m := range []*redisstore.Items{items, atomicItems} {
		for j := range 3 {
			if _, err := m.ReduceFor(ctx, "x", stock.Buyer{User: fmt.Sprintf("u%d", j), Key: fmt.Sprintf("k%d-%d", i, j)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	// Its sale's keys, and its settings beside them.
	names := append(redisstore.ItemKeys(defaultBase.Derive(true), "x").All(), redisstore.KeyName{Name: redisstore.ItemMetaKey("x")})
	for _, key := range keys {
		if key == redisstore.ItemRegistry {
			continue
		}
		if redisstore.HashTag(key) != "item:x" || !slices.ContainsFunc(names, func(n redisstore.KeyName) bool {
			return key == n.Name || (n.Prefix && strings.HasPrefix(key, n.Name))
		}) {
			t.Errorf("Redis holds %q: not one of item x's names, or not in its slot", key)
		}
	}
	if !slices.Contains(keys, "{item:x}:stock:window") || !slices.Contains(keys, "{item:x}:stock:orders") {
		t.Fatalf("the sales made no window or ledger: %v", keys)
	}
}

// With replica acks, an item's reset is answered only once the replicas
// hold it: none here, so it is ErrNotReplicated (and unavailable: reset
// again), though the primary holds it.
func TestItemResetWaitsForReplicas(t *testing.T) {
	items, _ := newItems(t, true, func(c *redisstore.ItemsConfig) {
		c.Acks = redisstore.ReplicaAcks{Replicas: 1, Timeout: redisstore.AckMustNotWithin(50 * time.Millisecond)}
	})
	_, err := items.Create(t.Context(), redisstore.Item{ID: "x", Stock: 5})
	if !errors.Is(err, redisstore.ErrNotReplicated) || !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("got %v, want ErrNotReplicated, unavailable", err)
	}
	wantItem(t, items, "x", 5, 0)
	if _, err := items.Create(t.Context(), redisstore.Item{ID: "x", Stock: 5}); !errors.Is(err, stock.ErrItemExists) {
		t.Fatalf("create again: got %v, want ErrItemExists (reset it)", err)
	}
	if _, err := items.Reset(t.Context(), redisstore.Item{ID: "x", Stock: 6}); !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("reset: got %v, want ErrNotReplicated", err)
	}
	if _, err := items.ReduceFor(t.Context(), "x", stock.Buyer{}); !errors.Is(err, stock.ErrUnconfirmed) {
		t.Fatalf("sale: got %v, want unconfirmed (no replica acknowledged it)", err)
	}
}

// A halted item says so where its state is read, as its sales do: not
// "open" while every sale answers store_lost; its counters still read.
func TestItemStatusOfAHaltedItem(t *testing.T) {
	items, rdb := newItems(t, true, nil)
	create(t, items, redisstore.Item{ID: "x", Stock: 5})
	halt := redisstore.ItemKeys(defaultBase.Derive(true), "x").Halt
	if err := rdb.Set(t.Context(), halt, "rewound: test", 0).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := items.Status(t.Context(), "x")
	if err != nil || st.State != redisstore.ItemHalted || st.Halted != "rewound: test" || st.Stock != 5 {
		t.Fatalf("status of a halted item: got %+v, %v; want halted, its reason, stock 5", st, err)
	}
	if _, err := items.ReduceFor(t.Context(), "x", stock.Buyer{}); !errors.Is(err, stock.ErrStoreRewound) {
		t.Fatalf("a sale of the halted item: got %v, want ErrStoreRewound", err)
	}
}

// Survey names the halted items among all, counts them all and their
// units left.
func TestItemsSurveyNamesTheHalted(t *testing.T) {
	items, rdb := newItems(t, true, nil)
	if s, err := items.Survey(t.Context()); err != nil || s.Items != 0 || len(s.Halted) != 0 {
		t.Fatalf("survey of no items: got %+v, %v", s, err)
	}
	for _, id := range []string{"c", "a", "b"} {
		create(t, items, redisstore.Item{ID: id, Stock: 5})
	}
	for _, id := range []string{"c", "a"} {
		if err := rdb.Set(t.Context(), redisstore.ItemKeys(defaultBase.Derive(true), id).Halt, "rewound: test", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := items.Survey(t.Context())
	if err != nil || s.Items != 3 || !slices.Equal(s.Halted, []string{"a", "c"}) || s.Stock != 15 || len(s.Problems()) != 0 {
		t.Fatalf("survey: got %+v, %v; want 3 items, a and c halted, 15 units left, every book balanced", s, err)
	}
	// A sale on b, then a unit of b sold twice by hand: b's books are
	// named, the others' are not.
	if _, err := items.ReduceFor(t.Context(), "b", stock.Buyer{}); err != nil {
		t.Fatal(err)
	}
	if s, err := items.Survey(t.Context()); err != nil || len(s.Problems()) != 0 || s.Stock != 14 {
		t.Fatalf("survey after a sale: got %+v, %v; want 14 units left, balanced", s, err)
	} else if len(s.Books) != 3 || s.Books[1].ID != "b" || s.Books[1].Stock != 4 || s.Books[1].Lucky != 1 {
		t.Fatalf("survey after a sale: books %+v, want every item's, b with 4 left and 1 sold", s.Books)
	}
	if err := rdb.Incr(t.Context(), redisstore.ItemKeys(defaultBase.Derive(true), "b").Lucky).Err(); err != nil {
		t.Fatal(err)
	}
	s, err = items.Survey(t.Context())
	if want := []string{"item b: stock+lucky = 4+2 = 6, want initial 5 (oversold by 1)",
		"item b: ledger orders = 1, want lucky 2 (+1 units sold without an order)"}; err != nil || !slices.Equal(s.Problems(), want) {
		t.Fatalf("survey of an oversold item: got %q, %v; want %q", s.Problems(), err, want)
	}
	// Its ledger mended (an order per unit again, one trimmed), b is
	// still unbalanced but no longer unledgered.
	if err := rdb.Set(t.Context(), redisstore.ItemKeys(defaultBase.Derive(true), "b").Trimmed, 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if s, err := items.Survey(t.Context()); err != nil || len(s.Problems()) != 1 || !strings.Contains(s.Problems()[0], "oversold by 1") {
		t.Fatalf("survey with a trimmed order: got %q, %v; want b unbalanced only", s.Problems(), err)
	}
}

// An archived item sells no more, in every mode, even with sales in
// flight when it is archived: each is either sold (and in the books) or
// refused, none oversells, and every sale begun after the archive is
// refused ErrItemArchived. Its books and orders stay readable, a reset
// cannot sweep them, and it leaves the registry's bound.
func TestItemArchive(t *testing.T) {
	for _, m := range itemModes {
		t.Run(m.name, func(t *testing.T) {
			items, _ := newItems(t, true, func(c *redisstore.ItemsConfig) { m.cfg(&c.Service) })
			ctx := t.Context()
			create(t, items, redisstore.Item{ID: "a", Stock: 1000})
			var sold, refused atomic.Int64
			firstSold := make(chan struct{})
			var once sync.Once
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for i := range 8 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						_, err := items.ReduceFor(ctx, "a", stock.Buyer{User: fmt.Sprintf("u%d", i)})
						switch {
						case err == nil:
							sold.Add(1)
							once.Do(func() { close(firstSold) })
						case errors.Is(err, stock.ErrItemArchived):
							refused.Add(1)
							if refused.Load() >= 20 {
								return
							}
						case errors.Is(err, stock.ErrBusy):
						default:
							t.Errorf("sale: %v", err)
							return
						}
					}
				})
			}
			<-firstSold // sales are in flight
			st, err := items.Archive(ctx, "a")
			if err != nil {
				close(stop)
				wg.Wait()
				t.Fatal(err)
			}
			if st.State != redisstore.ItemArchived || st.ArchivedAt == 0 {
				t.Fatalf("archive answered %+v, want state archived with its time", st)
			}
			for range 3 {
				if _, err := items.ReduceFor(ctx, "a", stock.Buyer{User: "late"}); !errors.Is(err, stock.ErrItemArchived) {
					t.Fatalf("sale after the archive: got %v, want ErrItemArchived", err)
				}
			}
			wg.Wait()
			close(stop)
			st = wantItem(t, items, "a", 1000-sold.Load(), sold.Load())
			if st.State != redisstore.ItemArchived {
				t.Fatalf("got state %q, want archived", st.State)
			}
			t.Logf("%d sold before the archive took, %d refused after", sold.Load(), refused.Load())
			orders, err := items.Orders(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if l, err := orders.LedgerStats(ctx); err != nil || l.Orders != sold.Load() {
				t.Fatalf("archived item's ledger: got %+v, %v; want %d orders", l, err, sold.Load())
			}
			if _, err := items.Reset(ctx, redisstore.Item{ID: "a", Stock: 5}); !errors.Is(err, stock.ErrItemArchived) {
				t.Fatalf("reset of an archived item: got %v, want ErrItemArchived", err)
			}
			if _, err := items.Create(ctx, redisstore.Item{ID: "a", Stock: 5}); !errors.Is(err, stock.ErrItemExists) {
				t.Fatalf("create over an archived item: got %v, want ErrItemExists", err)
			}
			wantItem(t, items, "a", 1000-sold.Load(), sold.Load()) // the refused reset changed nothing
			if _, err := items.Archive(ctx, "a"); err != nil {
				t.Fatalf("archive again: %v", err)
			}
			if list, err := items.List(ctx); err != nil || len(list) != 0 {
				t.Fatalf("got list %+v, %v; want no live item", list, err)
			}
		})
	}
}

// An archived item no longer counts against MaxItems.
func TestItemArchiveFreesTheRegistry(t *testing.T) {
	items, rdb := newItems(t, false, nil)
	ctx := t.Context()
	// The registry one short of full, without making 999 sales.
	fill := make([]any, 0, 2*(redisstore.MaxItems-1))
	for i := range redisstore.MaxItems - 1 {
		fill = append(fill, fmt.Sprintf("filler-%d", i), `{"stock":0,"epoch":"e"}`)
	}
	if err := rdb.HSet(ctx, redisstore.ItemRegistry, fill...).Err(); err != nil {
		t.Fatal(err)
	}
	create(t, items, redisstore.Item{ID: "a", Stock: 1})
	if _, err := items.Create(ctx, redisstore.Item{ID: "b", Stock: 1}); !errors.Is(err, stock.ErrBadItem) {
		t.Fatalf("create past MaxItems: got %v, want ErrBadItem", err)
	}
	if _, err := items.Archive(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	create(t, items, redisstore.Item{ID: "b", Stock: 1})
	if n, err := rdb.HLen(ctx, redisstore.ItemArchive).Result(); err != nil || n != 1 {
		t.Fatalf("archive holds %d, %v; want 1 (a)", n, err)
	}
}
