package stock

import (
	"context"
	"errors"
	"slices"

	"github.com/redis/go-redis/v9"
)

// ItemsSurvey is every item's halt mark and stock at one reading, for
// /readyz.
type ItemsSurvey struct {
	Items  int      // items in the registry
	Halted []string // the ids of the halted items, sorted
	// Stock is the units left over all items (a stock key missing or not
	// an integer counts none).
	Stock int64
}

// Survey reads every item's halt mark and stock: the registry's ids, then
// one pipeline of two GETs per item. Two round trips whatever the count, which
// MaxItems bounds; not one script, whose keys a Redis Cluster would need
// in one slot where each item has a slot of its own.
func (m *Items) Survey(ctx context.Context) (ItemsSurvey, error) {
	ids, err := m.cfg.Redis.HKeys(ctx, ItemRegistry).Result()
	if err != nil {
		return ItemsSurvey{}, wrapRedis(ctx, "item registry", err)
	}
	out := ItemsSurvey{Items: len(ids)}
	if len(ids) == 0 {
		return out, nil
	}
	slices.Sort(ids)
	halts := make([]*redis.StringCmd, len(ids))
	stocks := make([]*redis.StringCmd, len(ids))
	_, _ = m.cfg.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			keys := ItemKeys(m.cfg.Base, id)
			halts[i], stocks[i] = p.Get(ctx, keys.Halt), p.Get(ctx, keys.Stock)
		}
		return nil
	}) // each command carries its own error
	for _, c := range stocks {
		if n, err := c.Int64(); err == nil && n > 0 {
			out.Stock += n
		}
	}
	for i, h := range halts {
		switch err := h.Err(); {
		case err == nil:
			out.Halted = append(out.Halted, ids[i])
		case errors.Is(err, redis.Nil):
		default:
			return ItemsSurvey{}, wrapRedis(ctx, "item "+ids[i]+": halt mark", err)
		}
	}
	return out, nil
}
