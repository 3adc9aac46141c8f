package redisstore

import (
	"context"
	"fmt"
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
	stocks, _, missing, err := s.snapshot(ctx, false)
	if err == nil && missing != "" {
		err = fmt.Errorf("stock: segments: %w", lost(missing))
	}
	return stocks, err
}

// snapshot reads every segment's stock, and lucky when withLucky, at one
// instant (snapshot.lua); missing keys read as 0 (missing names the first
// missing stock key), and a key holding a non-integer, or a value of
// another type, is ErrNotInteger.
func (s *Store) snapshot(ctx context.Context, withLucky bool) (stocks []int64, lucky int64, missing string, err error) {
	keys := make([]string, 0, len(s.segs)+1)
	for _, seg := range s.segs {
		keys = append(keys, seg.keys.Stock)
	}
	if withLucky {
		keys = append(keys, s.keys.Lucky)
	}
	vals, err := snapshot.Run(ctx, s.rdb, keys).StringSlice()
	if err != nil {
		return nil, 0, "", WrapRedis(ctx, "status", err)
	}
	if len(vals) != len(keys) {
		return nil, 0, "", fmt.Errorf("stock: status: got %d values for %d keys", len(vals), len(keys))
	}
	ns := make([]int64, len(keys))
	for i, v := range vals {
		if v == "" {
			if missing == "" && i < len(s.segs) {
				missing = keys[i]
			}
			continue // missing: 0
		}
		if ns[i], err = checkInt(v); err != nil {
			return nil, 0, "", fmt.Errorf("stock: status: %w", notInt(keys[i]))
		}
	}
	if withLucky {
		lucky = ns[len(s.segs)]
	}
	return ns[:len(s.segs)], lucky, missing, nil
}

// CheckCounters reports whether this build can sell in the sale, for
// /readyz: the sale's format is one it reads (else ErrSaleFormat, naming
// the key and both numbers: a newer replica reset it), and every stock key
// (each segment's) and the lucky key holds an integer the scripts can use
// (else an error wrapping ErrNotInteger names the first that does not).
// Missing keys are fine (a sale not reset yet has 0 units).
func (s *Store) CheckCounters(ctx context.Context) error {
	if _, err := s.readEpoch(ctx); err != nil {
		return err
	}
	_, _, _, err := s.snapshot(ctx, true)
	return err
}
