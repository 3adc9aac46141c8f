package redisstore

import (
	"context"

	"seckill/internal/stock"
)

// sale.go: the store as stock.Service sells from it (stock.Store). The
// Service's calls reach the same scripts the Store's own methods run;
// this file only names them for the interface.

var _ stock.Store = (*Store)(nil)

// Segment is segment i's store, as the Service sells from it.
func (s *Store) Segment(i int) stock.Segment { return saleSegment{s.segs[i]} }

// saleSegment is one segment's store seen through stock.Segment.
type saleSegment struct{ s *Store }

func (g saleSegment) Read(ctx context.Context, f stock.Fence, replays bool) (stock.Reading, error) {
	return g.s.read(ctx, f, replays)
}

func (g saleSegment) Write(ctx context.Context, f stock.Fence, newStock int64, units int) error {
	if units == 0 {
		return g.s.write(ctx, f, newStock)
	}
	return g.s.write(ctx, f, newStock, units)
}

func (g saleSegment) WriteLedger(ctx context.Context, f stock.Fence, read int64, members []stock.Member, la stock.LedgerArgs) ([]stock.Verdict, error) {
	return g.s.writeLedger(ctx, f, read, members, la)
}

func (g saleSegment) ReadUnfenced(ctx context.Context) (int64, error) { return g.s.ReadUnfenced(ctx) }

func (g saleSegment) WriteUnfenced(ctx context.Context, newStock int64, units int) error {
	return g.s.writeUnfenced(ctx, newStock, units)
}

func (g saleSegment) SellAtomic(ctx context.Context, id string) (int64, error) {
	return g.s.SellAtomic(ctx, id)
}

func (g saleSegment) SellLedger(ctx context.Context, id string, b stock.Buyer, la stock.LedgerArgs) (stock.Verdict, error) {
	return g.s.sellLedger(ctx, id, b, la)
}

func (g saleSegment) Peek(ctx context.Context, b stock.Buyer) (int64, bool, error) {
	idem := ""
	if b.Key != "" {
		idem = g.s.idemKey(b.User, b.Key)
	}
	return g.s.Peek(ctx, idem)
}

func (g saleSegment) AwaitWitness(ctx context.Context) error {
	if g.s.wit == nil {
		return nil
	}
	return g.s.wit.await(ctx)
}

func (g saleSegment) HaltWitnessLost(ctx context.Context, err error) error {
	epoch, _, _ := g.s.mark.snapshot()
	return g.s.haltLost(ctx, "witness the sale", epoch, witnessLostReason(err))
}
