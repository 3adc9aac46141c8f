package redisstore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locallock"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// reconcileLab is one sale on a real Redis with a witness in memory and
// durable orders that a test commits by hand: a consumer as far behind as
// the test makes it.
type reconcileLab struct {
	t     *testing.T
	srv   *servers.Process
	rdb   *redis.Client
	reg   *storetest.MemRegister
	keys  redisstore.Keys
	s     *redisstore.Store
	units *unitsLog
	svc   *stock.Service
	mk    func(*redisstore.Store) *stock.Service
	n     int
	// acked is every sale answered sold, in order.
	acked []stock.Sale
}

func newReconcileLab(t *testing.T, m ledgerMode, initial int64) *reconcileLab {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	x := &reconcileLab{t: t, srv: srv, rdb: rdb, reg: &storetest.MemRegister{}, keys: ledgerKeys(m.segments), units: &unitsLog{high: map[string]int64{}}}
	x.s = redisstore.NewStore(rdb, x.keys).WithWitness(x.reg, 0).WithDurableUnits(x.units)
	if err := x.s.Reset(t.Context(), initial); err != nil {
		t.Fatal(err)
	}
	lk := locallock.New()
	x.mk = func(st *redisstore.Store) *stock.Service { return newService(st, lk, m.cfg) }
	x.svc = x.mk(x.s)
	return x
}

// sell makes k sales answered sold.
func (x *reconcileLab) sell(k int) {
	x.t.Helper()
	for range k {
		x.n++
		sale, err := x.svc.ReduceFor(x.t.Context(), stock.Buyer{User: fmt.Sprintf("u%d", x.n), Key: fmt.Sprintf("k%d", x.n)})
		if err != nil {
			x.t.Fatalf("sale %d: %v", x.n, err)
		}
		x.acked = append(x.acked, sale)
	}
}

// store has the consumer store the first k acknowledged orders.
func (x *reconcileLab) store(k int) {
	x.t.Helper()
	for _, sale := range x.acked[:k] {
		x.units.commit(x.t, x.s, sale)
	}
}

// restartRedis kills Redis and starts it again from its last snapshot.
func (x *reconcileLab) restartRedis() {
	x.t.Helper()
	if err := x.srv.Kill(); err != nil {
		x.t.Fatal(err)
	}
	if err := x.srv.Start(x.t.Context()); err != nil {
		x.t.Fatal(err)
	}
}

// unitsOf is the unit each acknowledged sale was given.
func (x *reconcileLab) unitsOf(t *testing.T) []int64 {
	t.Helper()
	out := make([]int64, len(x.acked))
	for i, sale := range x.acked {
		o, err := x.s.Order(t.Context(), sale.OrderID)
		if err != nil {
			t.Fatalf("order %s of sale %d: %v", sale.OrderID, i+1, err)
		}
		out[i] = o.Unit
	}
	return out
}

