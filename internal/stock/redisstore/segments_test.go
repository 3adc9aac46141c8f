package redisstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/locallock"
	"seckill/internal/lock/redislock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

func segmentedStore(rdb *redis.Client, segments int) *redisstore.Store {
	return redisstore.NewStore(rdb, redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Initial: "stock:initial", Segments: segments})
}

func TestSegmentShares(t *testing.T) {
	for _, tc := range []struct {
		n        int64
		segments int
		want     []int64
	}{
		{10, 3, []int64{4, 3, 3}},
		{300, 8, []int64{38, 38, 38, 38, 37, 37, 37, 37}},
		{2, 4, []int64{1, 1, 0, 0}},
		{7, 1, []int64{7}},
		{0, 2, []int64{0, 0}},
	} {
		if got := stock.SegmentShares(tc.n, tc.segments); !slices.Equal(got, tc.want) {
			t.Errorf("SegmentShares(%d, %d) = %v, want %v", tc.n, tc.segments, got, tc.want)
		}
	}
}

// Reset splits the stock over the segments' keys and clears every fence;
// Status sums them. One segment is today's store: its keys and nothing else.
func TestSegmentedResetAndStatus(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()

	one := segmentedStore(rdb, 1)
	if err := one.Reset(ctx, 5); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	// The epoch and the format: one per sale, shared by the segments
	// (rewind.go, formats.go).
	if want := []string{"lucky", "stock", "stock:epoch", "stock:format", "stock:initial"}; !slices.Equal(keys, want) {
		t.Fatalf("one segment: got keys %v, want %v", keys, want)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	s := segmentedStore(rdb, 3)
	for _, f := range []string{"stock:fence", "stock:fence:1", "stock:fence:2"} {
		if err := rdb.HSet(ctx, f, "lock", "x").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Reset(ctx, 10); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"stock": "4", "stock:1": "3", "stock:2": "3", "lucky": "0", "stock:initial": "10"} {
		if got, err := rdb.Get(ctx, key).Result(); err != nil || got != want {
			t.Errorf("%s: got %q (%v), want %q", key, got, err, want)
		}
	}
	if n, err := rdb.Exists(ctx, "stock:fence", "stock:fence:1", "stock:fence:2").Result(); err != nil || n != 0 {
		t.Fatalf("got %d fences after reset (%v), want 0", n, err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 10})
	if got, err := s.SegmentStocks(ctx); err != nil || !slices.Equal(got, []int64{4, 3, 3}) {
		t.Fatalf("segment stocks: got %v (%v), want [4 3 3]", got, err)
	}
}

// keyLocker records the lock keys it is asked for.
type keyLocker struct {
	lock.Locker
	mu       sync.Mutex
	keys     map[string]int
	acquires atomic.Int64
}

func (k *keyLocker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	k.acquires.Add(1)
	k.mu.Lock()
	k.keys[key]++
	k.mu.Unlock()
	return k.Locker.Acquire(ctx, key)
}

func recordKeys(lk lock.Locker) *keyLocker { return &keyLocker{Locker: lk, keys: map[string]int{}} }

// Each segment has its own lock key and its own fence identity; with one
// segment both are today's.
func TestSegmentLockKeysAndFences(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	for _, tc := range []struct {
		segments int
		locks    []string
	}{
		{1, []string{"seckill:lock"}},
		{3, []string{"seckill:lock", "seckill:lock:1", "seckill:lock:2"}},
	} {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		s := segmentedStore(rdb, tc.segments)
		if err := s.Reset(ctx, int64(tc.segments)); err != nil {
			t.Fatal(err)
		}
		lk := recordKeys(locallock.New())
		svc := newService(s, lk, func(c *stock.ServiceConfig) { c.Fencing = true })
		for range tc.segments {
			if _, err := svc.Reduce(ctx); err != nil {
				t.Fatalf("%d segments: %v", tc.segments, err)
			}
		}
		var got []string
		for k := range lk.keys {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.locks) {
			t.Fatalf("%d segments: got lock keys %v, want %v", tc.segments, got, tc.locks)
		}
		for i, key := range tc.locks {
			fence := "stock:fence"
			if i > 0 {
				fence += key[len("seckill:lock"):]
			}
			if got, err := rdb.HGet(ctx, fence, "lock").Result(); err != nil || got != "test/"+key {
				t.Fatalf("%s: got lock identity %q (%v), want %q", fence, got, err, "test/"+key)
			}
		}
	}
}

// A request whose segment is empty moves on. Once every segment is known
// empty, sold out costs one read and no lock; a reset refills the segments
// and the stale marks do not turn a buyer away.
func TestSegmentedSoldOutAndReset(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	s := segmentedStore(rdb, 4)
	if err := s.Reset(ctx, 4); err != nil {
		t.Fatal(err)
	}
	lk := recordKeys(locallock.New())
	svc := newService(s, lk, func(c *stock.ServiceConfig) { c.Fencing = true })
	for i := range 4 {
		if _, err := svc.Reduce(ctx); err != nil {
			t.Fatalf("sale %d: %v", i, err)
		}
	}
	// Every segment is now empty; this buyer learns it under each lock it
	// has not seen empty yet, at most all four.
	if _, err := svc.Reduce(ctx); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("fifth buyer: got %v, want ErrSoldOut", err)
	}
	before := lk.acquires.Load()
	if _, err := svc.Reduce(ctx); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("sixth buyer: got %v, want ErrSoldOut", err)
	}
	if got := lk.acquires.Load() - before; got != 0 {
		t.Fatalf("sold out with every segment known empty took %d locks, want 0", got)
	}
	if err := s.Reset(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reduce(ctx); err != nil {
		t.Fatalf("after a reset: got %v, want a sale", err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 0, Lucky: 1})
}

