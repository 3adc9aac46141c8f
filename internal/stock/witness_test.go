package stock_test

import (
	"bytes"
	"context"
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
)

// memRegister is a Register in memory: the witness's merge rules are
// tested here; package witness tests the real registers (etcd, MySQL).
type memRegister struct {
	mu   sync.Mutex
	val  []byte // nil: nothing stored
	down bool
	// gate, when set, holds every Put until it is closed (or the Put's
	// context ends).
	gate    atomic.Pointer[chan struct{}]
	puts    atomic.Int64
	refused atomic.Int64
	// afterGet, when set, runs once a Get has read its value and before
	// it returns it: what another goroutine does while a read is out.
	afterGet atomic.Pointer[func()]
}

func (m *memRegister) Name() string { return "memory" }

func (m *memRegister) Get(ctx context.Context) ([]byte, error) {
	m.mu.Lock()
	if m.down {
		m.mu.Unlock()
		return nil, stock.ErrRegisterUnavailable
	}
	v := bytes.Clone(m.val)
	m.mu.Unlock()
	if f := m.afterGet.Swap(nil); f != nil {
		(*f)()
	}
	return v, nil
}

func (m *memRegister) Put(ctx context.Context, v, expect []byte) (bool, error) {
	if g := m.gate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
			return false, fmt.Errorf("%w: %w", stock.ErrRegisterUnavailable, ctx.Err())
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return false, stock.ErrRegisterUnavailable
	}
	m.puts.Add(1)
	if (expect == nil) != (m.val == nil) || !bytes.Equal(expect, m.val) {
		m.refused.Add(1)
		return false, nil
	}
	m.val = append([]byte{}, v...)
	return true, nil
}

// set stores v as a restore or a wipe would (nil: nothing stored), and
// returns what was there.
func (m *memRegister) set(v []byte) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.val
	m.val = bytes.Clone(v)
	return old
}

func (m *memRegister) setDown(down bool) {
	m.mu.Lock()
	m.down = down
	m.mu.Unlock()
}

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
			reg := &memRegister{}
			keys := stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
			if m.ledger {
				keys = ledgerKeys(1)
			}
			if m.name == "locked+combine+segments" {
				keys.Segments = 2
			}
			process := func() (*stock.Store, *stock.Service, *redis.Client) {
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
				t.Cleanup(func() { _ = rdb.Close() })
				s := stock.NewStore(rdb, keys).WithWitness(reg, 0)
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
			wantStatus(t, s, stock.Status{Stock: 97, Lucky: 3})

			// Every process is new: nothing remembers but the witness.
			_, fresh, _ := process()
			for i := range 4 {
				if sale, err := buy(fresh); !errors.Is(err, stock.ErrStoreRewound) || errors.Is(err, stock.ErrUnconfirmed) {
					t.Fatalf("sale %d of a new process on the rewound Redis: got %+v, %v; want ErrStoreRewound", i, sale, err)
				}
			}
			wantStatus(t, s, stock.Status{Stock: 97, Lucky: 3})
		})
	}
}

// allBelow reports whether every segment's stock is below its value in
// saved.
func allBelow(t *testing.T, s *stock.Store, saved []int64) bool {
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
	reg := &memRegister{}
	keys := stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	client := func() *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	s := stock.NewStore(client(), keys).WithWitness(reg, 0)
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
	if err := stock.NewStore(client(), keys).Reset(t.Context(), 50); err != nil {
		t.Fatal(err)
	}
	if sale, err := svc.Reduce(t.Context()); !errors.Is(err, stock.ErrStoreRewound) || errors.Is(err, stock.ErrUnconfirmed) {
		t.Fatalf("sale of the replica that sold before: got %+v, %v; want ErrStoreRewound", sale, err)
	}
	fresh := newService(stock.NewStore(client(), keys).WithWitness(reg, 0), locallock.New(), func(c *stock.ServiceConfig) { c.Fencing = true })
	if sale, err := fresh.Reduce(t.Context()); !errors.Is(err, stock.ErrStoreRewound) || errors.Is(err, stock.ErrUnconfirmed) {
		t.Fatalf("sale of a new replica: got %+v, %v; want ErrStoreRewound", sale, err)
	}
	wantStatus(t, s, stock.Status{Stock: 50, Lucky: 0})
	if why, err := s.Halted(t.Context()); err != nil || why == "" {
		t.Fatalf("Halted: %q, %v; want the reason", why, err)
	}
}

