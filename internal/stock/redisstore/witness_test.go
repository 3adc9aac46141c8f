package redisstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locallock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// A Redis restarted from an older snapshot while every stockd restarted
// too: the processes that remembered the ceilings are gone. Before the
// witness, the new processes believed the snapshot and sold its units
// again; now a new process learns the ceilings from the witness and its
// first sale halts the sale.
func TestWitnessCatchesRewindAcrossProcessRestarts(t *testing.T) {
	for _, m := range []struct {
		name   string
		ledger bool
		cfg    func(*stock.ServiceConfig)
	}{
		{"locked", false, func(c *stock.ServiceConfig) { c.Fencing = true }},
		{"atomic", false, func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }},
		{"atomic+ledger", true, func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }},
		{"locked+combine+segments", false, func(c *stock.ServiceConfig) { c.Fencing, c.Combine = true, true }},
	} {
		t.Run(m.name, func(t *testing.T) {
			srv := servertest.Redis(t)
			reg := &storetest.MemRegister{}
			keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
			if m.ledger {
				keys = ledgerKeys(1)
			}
			if m.name == "locked+combine+segments" {
				keys.Segments = 2
			}
			process := func() (*redisstore.Store, *stock.Service, *redis.Client) {
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
				t.Cleanup(func() { _ = rdb.Close() })
				s := redisstore.NewStore(rdb, keys).WithWitness(reg, 0)
				return s, newService(s, locallock.New(), m.cfg), rdb
			}
			s, svc, rdb := process()
			if err := s.Reset(t.Context(), 100); err != nil {
				t.Fatal(err)
			}
			n := 0
			buy := func(svc *stock.Service) (stock.Sale, error) {
				n++
				if !m.ledger {
					return svc.Reduce(t.Context())
				}
				return svc.ReduceFor(t.Context(), stock.Buyer{User: fmt.Sprintf("u%d", n), Key: fmt.Sprintf("k%d", n)})
			}
			for range 3 {
				if _, err := buy(svc); err != nil {
					t.Fatal(err)
				}
			}
			if err := rdb.Save(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			saved, err := s.SegmentStocks(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			// Answered sold, then lost with the snapshot: at least 4, and
			// on every segment, for a new process picks its segment at
			// random and a segment nobody sold from since the snapshot is
			// not rewound (its sale is refused by the fence, not the halt).
			for sold := 0; sold < 4 || !allBelow(t, s, saved); sold++ {
				if sold == 50 {
					t.Fatalf("50 sales since the snapshot and some segment still has %v", saved)
				}
				if _, err := buy(svc); err != nil {
					t.Fatal(err)
				}
			}
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			storetest.WantStatus(t, s, stock.Status{Stock: 97, Lucky: 3})

			// Every process is new: nothing remembers but the witness.
			_, fresh, _ := process()
			for i := range 4 {
				if sale, err := buy(fresh); !errors.Is(err, stock.ErrStoreRewound) || errors.Is(err, stock.ErrUnconfirmed) {
					t.Fatalf("sale %d of a new process on the rewound Redis: got %+v, %v; want ErrStoreRewound", i, sale, err)
				}
			}
			storetest.WantStatus(t, s, stock.Status{Stock: 97, Lucky: 3})
		})
	}
}

// allBelow reports whether every segment's stock is below its value in
// saved.
func allBelow(t *testing.T, s *redisstore.Store, saved []int64) bool {
	t.Helper()
	now, err := s.SegmentStocks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range now {
		if now[i] >= saved[i] {
			return false
		}
	}
	return true
}

// A snapshot of another sale loaded into the stock Redis carries its own
// epoch. Before the witness, a replica took it for a reset by another
// replica and sold from it; now the epoch is unknown to the witness, and
// the sale halts, for a replica that sold before and for a new one.
func TestWitnessRefusesAnotherSale(t *testing.T) {
	srv := servertest.Redis(t)
	reg := &storetest.MemRegister{}
	keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	client := func() *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	s := redisstore.NewStore(client(), keys).WithWitness(reg, 0)
	svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic })
	if err := s.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := svc.Reduce(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// The other sale, written as its own stockd (with no witness, or
	// another one) would: stock 50, its own epoch.
	if err := redisstore.NewStore(client(), keys).Reset(t.Context(), 50); err != nil {
		t.Fatal(err)
	}
	if sale, err := svc.Reduce(t.Context()); !errors.Is(err, stock.ErrStoreRewound) || errors.Is(err, stock.ErrUnconfirmed) {
		t.Fatalf("sale of the replica that sold before: got %+v, %v; want ErrStoreRewound", sale, err)
	}
	fresh := newService(redisstore.NewStore(client(), keys).WithWitness(reg, 0), locallock.New(), func(c *stock.ServiceConfig) { c.Fencing = true })
	if sale, err := fresh.Reduce(t.Context()); !errors.Is(err, stock.ErrStoreRewound) || errors.Is(err, stock.ErrUnconfirmed) {
		t.Fatalf("sale of a new replica: got %+v, %v; want ErrStoreRewound", sale, err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 50, Lucky: 0})
	if why, err := s.Halted(t.Context()); err != nil || why == "" {
		t.Fatalf("Halted: %q, %v; want the reason", why, err)
	}
}