// No false sold-out, no oversell, across replicas (several Services on one
// Redis, each with its own client and lock): with as many buyers as units,
// every buyer must be sold — a single sold_out is a buyer turned away while
// stock remained — however the units lie over the segments. Then with more
// buyers than units, exactly the units are sold. Throughout, stock + lucky
// is the initial stock and no segment goes negative.
func TestSegmentedNoFalseSoldOut(t *testing.T) {
	const segments, units = 8, 48
	type mode struct {
		name     string
		replicas int
		cfg      func(*stock.ServiceConfig)
		locker   func(t *testing.T, rdb *redis.Client) lock.Locker
	}
	redisLock := func(t *testing.T, rdb *redis.Client) lock.Locker {
		lk := redislock.New(rdb, redislock.Options{TTL: 5 * time.Second})
		t.Cleanup(func() { _ = lk.Close() })
		return lk
	}
	modes := []mode{
		{"redis lock", 3, func(c *stock.ServiceConfig) { c.Backend, c.Fencing = "redis", true }, redisLock},
		{"redis lock, combining", 3, func(c *stock.ServiceConfig) { c.Backend, c.Fencing, c.Combine = "redis", true, true }, redisLock},
		{"atomic", 3, func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }, func(*testing.T, *redis.Client) lock.Locker { return nil }},
		{"local lock, unfenced, combining, one replica", 1, func(c *stock.ServiceConfig) { c.Combine = true },
			func(*testing.T, *redis.Client) lock.Locker { return locallock.New() }},
	}
	layouts := []struct {
		name string
		set  func(t *testing.T, rdb *redis.Client, n int64)
	}{
		{"even", func(*testing.T, *redis.Client, int64) {}},
		{"all in one segment", func(t *testing.T, rdb *redis.Client, n int64) {
			t.Helper()
			for i := range segments {
				key, v := "stock", int64(0)
				if i > 0 {
					key += ":" + string(rune('0'+i))
				}
				if i == segments-2 {
					v = n
				}
				if err := rdb.Set(t.Context(), key, v, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, m := range modes {
		for _, l := range layouts {
			t.Run(m.name+"/"+l.name, func(t *testing.T) {
				srv := servertest.Redis(t)
				var svcs []*stock.Service
				var admin *redisstore.Store
				var adminRDB *redis.Client
				for range m.replicas {
					rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
					t.Cleanup(func() { _ = rdb.Close() })
					s := segmentedStore(rdb, segments)
					admin, adminRDB = s, rdb
					svcs = append(svcs, newService(s, m.locker(t, rdb), func(c *stock.ServiceConfig) {
						c.WaitTimeout = 30 * time.Second
						m.cfg(c)
					}))
				}
				sale := func(n int64, buyers int) (sold, soldOut int) {
					t.Helper()
					if err := admin.Reset(t.Context(), n); err != nil {
						t.Fatal(err)
					}
					l.set(t, adminRDB, n)
					var okN, outN atomic.Int64
					var wg sync.WaitGroup
					for i := range buyers {
						wg.Go(func() {
							_, err := svcs[i%len(svcs)].Reduce(t.Context())
							switch {
							case err == nil:
								okN.Add(1)
							case errors.Is(err, stock.ErrSoldOut):
								outN.Add(1)
							default:
								t.Errorf("reduce: %v", err)
							}
						})
					}
					wg.Wait()
					segs, err := admin.SegmentStocks(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					var left int64
					for i, v := range segs {
						if v < 0 {
							t.Errorf("segment %d: stock %d, want >= 0", i, v)
						}
						left += v
					}
					storetest.WantStatus(t, admin, stock.Status{Stock: left, Lucky: n - left})
					return int(okN.Load()), int(outN.Load())
				}
				if sold, soldOut := sale(units, units); sold != units || soldOut != 0 {
					t.Fatalf("%d buyers for %d units: got sold %d, sold_out %d; want every buyer sold (a sold_out here is a false one)",
						units, units, sold, soldOut)
				}
				storetest.WantStatus(t, admin, stock.Status{Stock: 0, Lucky: units})
				const buyers = 2*units + 7
				if sold, soldOut := sale(units, buyers); sold != units || soldOut != buyers-units {
					t.Fatalf("%d buyers for %d units: got sold %d, sold_out %d; want %d, %d", buyers, units, sold, soldOut, units, buyers-units)
				}
				storetest.WantStatus(t, admin, stock.Status{Stock: 0, Lucky: units})
			})
		}
	}
}

// StatusBySegment reads the sum and each segment at one instant.
func TestStatusBySegment(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s := segmentedStore(rdb, 3)
	if err := s.Reset(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(t.Context(), "lucky", 2, 0).Err(); err != nil {
		t.Fatal(err)
	}
	st, segs, err := s.StatusBySegment(t.Context())
	if err != nil || st != (stock.Status{Stock: 7, Lucky: 2}) || !slices.Equal(segs, []int64{3, 2, 2}) {
		t.Fatalf("got %+v %v (%v), want {7 2} [3 2 2]", st, segs, err)
	}
}