// A reset that reached the witness but not Redis leaves the previous sale
// in Redis, whose epoch the witness still keeps: no halt, sales go on.
// A Redis that lost its epoch key while the witness holds one is a lost
// sale, not an unchecked one.
func TestWitnessHalfResetAndLostEpoch(t *testing.T) {
	srv := servertest.Redis(t)
	reg := &memRegister{}
	keys := stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := stock.NewStore(rdb, keys).WithWitness(reg, 0)
	if err := s.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	// A reset that failed after the witness took its epoch.
	if err := s.WitnessBegin(t.Context(), "half-done"); err != nil {
		t.Fatal(err)
	}
	fresh := stock.NewStore(rdb, keys).WithWitness(reg, 0)
	if _, err := fresh.SellAtomic(t.Context(), stock.NewAttemptID()); err != nil {
		t.Fatalf("sale after a half reset: %v", err)
	}
	wantStatus(t, s, stock.Status{Stock: 9, Lucky: 1})

	if err := rdb.Del(t.Context(), "stock:epoch").Err(); err != nil {
		t.Fatal(err)
	}
	fresh = stock.NewStore(rdb, keys).WithWitness(reg, 0)
	if _, err := fresh.SellAtomic(t.Context(), stock.NewAttemptID()); !errors.Is(err, stock.ErrStoreLost) || errors.Is(err, stock.ErrStoreRewound) {
		t.Fatalf("sale with the epoch gone: %v; want ErrStoreLost", err)
	}
	wantStatus(t, s, stock.Status{Stock: 9, Lucky: 1})
}

// A witness that does not answer: the sale happened in Redis, so it is
// unconfirmed (never sold, never refused), and its receipt says it sold.
// Concurrent sales share the witness's writes.
func TestWitnessDownAndGroupCommit(t *testing.T) {
	srv := servertest.Redis(t)
	reg := &memRegister{}
	keys := stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := stock.NewStore(rdb, keys).WithWitness(reg, 200*time.Millisecond)
	svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) {
		c.Mode, c.ConfirmTimeout = stock.ModeAtomic, time.Second
	})
	if err := s.Reset(t.Context(), 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatal(err)
	}
	reg.setDown(true)
	_, err := svc.Reduce(t.Context())
	var ue *stock.UnconfirmedError
	if !errors.As(err, &ue) || !errors.Is(err, stock.ErrNotWitnessed) {
		t.Fatalf("sale with the witness down: %v; want unconfirmed, not witnessed", err)
	}
	if _, sold, err := s.Receipt(t.Context(), ue.Attempt); err != nil || !sold {
		t.Fatalf("receipt of the unwitnessed sale: sold %v, %v; want sold", sold, err)
	}
	reg.setDown(false)

	// Concurrent sales: one witness round is held at the gate until every
	// sale has taken its unit, so all of them wait for the witness at
	// once, whatever the machine's pace.
	gate := make(chan struct{})
	reg.gate.Store(&gate)
	s = stock.NewStore(rdb, keys).WithWitness(reg, 30*time.Second)
	svc = newService(s, locallock.New(), func(c *stock.ServiceConfig) {
		c.Mode, c.ConfirmTimeout = stock.ModeAtomic, 30*time.Second
	})
	puts := reg.puts.Load()
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
	got := reg.puts.Load() - puts
	t.Logf("%d sales, %d witness writes", buyers, got)
	if got == 0 || got > buyers/2 {
		t.Fatalf("%d witness writes for %d concurrent sales; want between 1 and %d (shared rounds)", got, buyers, buyers/2)
	}
	wantStatus(t, s, stock.Status{Stock: 1000 - 2 - buyers, Lucky: 2 + buyers})
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
	reg := &memRegister{}
	keys := stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	atomic := func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }
	s := stock.NewStore(rdb, keys).WithWitness(reg, 0)
	svc := newService(s, locallock.New(), atomic)
	if err := s.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatal(err)
	}
	reg.set(nil) // forgotten
	_, err := svc.Reduce(t.Context())
	var ue *stock.UnconfirmedError
	if !errors.As(err, &ue) || !errors.Is(err, stock.ErrWitnessLost) {
		t.Fatalf("sale of the running process after the witness forgot: %v; want unconfirmed, witness lost", err)
	}
	if _, sold, err := s.Receipt(t.Context(), ue.Attempt); err != nil || !sold {
		t.Fatalf("receipt of the unconfirmed sale: sold %v, %v; want sold", sold, err)
	}
	wantHalted(t, s, "witness_lost")
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
	fresh := newService(stock.NewStore(rdb, keys).WithWitness(reg, 0), locallock.New(), atomic)
	if sale, err := fresh.Reduce(t.Context()); !errors.Is(err, stock.ErrStoreRewound) || errors.Is(err, stock.ErrUnconfirmed) {
		t.Fatalf("a new process on a forgotten witness: got %+v, %v; want halted", sale, err)
	}
	wantHalted(t, s, "witness_lost")
	wantStatus(t, s, stock.Status{Stock: 8, Lucky: 2})
}