// A witness that does not answer: the sale happened in Redis, so it is
// unconfirmed (never sold, never refused), and its receipt says it sold.
// Concurrent sales share the witness's writes.
func TestWitnessDownAndGroupCommit(t *testing.T) {
	srv := servertest.Redis(t)
	reg := &storetest.MemRegister{}
	keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.NewStore(rdb, keys).WithWitness(reg, 200*time.Millisecond)
	svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) {
		c.Mode, c.ConfirmTimeout = stock.ModeAtomic, time.Second
	})
	if err := s.Reset(t.Context(), 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatal(err)
	}
	reg.SetDown(true)
	_, err := svc.Reduce(t.Context())
	var ue *stock.UnconfirmedError
	if !errors.As(err, &ue) || !errors.Is(err, redisstore.ErrNotWitnessed) {
		t.Fatalf("sale with the witness down: %v; want unconfirmed, not witnessed", err)
	}
	if _, sold, err := s.Receipt(t.Context(), ue.Attempt); err != nil || !sold {
		t.Fatalf("receipt of the unwitnessed sale: sold %v, %v; want sold", sold, err)
	}
	reg.SetDown(false)

	// Concurrent sales: one witness round is held at the gate until every
	// sale has taken its unit, so all of them wait for the witness at
	// once, whatever the machine's pace.
	gate := make(chan struct{})
	reg.Gate.Store(&gate)
	s = redisstore.NewStore(rdb, keys).WithWitness(reg, 30*time.Second)
	svc = newService(s, locallock.New(), func(c *stock.ServiceConfig) {
		c.Mode, c.ConfirmTimeout = stock.ModeAtomic, 30*time.Second
	})
	puts := reg.Puts.Load()
	const buyers = 60
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range buyers {
		wg.Go(func() {
			if _, err := svc.Reduce(t.Context()); err != nil {
				failed.Add(1)
				t.Error(err)
			}
		})
	}
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		lucky, err := rdb.Get(t.Context(), "lucky").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if lucky == 2+buyers || failed.Load() > 0 {
			break
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("lucky %d, want %d", lucky, 2+buyers)
		case <-poll.C:
		}
	}
	close(gate)
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	got := reg.Puts.Load() - puts
	t.Logf("%d sales, %d witness writes", buyers, got)
	if got == 0 || got > buyers/2 {
		t.Fatalf("%d witness writes for %d concurrent sales; want between 1 and %d (shared rounds)", got, buyers, buyers/2)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 1000 - 2 - buyers, Lucky: 2 + buyers})
}

// A witness that forgets everything while the sale goes on (the compose
// etcd on tmpfs, restarted) used to take the running sale again from one
// process's memory, and a new process after a rewind adopted Redis's
// epoch silently and sold units twice. Now unknown means halt: the
// running process's next sale finds its sale missing (its sale stays
// unconfirmed, its receipt says it sold) and halts the sale witness_lost,
// and a new process on a forgotten witness halts too.
func TestWitnessThatForgotHalts(t *testing.T) {
	srv := servertest.Redis(t)
	reg := &storetest.MemRegister{}
	keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	atomic := func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }
	s := redisstore.NewStore(rdb, keys).WithWitness(reg, 0)
	svc := newService(s, locallock.New(), atomic)
	if err := s.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatal(err)
	}
	reg.Set(nil) // forgotten
	_, err := svc.Reduce(t.Context())
	var ue *stock.UnconfirmedError
	if !errors.As(err, &ue) || !errors.Is(err, stock.ErrWitnessLost) {
		t.Fatalf("sale of the running process after the witness forgot: %v; want unconfirmed, witness lost", err)
	}
	if _, sold, err := s.Receipt(t.Context(), ue.Attempt); err != nil || !sold {
		t.Fatalf("receipt of the unconfirmed sale: sold %v, %v; want sold", sold, err)
	}
	storetest.WantHalted(t, s, "witness_lost")
	if _, err := svc.Reduce(t.Context()); !errors.Is(err, stock.ErrStoreRewound) {
		t.Fatalf("next sale: %v; want refused, halted", err)
	}
	if v, _ := reg.Get(t.Context()); v != nil {
		t.Fatalf("the witness holds %s; want nothing written from one process's memory", v)
	}

	// A new process on the forgotten witness: halted too, never adopted.
	if err := rdb.Del(t.Context(), "stock:halt").Err(); err != nil {
		t.Fatal(err)
	}
	fresh := newService(redisstore.NewStore(rdb, keys).WithWitness(reg, 0), locallock.New(), atomic)
	if sale, err := fresh.Reduce(t.Context()); !errors.Is(err, stock.ErrStoreRewound) || errors.Is(err, stock.ErrUnconfirmed) {
		t.Fatalf("a new process on a forgotten witness: got %+v, %v; want halted", sale, err)
	}
	storetest.WantHalted(t, s, "witness_lost")
	storetest.WantStatus(t, s, stock.Status{Stock: 8, Lucky: 2})
}

