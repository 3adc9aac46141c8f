package redisstore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locallock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// A Redis restarted from an older snapshot of the same sale has lost
// sales it acknowledged. Before, it sold those units again (130 orders
// answered 200 for 100 units). The replica that answered them now finds
// more stock than it left and halts the sale: it, and a replica that
// never sold (it reads the halt), refuse every sale; the books stay as
// the snapshot left them; a reset is refused until an operator removes
// the halt, and then the sale goes on.
func TestOlderSnapshotHaltsTheSale(t *testing.T) {
	for _, m := range []struct {
		name   string
		ledger bool
		cfg    func(*stock.ServiceConfig)
	}{
		{"locked", false, func(c *stock.ServiceConfig) { c.Fencing = true }},
		{"atomic", false, func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }},
		{"locked+ledger", true, func(c *stock.ServiceConfig) { c.Fencing = true }},
		{"atomic+ledger", true, func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }},
		{"locked+combine", false, func(c *stock.ServiceConfig) { c.Fencing, c.Combine = true, true }},
	} {
		t.Run(m.name, func(t *testing.T) {
			srv := servertest.Redis(t)
			client := func() *redis.Client {
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
				t.Cleanup(func() { _ = rdb.Close() })
				return rdb
			}
			keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
			if m.ledger {
				keys = ledgerKeys(1)
			}
			rdb := client()
			s := redisstore.NewStore(rdb, keys)
			if err := s.Reset(t.Context(), 100); err != nil {
				t.Fatal(err)
			}
			lk := locallock.New()
			svc := newService(s, lk, m.cfg)
			n := 0
			buy := func(svc *stock.Service) (stock.Sale, error) {
				n++
				if !m.ledger {
					return svc.Reduce(t.Context())
				}
				return svc.ReduceFor(t.Context(), stock.Buyer{User: fmt.Sprintf("u%d", n), Key: fmt.Sprintf("k%d", n)})
			}
			sell := func(k int) {
				t.Helper()
				for range k {
					if _, err := buy(svc); err != nil {
						t.Fatalf("sale %d: %v", n, err)
					}
				}
			}
			sell(3)
			if err := rdb.Save(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			sell(3) // answered sold, then lost with the snapshot
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			storetest.WantStatus(t, s, stock.Status{Stock: 97, Lucky: 3})

			if sale, err := buy(svc); !errors.Is(err, stock.ErrStoreRewound) || !errors.Is(err, stock.ErrStoreLost) {
				t.Fatalf("sale on the rewound Redis: got %+v, %v; want ErrStoreRewound", sale, err)
			}
			// Another replica, which never sold: refused by the halt.
			other := newService(redisstore.NewStore(client(), keys), lk, m.cfg)
			if sale, err := buy(other); !errors.Is(err, stock.ErrStoreRewound) {
				t.Fatalf("another replica's sale: got %+v, %v; want ErrStoreRewound", sale, err)
			}
			storetest.WantStatus(t, s, stock.Status{Stock: 97, Lucky: 3})
			if why, err := s.Halted(t.Context()); err != nil || why == "" {
				t.Fatalf("Halted: %q, %v; want the reason", why, err)
			}
			if err := s.Reset(t.Context(), 100); !errors.Is(err, stock.ErrStoreRewound) {
				t.Fatalf("reset of a halted sale: %v; want ErrStoreRewound until an operator removes the halt", err)
			}

			if err := rdb.Del(t.Context(), "stock:halt").Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.Reset(t.Context(), 100); err != nil {
				t.Fatalf("reset after the operator removed the halt: %v", err)
			}
			if _, err := buy(other); err != nil {
				t.Fatalf("sale after the reset: %v", err)
			}
			storetest.WantStatus(t, s, stock.Status{Stock: 99, Lucky: 1})
		})
	}
}

// Resets by one replica are not rewinds to another: the stock goes back up
// under a new epoch, which a replica that sold before learns and follows.
// Every sale here must sell, over several resets in turn; with a witness
// too, where the replica that learns must read the other's reset there,
// not its own last copy of the record.
func TestResetByAnotherReplicaIsNoRewind(t *testing.T) {
	for _, m := range []struct {
		name    string
		cfg     func(*stock.ServiceConfig)
		witness bool
	}{
		{"locked", func(c *stock.ServiceConfig) { c.Fencing = true }, false},
		{"atomic", func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }, false},
		{"locked+witness", func(c *stock.ServiceConfig) { c.Fencing = true }, true},
		{"atomic+witness", func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }, true},
	} {
		t.Run(m.name, func(t *testing.T) {
			srv := servertest.Redis(t)
			keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Segments: 2}
			var stores []*redisstore.Store
			var svcs []*stock.Service
			lk := locallock.New()
			reg := &storetest.MemRegister{}
			for range 2 {
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
				t.Cleanup(func() { _ = rdb.Close() })
				s := redisstore.NewStore(rdb, keys)
				if m.witness {
					s = s.WithWitness(reg, 0)
				}
				stores = append(stores, s)
				svcs = append(svcs, newService(s, lk, m.cfg))
			}
			for round := range 4 {
				if err := stores[round%2].Reset(t.Context(), 10); err != nil {
					t.Fatal(err)
				}
				for i := range 6 {
					if _, err := svcs[i%2].Reduce(t.Context()); err != nil {
						t.Fatalf("round %d, sale %d on replica %d: %v", round, i, i%2, err)
					}
				}
				storetest.WantStatus(t, stores[0], stock.Status{Stock: 4, Lucky: 6})
			}
		})
	}
}
