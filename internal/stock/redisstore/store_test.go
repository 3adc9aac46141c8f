package redisstore_test

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// newStore returns a Store on a fresh real redis-server, reset to n.
func newStore(t *testing.T, n int64) (*redisstore.Store, *redis.Client) {
	t.Helper()
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.NewStore(rdb, redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"})
	if err := s.Reset(t.Context(), n); err != nil {
		t.Fatalf("reset: %v", err)
	}
	return s, rdb
}

func TestFencedInterleavings(t *testing.T) {
	s, _ := newStore(t, 10)
	ctx := t.Context()
	a := stock.Fence{Lock: "redis", Token: 1, Lease: "a"}
	b := stock.Fence{Lock: "redis", Token: 2, Lease: "b"}

	// Steps run in order on one store; each step is one holder's call.
	type step struct {
		name  string
		do    func() error
		want  error
		after stock.Status
	}
	// Lease ids are unique per attempt in real use; each case gets its own,
	// or an earlier case's receipt would answer for this case's write.
	round := 0
	inRound := func(f stock.Fence) stock.Fence {
		f.Lease = fmt.Sprintf("%s#%d", f.Lease, round)
		return f
	}
	read := func(f stock.Fence) func() error {
		return func() error { _, err := s.Read(ctx, inRound(f)); return err }
	}
	write := func(f stock.Fence, n int64) func() error {
		return func() error { return s.Write(ctx, inRound(f), n) }
	}
	reset := func(n int64) func() error { return func() error { return s.Reset(ctx, n) } }

	cases := []struct {
		name  string
		steps []step
	}{
		{"A reads, B reads, A writes: A fenced, B still writes", []step{
			{"A read", read(a), nil, stock.Status{Stock: 10}},
			{"B read", read(b), nil, stock.Status{Stock: 10}},
			{"A write", write(a, 9), stock.ErrFenced, stock.Status{Stock: 10}},
			{"B write", write(b, 9), nil, stock.Status{Stock: 9, Lucky: 1}},
		}},
		{"late A after B's whole sale", []step{
			{"A read", read(a), nil, stock.Status{Stock: 10}},
			{"B read", read(b), nil, stock.Status{Stock: 10}},
			{"B write", write(b, 9), nil, stock.Status{Stock: 9, Lucky: 1}},
			{"A write", write(a, 9), stock.ErrFenced, stock.Status{Stock: 9, Lucky: 1}},
		}},
		{"lower token reads after a higher one", []step{
			{"B read", read(b), nil, stock.Status{Stock: 10}},
			{"A read", read(a), stock.ErrFenced, stock.Status{Stock: 10}},
		}},
		{"a write without a read is fenced", []step{
			{"A write", write(a, 9), stock.ErrFenced, stock.Status{Stock: 10}},
		}},
		{"same token reads twice, then writes", []step{
			{"A read", read(a), nil, stock.Status{Stock: 10}},
			{"A read again", read(a), nil, stock.Status{Stock: 10}},
			{"A write", write(a, 9), nil, stock.Status{Stock: 9, Lucky: 1}},
		}},
		{"reset between read and write fences the write", []step{
			{"A read", read(a), nil, stock.Status{Stock: 10}},
			{"reset", reset(10), nil, stock.Status{Stock: 10}},
			{"A write", write(a, 9), stock.ErrFenced, stock.Status{Stock: 10}},
		}},
		{"reset clears the fence: a low token reads again", []step{
			{"B read", read(b), nil, stock.Status{Stock: 10}},
			{"reset", reset(10), nil, stock.Status{Stock: 10}},
			{"A read", read(a), nil, stock.Status{Stock: 10}},
			{"A write", write(a, 9), nil, stock.Status{Stock: 9, Lucky: 1}},
		}},
		{"mixed backends on read and write", []step{
			{"A read (redis)", read(a), nil, stock.Status{Stock: 10}},
			{"etcd read", read(stock.Fence{Lock: "etcd", Token: 100}), stock.ErrMixedBackends, stock.Status{Stock: 10}},
			{"etcd write", write(stock.Fence{Lock: "etcd", Token: 1}, 9), stock.ErrMixedBackends, stock.Status{Stock: 10}},
			{"A write (redis)", write(a, 9), nil, stock.Status{Stock: 9, Lucky: 1}},
		}},
		{"reset clears the backend too", []step{
			{"A read (redis)", read(a), nil, stock.Status{Stock: 10}},
			{"reset", reset(10), nil, stock.Status{Stock: 10}},
			{"etcd read", read(stock.Fence{Lock: "etcd", Token: 1}), nil, stock.Status{Stock: 10}},
		}},
	}
	for _, tc := range cases {
		round++
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Reset(ctx, 10); err != nil {
				t.Fatal(err)
			}
			for _, st := range tc.steps {
				err := st.do()
				if !errors.Is(err, st.want) || (st.want == nil && err != nil) {
					t.Fatalf("%s: got error %v, want %v", st.name, err, st.want)
				}
				storetest.WantStatus(t, s, st.after)
			}
		})
	}
}