// The operator's way back from a witness_lost halt keeps the sale:
// AdoptWitness records Redis's sale, who decided and the books, lifts the
// halt, and the sale goes on for the running process and a new one; a
// rewind after it is caught again. It refuses where Redis is the one
// behind, and where the halt is not the witness's.
func TestAdoptWitness(t *testing.T) {
	srv := servertest.Redis(t)
	reg := &storetest.MemRegister{}
	keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	atomic := func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }
	s := redisstore.NewStore(rdb, keys).WithWitness(reg, 0)
	svc := newService(s, locallock.New(), atomic)
	if err := s.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdoptWitness(t.Context(), ""); !errors.Is(err, redisstore.ErrNotAdoptable) {
		t.Fatalf("adoption by nobody: %v; want ErrNotAdoptable", err)
	}
	// Redis behind the witness: a rewind, not a forgetting.
	if err := rdb.Set(t.Context(), "stock", 10, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdoptWitness(t.Context(), "ops"); !errors.Is(err, redisstore.ErrNotAdoptable) || !strings.Contains(err.Error(), "behind") {
		t.Fatalf("adoption of a rewound Redis: %v; want ErrNotAdoptable, redis behind", err)
	}
	if err := rdb.Set(t.Context(), "stock", 9, 0).Err(); err != nil {
		t.Fatal(err)
	}

	reg.Set(nil) // forgotten
	fresh := newService(redisstore.NewStore(rdb, keys).WithWitness(reg, 0), locallock.New(), atomic)
	if _, err := fresh.Reduce(t.Context()); !errors.Is(err, stock.ErrStoreRewound) {
		t.Fatalf("a new process on a forgotten witness: %v; want halted", err)
	}
	storetest.WantHalted(t, s, "witness_lost")
	a, err := s.AdoptWitness(t.Context(), "ops@example")
	if err != nil {
		t.Fatal(err)
	}
	if a.By != "ops@example" || a.Lucky != 1 || len(a.Stocks) != 1 || a.Stocks[0] != 9 || !strings.HasPrefix(a.Why, "witness_lost") {
		t.Fatalf("adoption %+v; want by ops@example, stock [9], lucky 1, the halt's reason", a)
	}
	if rec, _ := reg.Get(t.Context()); !strings.Contains(string(rec), "ops@example") {
		t.Fatalf("the witness holds %s; want the adoption recorded", rec)
	}
	storetest.WantHalted(t, s, "")
	for _, p := range []*stock.Service{svc, fresh} {
		if _, err := p.Reduce(t.Context()); err != nil {
			t.Fatalf("sale after the adoption: %v", err)
		}
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 7, Lucky: 3})
	// The adopted record holds the sale's ceilings again: a rewind is
	// caught by a new process.
	if err := rdb.Set(t.Context(), "stock", 9, 0).Err(); err != nil {
		t.Fatal(err)
	}
	newest := newService(redisstore.NewStore(rdb, keys).WithWitness(reg, 0), locallock.New(), atomic)
	if _, err := newest.Reduce(t.Context()); !errors.Is(err, stock.ErrStoreRewound) {
		t.Fatalf("a new process on a Redis rewound after the adoption: %v; want halted", err)
	}
	// That halt is a rewind's: adoption refuses it.
	if _, err := s.AdoptWitness(t.Context(), "ops"); !errors.Is(err, redisstore.ErrNotAdoptable) {
		t.Fatalf("adoption over a rewind's halt: %v; want ErrNotAdoptable", err)
	}
}

