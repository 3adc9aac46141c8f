package redisstore_test

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locallock"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// restorableSale is a sale of n units with reservations, sold in mode m,
// on a fresh redis-server the test may kill and start again (from its
// last SAVE).
func restorableSale(t *testing.T, m ledgerMode, n int64) (*servers.Process, *redis.Client, *redisstore.Store, *stock.Service) {
	t.Helper()
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.NewStore(rdb, ledgerKeys(1)).WithReservations()
	if err := s.Reset(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	return srv, rdb, s, m.service(s, func(c *stock.ServiceConfig) { c.PaymentWindow = window })
}

// A sale with reservations is held to what its replicas answered when its
// Redis goes back in time, as a sale without them is
// (TestOlderSnapshotHaltsTheSale): the ceilings are of the fresh stock,
// the stock less the units returned, which a return leaves as it was. So
// returns between sales halt nothing, and a snapshot that lost sales
// answered sold (and a return made after them) halts the sale. Before,
// a store with reservations kept no ceilings, and sold those units again.
func TestRewoundReservationSaleHalts(t *testing.T) {
	for _, m := range reservationModes() {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			srv, rdb, s, svc := restorableSale(t, m, 10)
			cancel := func(id string) {
				t.Helper()
				if e, err := s.Cancel(ctx, id); err != nil || e.State != redisstore.StateCancelled {
					t.Fatalf("cancel %s: %+v, %v; want cancelled", id, e, err)
				}
			}
			a, b := sellOne(t, svc), sellOne(t, svc)
			cancel(a.OrderID) // the stock rises after a sale's ceiling: no rewind
			sellOne(t, svc)
			cancel(b.OrderID)
			sellOne(t, svc)
			wantBooks(t, s, 10, 8, 2)

			if err := rdb.Save(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			c := sellOne(t, svc) // answered sold, then lost with the snapshot
			sellOne(t, svc)
			cancel(c.OrderID) // a return lost with them: fresh stock 4, stock 7
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(ctx); err != nil {
				t.Fatal(err)
			}
			wantBooks(t, s, 10, 8, 2) // the snapshot's: fresh stock 6

			if sale, err := svc.ReduceFor(ctx, stock.Buyer{}); !errors.Is(err, stock.ErrStoreRewound) {
				t.Fatalf("sale on the rewound Redis: got %+v, %v; want ErrStoreRewound", sale, err)
			}
			if why, err := s.Halted(ctx); err != nil || why == "" {
				t.Fatalf("Halted: %q, %v; want the reason", why, err)
			}
			wantBooks(t, s, 10, 8, 2) // nothing sold on it
			// Its counts leave out the units returned: refused, nothing
			// written (the way back is a reset).
			if _, err := s.Reconcile(ctx, "operator", 0); !errors.Is(err, redisstore.ErrNotReconcilable) {
				t.Fatalf("reconcile: %v; want ErrNotReconcilable", err)
			}
			wantBooks(t, s, 10, 8, 2)
		})
	}
}

// With a witness, a sale with reservations is held to what its replicas
// answered across restarts of every replica, as a sale without them is
// (TestWitnessCatchesRewindAcrossProcessRestarts): the witness keeps the
// fresh stock's ceilings, so a new process's sale after returns halts
// nothing, and one on a Redis restored from an older snapshot halts. An
// adoption after the witness lost its record keeps the fresh stock too.
func TestWitnessedReservationSale(t *testing.T) {
	for _, m := range reservationModes() {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			srv := servertest.Redis(t)
			reg := &storetest.MemRegister{}
			rdb0 := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = rdb0.Close() })
			// The lock service outlives the processes: its tokens go on.
			locker := locallock.New()
			process := func() (*redisstore.Store, *stock.Service) {
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
				t.Cleanup(func() { _ = rdb.Close() })
				s := redisstore.NewStore(rdb, ledgerKeys(1)).WithReservations().WithWitness(reg, 0)
				return s, newService(s, locker, func(c *stock.ServiceConfig) {
					c.Replica, c.PaymentWindow = "r1", window
					m.cfg(c)
				})
			}
			s, svc := process()
			if err := s.Reset(ctx, 10); err != nil {
				t.Fatal(err)
			}
			cancel := func(s *redisstore.Store, id string) {
				t.Helper()
				if e, err := s.Cancel(ctx, id); err != nil || e.State != redisstore.StateCancelled {
					t.Fatalf("cancel %s: %+v, %v; want cancelled", id, e, err)
				}
			}
			a, b := sellOne(t, svc), sellOne(t, svc)
			cancel(s, a.OrderID)
			sellOne(t, svc)
			cancel(s, b.OrderID)
			wantBooks(t, s, 10, 9, 2) // fresh stock 7, the witness's ceiling

			// Every process new: it learns the ceiling from the witness,
			// and the units returned halt nothing.
			s2, svc2 := process()
			c := sellOne(t, svc2)
			if err := rdb0.Save(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			sellOne(t, svc2) // answered sold, then lost with the snapshot
			cancel(s2, c.OrderID)
			sellOne(t, svc2)
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(ctx); err != nil {
				t.Fatal(err)
			}
			wantBooks(t, s2, 10, 8, 2) // the snapshot's: fresh stock 6, answered 4

			_, svc3 := process()
			if sale, err := svc3.ReduceFor(ctx, stock.Buyer{}); !errors.Is(err, stock.ErrStoreRewound) {
				t.Fatalf("a new process's sale on the rewound Redis: got %+v, %v; want ErrStoreRewound", sale, err)
			}
			wantBooks(t, s2, 10, 8, 2)
		})
	}
}

