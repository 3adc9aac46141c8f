package redisstore_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locallock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
	"seckill/internal/witness"
)

// Items under the witness, each in a register of its own: what the
// default sale's witness guarantees (witness_test.go) holds per item, and
// a rewound or foreign item halts only itself.

// An item sold, its Redis restarted from a snapshot taken before some of
// its answered sales, and every process new: the item's witness in a real
// etcd remembers how low its stock went, so its first sale halts it; a
// second item on the same Redis, which sold nothing since the snapshot,
// goes on selling. An item reset by a stockd without the witness (another
// sale's data, to the witness) halts too, and only itself.
func TestItemWitnessCatchesRewind(t *testing.T) {
	etcd := servertest.Etcd(t)
	cli := servertest.EtcdClient(t, etcd.Addr())
	for _, mode := range itemModes {
		t.Run(mode.name, func(t *testing.T) {
			srv := servertest.Redis(t)
			base := defaultBase.Derive(false)
			regs := func(id string) stock.Register {
				return witness.NewEtcd(cli, "/seckill/witness/"+mode.name+"/"+redisstore.ItemWitnessName("stock", id))
			}
			// process is a new stockd's items: nothing of the sales in
			// memory; the lock service is the one they all share.
			lk := locallock.New()
			process := func(witnessed bool) (*redisstore.Items, *redis.Client) {
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
				t.Cleanup(func() { _ = rdb.Close() })
				return itemsOver(rdb, false, func(c *redisstore.ItemsConfig) {
					c.Service.Locker = lk
					mode.cfg(&c.Service)
					if witnessed {
						c.Witness = regs
					}
				}), rdb
			}
			items, rdb := process(true)
			create(t, items, redisstore.Item{ID: "x", Stock: 10})
			create(t, items, redisstore.Item{ID: "y", Stock: 10})
			// The create recorded the item's epoch in its own register.
			for _, id := range []string{"x", "y"} {
				epoch, err := rdb.Get(t.Context(), redisstore.ItemKeys(base, id).Epoch).Result()
				if err != nil {
					t.Fatal(err)
				}
				rec, err := regs(id).Get(t.Context())
				if err != nil || !strings.Contains(string(rec), epoch) {
					t.Fatalf("item %s's witness holds %s, %v; want its epoch %s", id, rec, err, epoch)
				}
			}
			sell := func(items *redisstore.Items, id string, n int) {
				t.Helper()
				for range n {
					if _, err := items.ReduceFor(t.Context(), id, stock.Buyer{}); err != nil {
						t.Fatalf("sale of %s: %v", id, err)
					}
				}
			}
			sell(items, "x", 2)
			sell(items, "y", 2)
			if err := rdb.Save(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			sell(items, "x", 3) // answered sold, lost with the snapshot
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			fresh, _ := process(true)
			wantItem(t, fresh, "x", 8, 2) // rewound: 3 answered sales gone

			for i := range 3 {
				if sale, err := fresh.ReduceFor(t.Context(), "x", stock.Buyer{}); !errors.Is(err, stock.ErrStoreRewound) || errors.Is(err, stock.ErrUnconfirmed) {
					t.Fatalf("sale %d of the rewound item by a new process: got %+v, %v; want ErrStoreRewound", i, sale, err)
				}
			}
			if st, err := fresh.Status(t.Context(), "x"); err != nil || st.State != redisstore.ItemHalted || st.Stock != 8 {
				t.Fatalf("status of the rewound item: %+v, %v; want halted, stock 8", st, err)
			}
			sell(fresh, "y", 1)
			if st := wantItem(t, fresh, "y", 7, 3); st.State != redisstore.ItemOpen {
				t.Fatalf("the item beside the rewound one: %+v; want open", st)
			}

			// y reset by a process without the witness: an epoch y's
			// witness never recorded.
			other, _ := process(false)
			if _, err := other.Reset(t.Context(), redisstore.Item{ID: "y", Stock: 50}); err != nil {
				t.Fatal(err)
			}
			fresh, _ = process(true)
			if sale, err := fresh.ReduceFor(t.Context(), "y", stock.Buyer{}); !errors.Is(err, stock.ErrStoreRewound) {
				t.Fatalf("sale of an item of another sale: got %+v, %v; want ErrStoreRewound", sale, err)
			}
			wantItem(t, fresh, "y", 50, 0)
			if st, err := fresh.Status(t.Context(), "y"); err != nil || st.State != redisstore.ItemHalted || !strings.Contains(st.Halted, "witness") {
				t.Fatalf("status of the foreign item: %+v, %v; want halted by the witness", st, err)
			}
		})
	}
}

// An item's witness comes first: a create it cannot record writes
// nothing, a sale it cannot record is unconfirmed (sold in Redis, its
// receipt says so), and one item's witness down leaves the others
// selling.
func TestItemWitnessFirst(t *testing.T) {
	var mu sync.Mutex
	regs := map[string]*storetest.MemRegister{}
	reg := func(id string) *storetest.MemRegister {
		mu.Lock()
		defer mu.Unlock()
		if regs[id] == nil {
			regs[id] = &storetest.MemRegister{}
		}
		return regs[id]
	}
	items, _ := newItems(t, false, func(c *redisstore.ItemsConfig) {
		c.Witness = func(id string) stock.Register { return reg(id) }
		c.WitnessTimeout = 200 * time.Millisecond
		c.Service.Mode, c.Service.ConfirmTimeout = stock.ModeAtomic, time.Second
	})
	reg("x").SetDown(true)
	if _, err := items.Create(t.Context(), redisstore.Item{ID: "x", Stock: 5}); !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("create with its witness down: %v; want ErrUnavailable", err)
	}
	if _, err := items.Status(t.Context(), "x"); !errors.Is(err, stock.ErrNoItem) {
		t.Fatalf("status after the refused create: %v; want ErrNoItem (nothing written)", err)
	}
	reg("x").SetDown(false)
	create(t, items, redisstore.Item{ID: "x", Stock: 5})
	create(t, items, redisstore.Item{ID: "y", Stock: 5})
	// The first sale reads the witness; those after only write it.
	if _, err := items.ReduceFor(t.Context(), "x", stock.Buyer{}); err != nil {
		t.Fatal(err)
	}

	reg("x").SetDown(true)
	_, err := items.ReduceFor(t.Context(), "x", stock.Buyer{})
	var ue *stock.UnconfirmedError
	if !errors.As(err, &ue) || !errors.Is(err, redisstore.ErrNotWitnessed) {
		t.Fatalf("sale with its witness down: %v; want unconfirmed, not witnessed", err)
	}
	if _, sold, err := items.Receipt(t.Context(), "x", ue.Attempt); err != nil || !sold {
		t.Fatalf("receipt of the unwitnessed sale: sold %v, %v; want sold", sold, err)
	}
	if _, err := items.ReduceFor(t.Context(), "y", stock.Buyer{}); err != nil {
		t.Fatalf("sale of y while x's witness is down: %v", err)
	}
	wantItem(t, items, "x", 3, 2)
	wantItem(t, items, "y", 4, 1)
	if reg("y").Puts.Load() == 0 {
		t.Fatal("y's witness was never written: its sales were not witnessed")
	}
}