// A witness restored from a backup taken before the sale's reset, while
// the replicas run: the running process's next write finds a record
// whose generation went back (its cache's bytes no longer match, and the
// record it reads is older than one it saw) and halts; before, a flush
// that found its epoch missing wrote nothing and answered sold. The same
// restore with a record of the right epoch but an older generation is
// caught too.
func TestWitnessRestoredFromABackupHalts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		backup func(t *testing.T, s *redisstore.Store, reg *storetest.MemRegister) []byte
	}{
		{"before the reset", func(t *testing.T, s *redisstore.Store, reg *storetest.MemRegister) []byte {
			if err := s.Reset(t.Context(), 5); err != nil { // an older sale
				t.Fatal(err)
			}
			return reg.Value()
		}},
		{"of the same sale, older", func(t *testing.T, s *redisstore.Store, reg *storetest.MemRegister) []byte { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := servertest.Redis(t)
			reg := &storetest.MemRegister{}
			keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			s := redisstore.NewStore(rdb, keys).WithWitness(reg, 0)
			svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic })
			backup := tc.backup(t, s, reg)
			if err := s.Reset(t.Context(), 10); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Reduce(t.Context()); err != nil {
				t.Fatal(err)
			}
			if backup == nil {
				backup = reg.Value() // the sale's record, one sale in
			}
			for range 2 {
				if _, err := svc.Reduce(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			reg.Set(backup)
			if _, err := svc.Reduce(t.Context()); !errors.Is(err, stock.ErrWitnessLost) {
				t.Fatalf("sale after the witness was restored: %v; want witness lost", err)
			}
			storetest.WantHalted(t, s, "witness_lost")
			if got := reg.Set(backup); !bytes.Equal(got, backup) {
				t.Fatalf("the witness went on to hold %s; want the restored record untouched", got)
			}
			if err := s.PingWitness(t.Context()); !errors.Is(err, stock.ErrWitnessLost) {
				t.Fatalf("PingWitness (readyz) after the restore: %v; want witness lost", err)
			}
		})
	}
}

// A read of the record that is out while this process's own write lands
// returns the record before that write: older than the generation the
// process now knows, but not a witness that went back. The first cut of
// the generation check compared with the generation known when the read
// returned, and halted compose's sale (witness_lost) under load.
func TestWitnessReadRacingItsOwnWrite(t *testing.T) {
	srv := servertest.Redis(t)
	reg := &storetest.MemRegister{}
	keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.NewStore(rdb, keys).WithWitness(reg, 0)
	svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic })
	if err := s.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatal(err)
	}
	var saleErr error
	sell := func() { _, saleErr = svc.Reduce(t.Context()) } // writes a newer generation
	reg.AfterGet.Store(&sell)
	if err := s.PingWitness(t.Context()); err != nil {
		t.Fatalf("a read out while this process wrote: %v; want no error", err)
	}
	if saleErr != nil {
		t.Fatalf("the sale written while the read was out: %v", saleErr)
	}
	for range 3 {
		if _, err := svc.Reduce(t.Context()); err != nil {
			t.Fatalf("sale after: %v", err)
		}
	}
	storetest.WantHalted(t, s, "")
	storetest.WantStatus(t, s, stock.Status{Stock: 5, Lucky: 5})
}

// An operator's adoption that lands while a replica's flush is judging
// the record before it: the flush read the forgotten witness, the
// adoption wrote the sale back (and found no halt to lift), then the
// flush halted the sale witness_lost. That halt judged a record no longer
// there and must not stand: the fault lab's witness-restore cell met it
// under load, the sale halted again after the adoption. The flush's sale
// stays unconfirmed (its receipt says sold); the next sells.
func TestAdoptionDuringAFlushIsNotUndone(t *testing.T) {
	srv := servertest.Redis(t)
	reg := &storetest.MemRegister{}
	keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	client := func() *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	atomic := func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }
	s := redisstore.NewStore(client(), keys).WithWitness(reg, 0)
	svc := newService(s, locallock.New(), atomic)
	if err := s.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatal(err)
	}
	operator := redisstore.NewStore(client(), keys).WithWitness(reg, 0)
	reg.Set(nil) // forgotten
	adopted := make(chan error, 1)
	adopt := func() {
		_, err := operator.AdoptWitness(t.Context(), "ops")
		adopted <- err
	}
	reg.AfterGet.Store(&adopt) // runs while the flush's read of the empty record is out
	if _, err := svc.Reduce(t.Context()); !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("the sale whose flush met the forgotten witness: %v; want unconfirmed", err)
	}
	if err := <-adopted; err != nil {
		t.Fatalf("the adoption: %v", err)
	}
	storetest.WantHalted(t, s, "")
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatalf("a sale after the adoption: %v", err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 7, Lucky: 3})
}