// An adoption of a reservation sale records the fresh stock, the stock
// less the units returned, as the witness's ceiling: the stock itself
// would let a later rewind of that many units through.
func TestAdoptedReservationSaleKeepsTheFreshStock(t *testing.T) {
	ctx := t.Context()
	srv := servertest.Redis(t)
	reg := &storetest.MemRegister{}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.NewStore(rdb, ledgerKeys(1)).WithReservations().WithWitness(reg, 0)
	svc := ledgerModes[1].service(s, func(c *stock.ServiceConfig) { c.PaymentWindow = window })
	if err := s.Reset(ctx, 10); err != nil {
		t.Fatal(err)
	}
	a := sellOne(t, svc)
	sellOne(t, svc)
	if _, err := s.Cancel(ctx, a.OrderID); err != nil {
		t.Fatal(err)
	}
	wantBooks(t, s, 10, 9, 1)
	reg.Set(nil) // the witness lost its record
	if _, err := svc.ReduceFor(ctx, stock.Buyer{}); !errors.Is(err, stock.ErrWitnessLost) {
		t.Fatalf("a sale after the witness forgot: %v; want witness lost", err)
	}
	storetest.WantHalted(t, s, "witness_lost")
	ad, err := s.AdoptWitness(ctx, "operator")
	if err != nil {
		t.Fatal(err)
	}
	// The sale refused for the witness sold in Redis (unconfirmed): stock
	// 8, 1 returned.
	if len(ad.Stocks) != 1 || ad.Stocks[0] != 7 {
		t.Fatalf("adopted stocks %v; want [7]: stock 8 less 1 returned", ad.Stocks)
	}
	sellOne(t, svc) // the sale goes on
}

// Once returned units sold again take more units than the sale started
// with, the fresh stock is below 0. Its ceiling stays at 0, so a Redis
// restored to a fresh stock above 0 is still caught. Before, the ceiling
// went below 0, read as none, and the sale went on on the rewound Redis.
func TestRewindCaughtOnceUnitsSoldAgain(t *testing.T) {
	for _, m := range reservationModes() {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			srv, rdb, s, svc := restorableSale(t, m, 2)
			a := sellOne(t, svc)
			if err := rdb.Save(ctx).Err(); err != nil { // fresh stock 1
				t.Fatal(err)
			}
			b := sellOne(t, svc)
			for _, id := range []string{a.OrderID, b.OrderID} {
				if _, err := s.Cancel(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			sellOne(t, svc)
			sellOne(t, svc)
			wantBooks(t, s, 2, 0, 2) // lucky 4: fresh stock -2
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(ctx); err != nil {
				t.Fatal(err)
			}
			wantBooks(t, s, 2, 1, 0)
			if sale, err := svc.ReduceFor(ctx, stock.Buyer{}); !errors.Is(err, stock.ErrStoreRewound) {
				t.Fatalf("sale on a Redis gone back to fresh stock 1: got %+v, %v; want ErrStoreRewound", sale, err)
			}
		})
	}
}