// The operator's way back from a witness_lost halt keeps the sale:
// AdoptWitness records Redis's sale, who decided and the books, lifts the
// halt, and the sale goes on for the running process and a new one; a
// rewind after it is caught again. It refuses where Redis is the one
// behind, and where the halt is not the witness's.
func TestAdoptWitness(t *testing.T) {
	srv := servertest.Redis(t)
	reg := &memRegister{}
	keys := stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	atomic := func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }
	s := stock.NewStore(rdb, keys).WithWitness(reg, 0)
	svc := newService(s, locallock.New(), atomic)
	if err := s.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdoptWitness(t.Context(), ""); !errors.Is(err, stock.ErrNotAdoptable) {
		t.Fatalf("adoption by nobody: %v; want ErrNotAdoptable", err)
	}
	// Redis behind the witness: a rewind, not a forgetting.
	if err := rdb.Set(t.Context(), "stock", 10, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdoptWitness(t.Context(), "ops"); !errors.Is(err, stock.ErrNotAdoptable) || !strings.Contains(err.Error(), "behind") {
		t.Fatalf("adoption of a rewound Redis: %v; want ErrNotAdoptable, redis behind", err)
	}
	if err := rdb.Set(t.Context(), "stock", 9, 0).Err(); err != nil {
		t.Fatal(err)
	}

	reg.set(nil) // forgotten
	fresh := newService(stock.NewStore(rdb, keys).WithWitness(reg, 0), locallock.New(), atomic)
	if _, err := fresh.Reduce(t.Context()); !errors.Is(err, stock.ErrStoreRewound) {
		t.Fatalf("a new process on a forgotten witness: %v; want halted", err)
	}
	wantHalted(t, s, "witness_lost")
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
	wantHalted(t, s, "")
	for _, p := range []*stock.Service{svc, fresh} {
		if _, err := p.Reduce(t.Context()); err != nil {
			t.Fatalf("sale after the adoption: %v", err)
		}
	}
	wantStatus(t, s, stock.Status{Stock: 7, Lucky: 3})
	// The adopted record holds the sale's ceilings again: a rewind is
	// caught by a new process.
	if err := rdb.Set(t.Context(), "stock", 9, 0).Err(); err != nil {
		t.Fatal(err)
	}
	newest := newService(stock.NewStore(rdb, keys).WithWitness(reg, 0), locallock.New(), atomic)
	if _, err := newest.Reduce(t.Context()); !errors.Is(err, stock.ErrStoreRewound) {
		t.Fatalf("a new process on a Redis rewound after the adoption: %v; want halted", err)
	}
	// That halt is a rewind's: adoption refuses it.
	if _, err := s.AdoptWitness(t.Context(), "ops"); !errors.Is(err, stock.ErrNotAdoptable) {
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
		backup func(t *testing.T, s *stock.Store, reg *memRegister) []byte
	}{
		{"before the reset", func(t *testing.T, s *stock.Store, reg *memRegister) []byte {
			if err := s.Reset(t.Context(), 5); err != nil { // an older sale
				t.Fatal(err)
			}
			return reg.set(reg.val)
		}},
		{"of the same sale, older", func(t *testing.T, s *stock.Store, reg *memRegister) []byte { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := servertest.Redis(t)
			reg := &memRegister{}
			keys := stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			s := stock.NewStore(rdb, keys).WithWitness(reg, 0)
			svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic })
			backup := tc.backup(t, s, reg)
			if err := s.Reset(t.Context(), 10); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Reduce(t.Context()); err != nil {
				t.Fatal(err)
			}
			if backup == nil {
				backup = bytes.Clone(reg.val) // the sale's record, one sale in
			}
			for range 2 {
				if _, err := svc.Reduce(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			reg.set(backup)
			if _, err := svc.Reduce(t.Context()); !errors.Is(err, stock.ErrWitnessLost) {
				t.Fatalf("sale after the witness was restored: %v; want witness lost", err)
			}
			wantHalted(t, s, "witness_lost")
			if got := reg.set(backup); !bytes.Equal(got, backup) {
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
	reg := &memRegister{}
	keys := stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := stock.NewStore(rdb, keys).WithWitness(reg, 0)
	svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic })
	if err := s.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatal(err)
	}
	var saleErr error
	sell := func() { _, saleErr = svc.Reduce(t.Context()) } // writes a newer generation
	reg.afterGet.Store(&sell)
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
	wantHalted(t, s, "")
	wantStatus(t, s, stock.Status{Stock: 5, Lucky: 5})
}

// A record of a newer format (a newer replica wrote it) is refused, and
// nothing is written back over it: a reader that dropped the fields it
// does not know would write the record back without them.
func TestWitnessRefusesANewerFormat(t *testing.T) {
	srv := servertest.Redis(t)
	reg := &memRegister{}
	keys := stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := stock.NewStore(rdb, keys).WithWitness(reg, 0)
	if err := s.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	newer := []byte(`{"format":2,"gen":99,"sales":[],"fields_v2":{"x":1}}`)
	reg.set(newer)
	fresh := stock.NewStore(rdb, keys).WithWitness(reg, 0)
	if _, err := fresh.SellAtomic(t.Context(), stock.NewAttemptID()); !errors.Is(err, stock.ErrWitnessFormat) || !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("sale on a newer record: %v; want ErrWitnessFormat (unavailable)", err)
	}
	if err := s.WitnessBegin(t.Context(), "reset-by-an-older-replica"); !errors.Is(err, stock.ErrWitnessFormat) {
		t.Fatalf("a reset's write over a newer record: %v; want ErrWitnessFormat", err)
	}
	if got := reg.set(newer); !bytes.Equal(got, newer) {
		t.Fatalf("the newer record became %s; want it untouched", got)
	}
	wantHalted(t, s, "")
}

