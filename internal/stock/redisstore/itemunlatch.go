package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

// itemunlatch.go: the way back from a window latch set in error. An
// item's window only moves forward (window.lua): a sale that saw the end
// latches it, and the high-water clock never falls. Both move only while
// the stock Redis's clock is within stock.max_clock_skew of the seller's,
// so a forward step within the bound can end a sale up to that much early
// for good; the operator lifts it here, once the clock is right again.

//go:embed lua/unlatch.lua
var unlatchSrc string

var unlatchScript = redis.NewScript(unlatchSrc)

// ErrWindowEnded: Unlatch was refused because the item's window has ended
// by the stock Redis's clock now; a latch lifted would be set again by
// the next sale.
var ErrWindowEnded = errors.New("stock: the window has ended by the stock redis's clock now")

// Unlatch lifts item id's end latch and lowers its high-water clock to
// Redis's clock now, recording by as who did it (the window hash's
// unlatched_by and unlatched_at), and returns the item's status. It is
// refused for an archived item (ErrItemArchived) and for one whose window
// has ended by Redis's clock now (ErrWindowEnded). Lifting nothing is not
// an error.
func (m *Items) Unlatch(ctx context.Context, id, by string) (ItemStatus, error) {
	if m.unsupported != nil {
		return ItemStatus{}, m.unsupported
	}
	if err := CheckItemID(id); err != nil {
		return ItemStatus{}, err
	}
	if _, err := m.record(ctx, id); err != nil {
		return ItemStatus{}, err
	}
	res, err := unlatchScript.Run(ctx, m.cfg.Redis, []string{ItemKeys(m.cfg.Base, id).Window}, by).Int64Slice()
	if err != nil {
		return ItemStatus{}, WrapRedis(ctx, "unlatch item", err)
	}
	if len(res) != 2 {
		return ItemStatus{}, fmt.Errorf("stock: unlatch item: unexpected reply %v", res)
	}
	switch res[0] {
	case 1:
		return ItemStatus{}, fmt.Errorf("%w: %s", stock.ErrItemArchived, id)
	case 2:
		return ItemStatus{}, fmt.Errorf("%w: item %s, at %s", ErrWindowEnded, id, time.UnixMilli(res[1]).UTC().Format(time.RFC3339Nano))
	}
	return m.Status(ctx, id)
}
