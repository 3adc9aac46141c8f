package redisstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

// segments.go: the store's side of segmented stock (Keys.Segments). A hot
// item's stock split over N keys, each with its own fence and lock, is sold
// by up to N critical sections at once instead of one.

// Segments is how many keys the stock is split over (at least 1).
func (s *Store) Segments() int { return len(s.segs) }

// segment is the store of segment i alone: its Read, Write, SellAtomic and
// unfenced calls touch that segment's stock and fence (and the shared lucky
// and receipts). Reset and Status belong to the whole store, not to it.
func (s *Store) segment(i int) *Store { return s.segs[i] }

// SegmentStocks reads every segment's stock in one MGET, which Redis runs
// at one instant: when all are 0 the whole stock was 0 at that instant,
// which is the only ground on which a segmented sale answers sold out.
// A missing segment is ErrStoreLost, not an empty one: see the scripts'.
func (s *Store) SegmentStocks(ctx context.Context) ([]int64, error) {
	b, err := s.Books(ctx)
	if err == nil && b.Missing != "" {
		err = fmt.Errorf("stock: segments: %w", lost(b.Missing))
	}
	return b.Segments, err
}

// Books are a sale's counters at one instant: the one reader of them, for
// the sale (a segmented sale's sold-out answer), GET /stock, /readyz, the
// stock gauges and the dashboard.
type Books struct {
	Segments []int64 // each segment's stock; a missing key reads 0
	Stock    int64   // their sum
	Lucky    int64   // units sold; a missing key reads 0
	// Initial is the stock the last reset started from (Keys.Initial);
	// HaveInitial is false when the store names no such key or it is
	// missing (a sale reset by hand, or by a build before it).
	Initial     int64
	HaveInitial bool
	// Returned is the units reservations gave back (Keys.Returned; a
	// missing key reads 0): the books are stock + lucky - returned =
	// initial.
	Returned int64
	// Missing names the first segment's stock key that is missing: a
	// sale never reset, or lost (ErrStoreLost to a seller).
	Missing string
}

// Books reads every segment's stock, lucky and the initial stock at one
// instant (snapshot.lua). A key holding a non-integer, or a value of
// another type, is ErrNotInteger.
func (s *Store) Books(ctx context.Context) (Books, error) {
	stocks := make([]string, len(s.segs))
	for i, seg := range s.segs {
		stocks[i] = seg.keys.Stock
	}
	return readBooks(ctx, s.rdb, stocks, s.keys.Lucky, s.keys.Initial, s.keys.Returned)
}

// ReadBooks is Store.Books for a reader that holds no Store (the leader's
// audit): the sale named by k, its segments' stock keys derived as the
// store derives them. k.Initial "" reads no initial stock.
func ReadBooks(ctx context.Context, rdb redis.Scripter, k Keys) (Books, error) {
	stocks := make([]string, max(k.Segments, 1))
	for i := range stocks {
		stocks[i] = stock.SegmentKey(k.Stock, i)
	}
	return readBooks(ctx, rdb, stocks, k.Lucky, k.Initial, k.withDefaults().Returned)
}

func readBooks(ctx context.Context, rdb redis.Scripter, stocks []string, lucky, initial, returned string) (Books, error) {
	keys := append(slices.Clone(stocks), lucky)
	if initial != "" {
		keys = append(keys, initial)
	}
	keys = append(keys, returned) // last: the indexes below stay as they were
	vals, err := snapshot.Run(ctx, rdb, keys).StringSlice()
	if err != nil {
		return Books{}, WrapRedis(ctx, "status", err)
	}
	if len(vals) != len(keys) {
		return Books{}, fmt.Errorf("stock: status: got %d values for %d keys", len(vals), len(keys))
	}
	segs := len(stocks)
	ns := make([]int64, len(keys))
	var b Books
	for i, v := range vals {
		if v == "" {
			if b.Missing == "" && i < segs {
				b.Missing = keys[i]
			}
			continue // missing: 0
		}
		if ns[i], err = checkInt(v); err != nil {
			return Books{}, fmt.Errorf("stock: status: %w", notInt(keys[i]))
		}
		if i == segs+1 && initial != "" {
			b.HaveInitial = true
		}
	}
	b.Returned = ns[len(keys)-1]
	b.Segments, b.Lucky = ns[:segs], ns[segs]
	for _, n := range b.Segments {
		b.Stock += n
	}
	if b.HaveInitial {
		b.Initial = ns[segs+1]
	}
	return b, nil
}

// CheckCounters reports whether this build can sell in the sale, for
// /readyz: the sale's format is one it reads (else ErrSaleFormat, naming
// the key and both numbers: a newer replica reset it), and every stock key
// (each segment's) and the lucky key holds an integer the scripts can use
// (else an error wrapping ErrNotInteger names the first that does not).
// Missing keys are fine (a sale not reset yet has 0 units).
func (s *Store) CheckCounters(ctx context.Context) error {
	// Not the sale's kind (ErrSaleKind): a reset through this replica
	// makes the sale its own, and an unready replica would be out of the
	// pool that the operator's reset goes through. Its sales say why.
	if _, err := s.readEpoch(ctx, false); err != nil {
		return err
	}
	_, err := s.Books(ctx)
	return err
}
