package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locallock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// unitsLog is a DurableUnits in memory: the units committed so far, by
// sale. Package orders tests the MySQL one.
type unitsLog struct {
	mu    sync.Mutex
	high  map[string]int64
	err   error
	reads atomic.Int64
	// held, when set, is closed by the first read, which then answers
	// only once release is closed: a read still out while another call
	// of the same process sells.
	held, release chan struct{}
}

func (u *unitsLog) HighestUnit(_ context.Context, sale string) (int64, error) {
	if u.reads.Add(1) == 1 && u.held != nil {
		close(u.held)
		<-u.release
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.high[sale], u.err
}

// commit stores the order of sale, as the consumer does after the 200.
func (u *unitsLog) commit(t *testing.T, s *redisstore.Store, sale stock.Sale) {
	t.Helper()
	o, err := s.Order(t.Context(), sale.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.high == nil {
		u.high = map[string]int64{}
	}
	u.high[o.Sale] = max(u.high[o.Sale], o.Unit)
}

// Redis and its witness restored together from one night's backups, and
// every stockd restarted: each agrees with the other, so the witness
// passes the sale, and a new process sold the units sold since the backup
// again. The durable orders remember them: with them, the new process's
// first sale halts the sale, reason orders_ahead, before it sells. A
// healthy Redis passes the same check, and a durable store that does not
// answer skips it (the orders never stop a sale).
func TestDurableOrdersCatchRedisRestoredWithItsWitness(t *testing.T) {
	for _, m := range ledgerModes {
		if m.name == "combine" || m.name == "segments+combine" {
			continue // the same scripts as locked and segments
		}
		t.Run(m.name, func(t *testing.T) {
			srv := servertest.Redis(t)
			client := func() *redis.Client {
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
				t.Cleanup(func() { _ = rdb.Close() })
				return rdb
			}
			reg := &storetest.MemRegister{}
			keys := ledgerKeys(m.segments)
			rdb := client()
			s := redisstore.NewStore(rdb, keys).WithWitness(reg, 0)
			if err := s.Reset(t.Context(), 100); err != nil {
				t.Fatal(err)
			}
			units := &unitsLog{}
			lk := locallock.New() // one lock service for every process
			service := func(st *redisstore.Store) *stock.Service { return newService(st, lk, m.cfg) }
			svc := service(s)
			n := 0
			buy := func(svc *stock.Service) (stock.Sale, error) {
				n++
				return svc.ReduceFor(t.Context(), stock.Buyer{User: fmt.Sprintf("u%d", n), Key: fmt.Sprintf("k%d", n)})
			}
			sell := func(k int) {
				t.Helper()
				for range k {
					sale, err := buy(svc)
					if err != nil {
						t.Fatalf("sale %d: %v", n, err)
					}
					units.commit(t, s, sale)
				}
			}
			// A new process over the same Redis and witness.
			restarted := func(u redisstore.DurableUnits) *stock.Service {
				st := redisstore.NewStore(client(), keys).WithWitness(reg, 0)
				if u != nil {
					st = st.WithDurableUnits(u)
				}
				return service(st)
			}

			sell(3)
			if got, err := restarted(units).ReduceFor(t.Context(), stock.Buyer{User: "healthy", Key: "h"}); err != nil {
				t.Fatalf("a new process on a healthy Redis: %+v, %v; want sold", got, err)
			} else {
				units.commit(t, s, got)
			}
			if units.reads.Load() == 0 {
				t.Fatal("the new process learned the sale without reading the durable orders")
			}
			down := &unitsLog{err: errors.New("mysql down")}
			if _, err := restarted(down).ReduceFor(t.Context(), stock.Buyer{User: "down", Key: "d"}); err != nil {
				t.Fatalf("a new process while the durable orders do not answer: %v; want sold, unchecked", err)
			}
			if down.reads.Load() == 0 {
				t.Fatal("the new process did not try the durable orders")
			}
			// The durable store that did not answer missed that order: it
			// is committed now, as the consumer would once MySQL is back.
			units.mu.Lock()
			units.high[mustSale(t, s)]++
			units.mu.Unlock()

			if err := rdb.Save(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			backup := reg.Value()
			sell(3) // answered sold and stored, then lost with both backups
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			reg.Set(backup)
			storetest.WantStatus(t, s, stock.Status{Stock: 95, Lucky: 5})

			// The witness alone passes it: the unit sold twice.
			blind := restarted(nil)
			if _, err := blind.ReduceFor(t.Context(), stock.Buyer{User: "again", Key: "a"}); err != nil {
				t.Fatalf("without the durable orders: %v; want sold (the witness was restored with Redis)", err)
			}
			// A new process with the check: its first call's read of MySQL is
			// still out when a second call comes, which must check too, not
			// sell on a sale half learned.
			slow := &unitsLog{high: units.high, held: make(chan struct{}), release: make(chan struct{})}
			checked := restarted(slow)
			first := make(chan error, 1)
			go func() {
				_, err := checked.ReduceFor(t.Context(), stock.Buyer{User: "late", Key: "l"})
				first <- err
			}()
			<-slow.held
			if sale, err := checked.ReduceFor(t.Context(), stock.Buyer{User: "meanwhile", Key: "m"}); !errors.Is(err, stock.ErrStoreRewound) {
				t.Fatalf("a second call while the first checks: %+v, %v; want ErrStoreRewound", sale, err)
			}
			close(slow.release)
			if err := <-first; !errors.Is(err, stock.ErrStoreRewound) {
				t.Fatalf("a new process on the restored Redis: %v; want ErrStoreRewound", err)
			}
			storetest.WantHalted(t, s, "orders_ahead")
			if _, err := blind.ReduceFor(t.Context(), stock.Buyer{User: "after", Key: "x"}); !errors.Is(err, stock.ErrStoreRewound) {
				t.Fatalf("the process without the check, after the halt: %v; want ErrStoreRewound", err)
			}
			storetest.WantStatus(t, s, stock.Status{Stock: 94, Lucky: 6})
		})
	}
}

// mustSale is the ledger's current sale id.
func mustSale(t *testing.T, s *redisstore.Store) string {
	t.Helper()
	st, err := s.LedgerStats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st.Sale
}