// Redis went back while the order consumer was behind: the witness knows
// every acknowledged unit, the durable orders only some, Redis's restored
// ledger a few more. Reconcile counts every acknowledged unit sold, holds
// back the ones no order holds, leaves the ones only Redis's ledger holds
// to the consumer, and the sale resumes on the old process and a new one:
// it sells out with every acknowledged unit answered once, none lost, none
// sold twice.
func TestReconcileKeepsWhatWasAcknowledged(t *testing.T) {
	for _, m := range ledgerModes {
		if m.name == "combine" || m.name == "segments+combine" {
			continue // the same scripts as locked and segments
		}
		t.Run(m.name, func(t *testing.T) {
			x := newReconcileLab(t, m, 60)
			ctx := t.Context()
			if _, err := x.s.Reconcile(ctx, "ops", 0); !errors.Is(err, redisstore.ErrNotReconcilable) {
				t.Fatalf("reconcile of a sale not halted: %v; want ErrNotReconcilable", err)
			}
			x.sell(10)
			x.store(4) // the consumer, behind
			if err := x.rdb.Save(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			x.sell(8)
			x.store(6)
			before := x.unitsOf(t)
			x.restartRedis()
			storetest.WantStatus(t, x.s, stock.Status{Stock: 50, Lucky: 10})
			// A new process learns the witness's ceilings and halts.
			fresh := x.mk(redisstore.NewStore(x.rdb, x.keys).WithWitness(x.reg, 0).WithDurableUnits(x.units))
			if _, err := fresh.ReduceFor(ctx, stock.Buyer{User: "new", Key: "n"}); !errors.Is(err, stock.ErrStoreRewound) {
				t.Fatalf("a new process on the rewound Redis: %v; want ErrStoreRewound", err)
			}
			storetest.WantHalted(t, x.s, "rewound")
			if _, err := x.s.AdoptWitness(ctx, "ops"); !errors.Is(err, redisstore.ErrNotAdoptable) {
				t.Fatalf("adopting a rewound Redis: %v; want ErrNotAdoptable", err)
			}

			// Refusals first: nothing written.
			if _, err := x.s.Reconcile(ctx, " ", 0); !errors.Is(err, redisstore.ErrNotReconcilable) {
				t.Fatalf("reconcile by nobody: %v", err)
			}
			if _, err := x.s.Reconcile(ctx, "ops", 61); !errors.Is(err, redisstore.ErrNotReconcilable) {
				t.Fatalf("reconcile at_least above the initial: %v", err)
			}
			x.units.mu.Lock()
			x.units.err = errors.New("mysql down")
			x.units.mu.Unlock()
			if _, err := x.s.Reconcile(ctx, "ops", 0); !errors.Is(err, stock.ErrUnavailable) {
				t.Fatalf("reconcile while the durable orders do not answer: %v; want ErrUnavailable", err)
			}
			x.units.mu.Lock()
			x.units.err = nil
			x.units.mu.Unlock()
			storetest.WantStatus(t, x.s, stock.Status{Stock: 50, Lucky: 10})

			r, err := x.s.Reconcile(ctx, "ops", 0)
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			t.Logf("reconciled: %+v", r)
			if r.RedisLucky != 10 || r.DurableUnit != 6 || r.WitnessSold != 18 || r.Lucky != 18 || r.Held != 8 || r.Pending != 4 {
				t.Fatalf("reconciled %+v; want redis_lucky 10, durable_unit 6, witness_sold 18, lucky 18, held 8, pending 4", r)
			}
			storetest.WantStatus(t, x.s, stock.Status{Stock: 42, Lucky: 18})
			storetest.WantHalted(t, x.s, "")
			// The 8 held are exactly the acknowledged sales whose orders
			// went back with Redis; the first 10 are in its ledger still.
			var lost int64
			for i, sale := range x.acked {
				o, err := x.s.Order(ctx, sale.OrderID)
				switch {
				case errors.Is(err, stock.ErrNoOrder):
					lost++
				case err != nil:
					t.Fatal(err)
				case o.Unit != before[i]:
					t.Fatalf("order %s: unit %d after, %d before", sale.OrderID, o.Unit, before[i])
				}
			}
			if lost != r.Held {
				t.Fatalf("%d acknowledged orders are gone from Redis's ledger; the reconciliation holds %d", lost, r.Held)
			}

			// Both processes sell on, to the end.
			seen := map[int64]int{}
			for _, u := range before {
				seen[u]++
			}
			for i := 0; ; i++ {
				svc := x.svc
				if i%2 == 1 {
					svc = fresh
				}
				sale, err := svc.ReduceFor(ctx, stock.Buyer{User: fmt.Sprintf("after%d", i), Key: fmt.Sprintf("a%d", i)})
				if errors.Is(err, stock.ErrSoldOut) {
					break
				}
				if err != nil {
					t.Fatalf("sale %d after the reconciliation: %v", i, err)
				}
				o, err := x.s.Order(ctx, sale.OrderID)
				if err != nil {
					t.Fatal(err)
				}
				if seen[o.Unit]++; seen[o.Unit] > 1 {
					t.Fatalf("unit %d answered sold twice", o.Unit)
				}
				if i > 60 {
					t.Fatal("sold more than the stock")
				}
			}
			if len(seen) != 60 {
				t.Fatalf("%d units answered sold in all; want the 60 of the sale", len(seen))
			}
			storetest.WantStatus(t, x.s, stock.Status{Stock: 0, Lucky: 60})
		})
	}
}

// The witness wiped and Redis gone back (one host's crash): the sale halts
// witness_lost. Adoption would trust Redis, and the durable orders say it
// is behind: refused. Reconcile counts the durable orders and the
// operator's count from the buyers' answers; without that count, the
// units answered after the consumer's last order cannot be known, which
// the reconciliation shows as nothing held.
func TestReconcileAfterTheWitnessForgot(t *testing.T) {
	x := newReconcileLab(t, ledgerModes[0], 40)
	ctx := t.Context()
	x.sell(5)
	if err := x.rdb.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	x.sell(7)
	x.store(4) // the consumer, behind: nothing above Redis's 5 yet
	sale, ninth := mustSale(t, x.s), x.unitsOf(t)[8]
	x.restartRedis()
	x.reg.Set(nil)
	fresh := x.mk(redisstore.NewStore(x.rdb, x.keys).WithWitness(x.reg, 0).WithDurableUnits(x.units))
	if _, err := fresh.ReduceFor(ctx, stock.Buyer{User: "new", Key: "n"}); !errors.Is(err, stock.ErrStoreRewound) {
		t.Fatalf("a new process on a wiped witness: %v; want ErrStoreRewound", err)
	}
	storetest.WantHalted(t, x.s, "witness_lost")
	// The consumer catches up with the orders it had read before Redis
	// went back.
	x.units.mu.Lock()
	x.units.high[sale] = ninth
	x.units.mu.Unlock()
	if _, err := x.s.AdoptWitness(ctx, "ops"); !errors.Is(err, redisstore.ErrNotAdoptable) {
		t.Fatalf("adopting while the durable orders are ahead: %v; want ErrNotAdoptable", err)
	}
	r, err := x.s.Reconcile(ctx, "ops", 12) // 12 answers sold, from the buyers
	if err != nil {
		t.Fatal(err)
	}
	if r.WitnessSold != -1 || r.DurableUnit != 9 || r.RedisLucky != 5 || r.Lucky != 12 || r.Held != 3 || r.Pending != 0 {
		t.Fatalf("reconciled %+v; want witness_sold -1, durable_unit 9, redis_lucky 5, lucky 12, held 3", r)
	}
	storetest.WantStatus(t, x.s, stock.Status{Stock: 28, Lucky: 12})
	// The witness holds the sale again, so every process sells.
	next, err := fresh.ReduceFor(ctx, stock.Buyer{User: "later", Key: "l"})
	if err != nil {
		t.Fatalf("a sale after the reconciliation: %v", err)
	}
	if o, err := x.s.Order(ctx, next.OrderID); err != nil || o.Unit != 13 {
		t.Fatalf("the next sale's order: %+v, %v; want unit 13", o, err)
	}
	if _, err := x.svc.ReduceFor(ctx, stock.Buyer{User: "old", Key: "o"}); err != nil {
		t.Fatalf("the process that ran all along, after the reconciliation: %v", err)
	}
}
