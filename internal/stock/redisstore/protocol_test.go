package redisstore_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"seckill/internal/stock"
)

// TestFenceProtocolRandomized drives the fence with many simulated holders
// against a real Redis: tokens drawn fresh, equal to another holder's (a lock
// that forgot), stale, or from another lock; calls interleaved at random;
// replies duplicated (a retry after a lost reply) or lost (the holder never
// learns, and its receipt settles it). After every round the books must
// balance, the stock stay non-negative, every unit sold be accounted to
// exactly one lease, and no token carry two accepted writes.
//
// A third of the holders write a combined batch (Store.WriteBatch) of up to
// four units; its members' receipts must say which of them sold.
//
// Seeded and reproducible: SECKILL_PROTOCOL_SEED=<n> replays a failure.
//
// The second variant lets the fence restart (Fence.Quiet of 1ms, so nearly
// every refused read finds it quiet): tokens then decide nothing, and the
// books must balance on the lease compare-and-set alone.
func TestFenceProtocolRandomized(t *testing.T) {
	t.Run("strict", func(t *testing.T) { fenceProtocol(t, 0) })
	t.Run("restarting", func(t *testing.T) { fenceProtocol(t, time.Millisecond) })
}

func fenceProtocol(t *testing.T, quiet time.Duration) {
	seed := uint64(rand.Int64())
	if v := os.Getenv("SECKILL_PROTOCOL_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SECKILL_PROTOCOL_SEED: %v", err)
		}
	}
	rounds := 4000
	if testing.Short() {
		rounds = 200
	}
	const initial = 1 << 40
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s, _ := newStore(t, initial)
	ctx := t.Context()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (replay with SECKILL_PROTOCOL_SEED=%d): %s", seed, seed, fmt.Sprintf(format, args...))
	}

	type holder struct {
		f     stock.Fence
		read  bool  // its read was accepted
		cur   int64 // what it read
		steps int   // calls left: read, then one or more writes
		sold  bool  // a write of its answered "written"
		lost  bool  // a write of its ran but the answer was dropped
		units int   // units its write sells: 1, or a combined batch's
	}
	var (
		counter  uint64 = 1
		lease    int
		soldBy   = map[string]int{}    // leases told "sold", or settled so by receipt: units
		units    int64                 // their sum
		tokenWon = map[string]string{} // lock/token -> the lease whose write was accepted
	)
	for round := range rounds {
		hs := make([]*holder, 2+rng.IntN(3))
		for i := range hs {
			lease++
			f := stock.Fence{Lock: "redis/k", Lease: "L" + strconv.Itoa(lease), Quiet: quiet}
			switch p := rng.IntN(10); {
			case p < 5 || i == 0: // a fresh token
				counter += uint64(1 + rng.IntN(3))
				f.Token = counter
			case p < 7: // the same token as another holder of this round
				f.Token = hs[rng.IntN(i)].f.Token
			case p < 9: // stale: below what the lock has handed out
				f.Token = counter - uint64(rng.IntN(int(min(counter, 5))))
			default: // another lock's token space
				f.Lock, f.Token = "etcd/k", counter+uint64(rng.IntN(3))
			}
			hs[i] = &holder{f: f, steps: 2 + rng.IntN(2), units: 1}
			if rng.IntN(3) == 0 {
				hs[i].units = 2 + rng.IntN(3)
			}
		}
		for {
			var live []*holder
			for _, h := range hs {
				if h.steps > 0 {
					live = append(live, h)
				}
			}
			if len(live) == 0 {
				break
			}
			h := live[rng.IntN(len(live))]
			h.steps--
			if !h.read {
				cur, err := s.Read(ctx, h.f)
				if err != nil {
					if !errors.Is(err, stock.ErrFenced) && !errors.Is(err, stock.ErrMixedBackends) {
						fail("round %d: read: %v", round, err)
					}
					h.steps = 0 // refused: a real holder gives up
					continue
				}
				h.read, h.cur = true, cur.Stock
				continue
			}
			if h.cur <= 0 {
				h.steps = 0
				continue
			}
			var err error
			if h.units == 1 {
				err = s.Write(ctx, h.f, h.cur-1)
			} else {
				err = s.WriteBatch(ctx, h.f, h.cur-int64(h.units), h.units)
			}
			switch {
			case err == nil && rng.IntN(4) == 0:
				h.lost = true // it ran; the answer never arrived
			case err == nil:
				h.sold = true
			case errors.Is(err, stock.ErrFenced), errors.Is(err, stock.ErrMixedBackends):
				if h.sold {
					fail("round %d: lease %s was told sold, and a retry was refused", round, h.f.Lease)
				}
			default:
				fail("round %d: write: %v", round, err)
			}
		}
		for _, h := range hs {
			if h.lost && !h.sold {
				_, ok, err := s.Receipt(ctx, h.f.Lease)
				if err != nil || !ok {
					fail("round %d: lease %s's write ran but its receipt says (%v, %v)", round, h.f.Lease, ok, err)
				}
				h.sold = true
			}
			if !h.sold {
				continue
			}
			soldBy[h.f.Lease] = h.units
			units += int64(h.units)
			if h.units > 1 {
				last, ok, err := s.Receipt(ctx, stock.MemberAttempt(h.f.Lease, h.units-1))
				if err != nil || !ok || last != h.cur-int64(h.units) {
					fail("round %d: batch %s's last member's receipt says (%d, %v, %v), want (%d, true)", round, h.f.Lease, last, ok, err, h.cur-int64(h.units))
				}
				if _, ok, err := s.Receipt(ctx, stock.MemberAttempt(h.f.Lease, h.units)); err != nil || ok {
					fail("round %d: batch %s's receipt sold a member past its %d units (%v)", round, h.f.Lease, h.units, err)
				}
			}
			if quiet > 0 {
				continue // a restarted fence may take a token again
			}
			tk := h.f.Lock + "/" + strconv.FormatUint(h.f.Token, 10)
			if other, dup := tokenWon[tk]; dup {
				fail("round %d: token %s accepted writes from leases %s and %s", round, tk, other, h.f.Lease)
			}
			tokenWon[tk] = h.f.Lease
		}
		st, err := s.Status(ctx)
		if err != nil {
			fail("round %d: status: %v", round, err)
		}
		if st.Stock < 0 || st.Stock+st.Lucky != initial || st.Lucky != units {
			fail("round %d: stock %d lucky %d (sum %d, want %d), units told or settled %d",
				round, st.Stock, st.Lucky, st.Stock+st.Lucky, initial, units)
		}
	}
	t.Logf("seed %d: %d rounds, %d leases, %d sold %d units", seed, rounds, lease, len(soldBy), units)
}
