package stock

import (
	"context"
	"errors"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// ItemsSurvey is every item's halt mark and books at one reading, for
// /readyz and the leader's audit.
type ItemsSurvey struct {
	Items  int      // items in the registry
	Halted []string // the ids of the halted items, sorted
	// Stock is the units left over all items (a stock key missing or not
	// an integer counts none).
	Stock int64
	// Unbalanced are the items whose books are wrong at this reading: a
	// negative stock, or stock + lucky != the stock of their last reset
	// (each item's three keys are read in one pipeline, and every script
	// that writes them writes them together).
	Unbalanced []ItemBooks
	// Unledgered are the items with the order ledger on whose ledger does
	// not hold an order per unit sold: entries (and those trimmed once
	// stored) != lucky, read with lucky in one transaction.
	Unledgered []ItemBooks
}

// ItemBooks are one item's books.
type ItemBooks struct {
	ID                    string
	Stock, Lucky, Initial int64
	// Orders is the ledger's orders (XLEN plus trimmed), -1 with the
	// ledger off.
	Orders int64
}

// Survey reads every item's halt mark and books: the registry's ids, then
// one pipeline of a GET and an MGET per item (and with the ledger on, its
// XLEN and trimmed count), each item's in a MULTI of its own, so its
// books and ledger are one instant's. Two round trips whatever the count,
// which MaxItems bounds; not one script, whose keys a Redis Cluster would
// need in one slot where each item has a slot of its own (a MULTI's keys
// are one item's, one slot).
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
	books := make([]*redis.SliceCmd, len(ids))
	entries := make([]*redis.IntCmd, len(ids))
	trimmed := make([]*redis.StringCmd, len(ids))
	ledger := m.cfg.Base.Orders != ""
	_, _ = m.cfg.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			keys := ItemKeys(m.cfg.Base, id)
			halts[i], books[i] = p.Get(ctx, keys.Halt), p.MGet(ctx, keys.Stock, keys.Lucky, keys.Initial)
			if ledger {
				entries[i], trimmed[i] = p.XLen(ctx, keys.Orders), p.Get(ctx, keys.Trimmed)
			}
		}
		return nil
	}) // each command carries its own error
	for i, c := range books {
		vals, err := c.Result()
		if err != nil {
			return ItemsSurvey{}, wrapRedis(ctx, "item "+ids[i]+": books", err)
		}
		var n [3]int64
		var have [3]bool
		for j, v := range vals {
			if s, ok := v.(string); ok {
				n[j], err = strconv.ParseInt(s, 10, 64)
				have[j] = err == nil
			}
		}
		if have[0] && n[0] > 0 {
			out.Stock += n[0]
		}
		// An item with no stock of its reset (created by hand, or lost)
		// has no books to judge here; /readyz and the sale say it is lost.
		b := ItemBooks{ID: ids[i], Stock: n[0], Lucky: n[1], Initial: n[2], Orders: -1}
		if ledger {
			if b.Orders, err = ledgerOrders(entries[i], trimmed[i]); err != nil {
				return ItemsSurvey{}, wrapRedis(ctx, "item "+ids[i]+": ledger", err)
			}
		}
		if have[0] && have[2] && (n[0] < 0 || n[0]+n[1] != n[2]) {
			out.Unbalanced = append(out.Unbalanced, b)
		}
		if ledger && have[2] && b.Orders != n[1] {
			out.Unledgered = append(out.Unledgered, b)
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

// ledgerOrders is an item's ledger orders: its stream's entries plus
// those trimmed once stored (a missing count is none).
func ledgerOrders(entries *redis.IntCmd, trimmed *redis.StringCmd) (int64, error) {
	n, err := entries.Result()
	if err != nil {
		return 0, err
	}
	t, err := trimmed.Int64()
	if errors.Is(err, redis.Nil) {
		return n, nil
	}
	return n + t, err
}