// Tokens are uint64; the scripts must compare them exactly even above 2^53,
// where Lua's doubles would round neighbours to the same value.
func TestFenceComparesLargeTokensExactly(t *testing.T) {
	s, _ := newStore(t, 5)
	ctx := t.Context()
	hi := stock.Fence{Lock: "zookeeper", Token: 1<<63 + 1}
	lo := stock.Fence{Lock: "zookeeper", Token: 1 << 63}
	if _, err := s.Read(ctx, hi); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(ctx, lo); !errors.Is(err, stock.ErrFenced) {
		t.Fatalf("read with token 2^63 after 2^63+1: got %v, want ErrFenced", err)
	}
	if err := s.Write(ctx, lo, 4); !errors.Is(err, stock.ErrFenced) {
		t.Fatalf("write with token 2^63 after 2^63+1: got %v, want ErrFenced", err)
	}
	// 99 < 100 as numbers but "99" > "100" as strings.
	if err := s.Reset(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(ctx, stock.Fence{Lock: "zookeeper", Token: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(ctx, stock.Fence{Lock: "zookeeper", Token: 99}); !errors.Is(err, stock.ErrFenced) {
		t.Fatalf("read with token 99 after 100: got %v, want ErrFenced", err)
	}
}

func TestResetAndStatus(t *testing.T) {
	s, rdb := newStore(t, 7)
	ctx := t.Context()
	if err := s.WriteUnfenced(ctx, 6); err != nil {
		t.Fatal(err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 6, Lucky: 1})
	if _, err := s.Read(ctx, stock.Fence{Lock: "redis", Token: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(ctx, 300); err != nil {
		t.Fatal(err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 300, Lucky: 0})
	if n, err := rdb.Exists(ctx, "stock:fence").Result(); err != nil || n != 0 {
		t.Fatalf("fence key exists after reset: got %d (err %v), want 0", n, err)
	}
	// Missing keys are a sale lost (or never reset), not sold out: the
	// status says so, as a sale does.
	if err := rdb.Del(ctx, "stock", "lucky").Err(); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Status(ctx); !errors.Is(err, stock.ErrStoreLost) {
		t.Fatalf("status on a missing key: %+v, %v; want ErrStoreLost", st, err)
	}
	if _, err := s.SellAtomic(ctx, stock.NewAttemptID()); !errors.Is(err, stock.ErrStoreLost) {
		t.Fatalf("atomic sale on a missing key: got %v, want ErrStoreLost", err)
	}
}

func TestSellAtomicNeverOversells(t *testing.T) {
	const units, buyers, attempts = 100, 50, 4
	s, _ := newStore(t, units)
	var (
		wg            sync.WaitGroup
		mu            sync.Mutex
		sold, soldOut int
		seen          = map[int64]bool{}
	)
	for range buyers {
		wg.Go(func() {
			for range attempts {
				after, err := s.SellAtomic(t.Context(), stock.NewAttemptID())
				mu.Lock()
				switch {
				case err == nil:
					sold++
					if seen[after] || after < 0 {
						t.Errorf("stock after %d reported twice or negative", after)
					}
					seen[after] = true
				case errors.Is(err, stock.ErrSoldOut):
					soldOut++
				default:
					t.Errorf("sell: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if sold != units || soldOut != buyers*attempts-units {
		t.Fatalf("got sold %d sold_out %d, want %d %d", sold, soldOut, units, buyers*attempts-units)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 0, Lucky: units})
}

func TestUnavailable(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.NewStore(rdb, redisstore.Keys{Stock: "s", Lucky: "l", Fence: "f"})
	if err := srv.Stop(5e9); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	checks := map[string]error{
		"ping":   s.Ping(ctx),
		"reset":  s.Reset(ctx, 1),
		"atomic": func() error { _, err := s.SellAtomic(ctx, stock.NewAttemptID()); return err }(),
		"read":   func() error { _, err := s.Read(ctx, stock.Fence{Lock: "redis", Token: 1}); return err }(),
		"write":  s.Write(ctx, stock.Fence{Lock: "redis", Token: 1}, 0),
		"status": func() error { _, err := s.Status(ctx); return err }(),
	}
	for op, err := range checks {
		if !errors.Is(err, stock.ErrUnavailable) {
			t.Errorf("%s with redis down: got %v, want ErrUnavailable", op, err)
		}
	}
}

// Reset refuses a stock the scripts could not hold exactly, and writes
// nothing.
func TestResetRange(t *testing.T) {
	s, _ := newStore(t, 7)
	for _, n := range []int64{-1, redisstore.MaxStock + 1, math.MaxInt64} {
		if err := s.Reset(t.Context(), n); !errors.Is(err, stock.ErrStockRange) {
			t.Fatalf("Reset(%d): got %v, want ErrStockRange", n, err)
		}
	}
	if st, err := s.Status(t.Context()); err != nil || st.Stock != 7 {
		t.Fatalf("after refused resets: got %+v, %v; want stock 7", st, err)
	}
}
