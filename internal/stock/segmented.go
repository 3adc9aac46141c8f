package stock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
)

// segmented.go: the service's side of segmented stock (Keys.Segments).
//
// A request picks a segment by two random choices: of two segments drawn
// at random among those not yet tried and not known empty, the one with
// fewer of this process's requests on it. Random alone spreads load but
// leaves some segment queues long while others idle; two choices keep the
// longest queue short at the price of two atomic loads and no coordination.
// Per-replica affinity was rejected: three replicas would keep only three
// of eight segments busy, while random draws keep every segment's lock in
// use from every replica.
//
// A segment found empty is marked (a hint other requests use to try it
// last) and the request moves on. When none is left to try it reads every
// segment at one instant (Store.SegmentStocks, one MGET): sold out only if
// all are 0 then, otherwise it tries those that are not. So no buyer is
// turned away while any stock remains — a hint can be stale (a reset), the
// MGET cannot. A request with an idempotency key that finds them all empty
// still runs one segment's script, which answers a replay of its key.

// reduceSegmented sells one unit from whichever segment has one.
func (s *Service) reduceSegmented(ctx context.Context, b Buyer) (Sale, error) {
	tried := make([]bool, len(s.segs))
	for {
		for {
			seg := s.pick(tried)
			if seg == nil {
				break
			}
			tried[seg.i] = true
			seg.busy.Add(1)
			sale, err := s.reduceIn(ctx, seg, b)
			seg.busy.Add(-1)
			if !errors.Is(err, ErrSoldOut) {
				return sale, err
			}
			seg.empty.Store(true)
		}
		stocks, err := s.cfg.Store.SegmentStocks(ctx)
		if err != nil {
			return Sale{}, err
		}
		left := false
		for i, n := range stocks {
			if n > 0 {
				tried[i] = false
				s.segs[i].empty.Store(false)
				left = true
			}
		}
		if !left && b.Key != "" && s.ledger() {
			// The hints may have kept this request from every segment's
			// script, and only a script can tell whether its key already
			// sold: a replay after the sell-out must answer the original
			// sale, not sold out. Any segment's script checks the key.
			return s.reduceIn(ctx, s.segs[0], b)
		}
		if !left {
			return Sale{}, fmt.Errorf("%w: all %d segments are empty", ErrSoldOut, len(stocks))
		}
		if err := ctx.Err(); err != nil {
			return Sale{}, fmt.Errorf("stock: sale abandoned: %w", err)
		}
	}
}

// pick draws two segments among those neither tried nor marked empty and
// returns the less busy, or nil when there is none.
func (s *Service) pick(tried []bool) *segment {
	var buf [64]*segment
	cands := buf[:0]
	for i, seg := range s.segs {
		if !tried[i] && !seg.empty.Load() {
			cands = append(cands, seg)
		}
	}
	switch len(cands) {
	case 0:
		return nil
	case 1:
		return cands[0]
	}
	a, b := cands[rand.IntN(len(cands))], cands[rand.IntN(len(cands))]
	if b.busy.Load() < a.busy.Load() {
		return b
	}
	return a
}