// wantHalted checks the sale's halt reason starts with prefix ("": not
// halted).
func wantHalted(t *testing.T, s *stock.Store, prefix string) {
	t.Helper()
	why, err := s.Halted(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if prefix == "" && why != "" || !strings.HasPrefix(why, prefix) {
		t.Fatalf("halt reason %q, want prefix %q", why, prefix)
	}
}

// stockd builds its store as acks, then witness (none by default): every
// segment must keep the acks. WithWitness(nil) used to give them to
// segment 0 alone, so the other segments' sales were answered without
// waiting for the replica.
func TestWitnessKeepsEverySegmentsAcks(t *testing.T) {
	keys := stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Segments: 3}
	acks := stock.ReplicaAcks{Replicas: 1}
	for _, reg := range []stock.Register{nil, &memRegister{}} {
		s := stock.NewStore(nil, keys).WithReplicaAcks(acks).WithWitness(reg, 0)
		for i := range 3 {
			if got := s.SegmentAcks(i); got != acks {
				t.Fatalf("witness %v: segment %d acks %+v, want %+v", reg != nil, i, got, acks)
			}
		}
	}
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
	reg := &memRegister{}
	keys := stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	client := func() *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	atomic := func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }
	s := stock.NewStore(client(), keys).WithWitness(reg, 0)
	svc := newService(s, locallock.New(), atomic)
	if err := s.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatal(err)
	}
	operator := stock.NewStore(client(), keys).WithWitness(reg, 0)
	reg.set(nil) // forgotten
	adopted := make(chan error, 1)
	adopt := func() {
		_, err := operator.AdoptWitness(t.Context(), "ops")
		adopted <- err
	}
	reg.afterGet.Store(&adopt) // runs while the flush's read of the empty record is out
	if _, err := svc.Reduce(t.Context()); !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("the sale whose flush met the forgotten witness: %v; want unconfirmed", err)
	}
	if err := <-adopted; err != nil {
		t.Fatalf("the adoption: %v", err)
	}
	wantHalted(t, s, "")
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatalf("a sale after the adoption: %v", err)
	}
	wantStatus(t, s, stock.Status{Stock: 7, Lucky: 3})
}
