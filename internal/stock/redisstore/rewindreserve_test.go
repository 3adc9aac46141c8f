package redisstore_test

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

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
			srv := servertest.Redis(t)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			s := redisstore.NewStore(rdb, ledgerKeys(1)).WithReservations()
			if err := s.Reset(ctx, 10); err != nil {
				t.Fatal(err)
			}
			svc := m.service(s, func(c *stock.ServiceConfig) { c.PaymentWindow = window })
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
