package history

import (
	"fmt"
	"hash/fnv"
	"maps"
)

// buyers.go: the sale to named buyers (the order ledger on): the counter,
// plus what ledger.lua decides for each buyer, in its order — a key with a
// sale of this reset answers that sale (a replay): a key is its buyer's
// own, so the same key from another buyer is another purchase; then
// sold_out with no unit left; then
// limit_reached at the per-user limit (which the model accepts at sold out
// too); else a sale, which records the key.

// buyersState is the stock, the units each named buyer bought, and each
// purchase's (buyer and key's) sale. Its maps are never changed once made: a step that changes
// one copies it.
type buyersState struct {
	stock  int64
	bought map[string]int
	keys   map[purchase]keySale
}

type keySale struct{ order string }

// Buyers is the model of the sale to named buyers, with the per-user
// limit (0: none). checkAfter as in Counter. A replay must name its key's
// sale (the order, when both are known); a sale's order is unknown when
// it was settled by its receipt, or never answered.
func Buyers(initial int64, limit int, checkAfter bool) Model {
	sell := func(s buyersState, op Op) (buyersState, bool) {
		if s.stock <= 0 || (op.Key != "" && hasKey(s, op)) {
			return s, false
		}
		if limit > 0 && op.User != "" && s.bought[op.User] >= limit {
			return s, false
		}
		if checkAfter && op.Outcome == Sold && op.After >= 0 && op.After != s.stock-1 {
			return s, false
		}
		n := buyersState{stock: s.stock - 1, bought: s.bought, keys: s.keys}
		if op.User != "" {
			n.bought = maps.Clone(s.bought)
			n.bought[op.User]++
		}
		if op.Key != "" {
			n.keys = maps.Clone(s.keys)
			n.keys[purchase{op.User, op.Key}] = keySale{order: op.Order}
		}
		return n, true
	}
	step := func(state, _, output any) []any {
		s, op := state.(buyersState), output.(Op)
		ks, keyed := s.keys[purchase{op.User, op.Key}]
		keyed = keyed && op.Key != ""
		switch op.Outcome {
		case Sold, SoldSometime:
			if n, ok := sell(s, op); ok {
				return []any{n}
			}
		case Replay:
			if keyed && (ks.order == "" || op.Order == "" || ks.order == op.Order) {
				return []any{s}
			}
		case SoldOut:
			if !keyed && s.stock == 0 {
				return []any{s}
			}
		case LimitReached:
			// Not held to the stock: the script says sold_out first, but
			// a buyer at the limit refused either way is told no lie.
			if !keyed && limit > 0 && op.User != "" && s.bought[op.User] >= limit {
				return []any{s}
			}
		case NoChange:
			return []any{s}
		case Unknown:
			if n, ok := sell(s, op); ok {
				return []any{s, n}
			}
			return []any{s}
		case Read:
			if op.After == s.stock {
				return []any{s}
			}
		}
		return nil
	}
	return newModel(initial, checkAfter, buyersState{stock: initial, bought: map[string]int{}, keys: map[purchase]keySale{}},
		step, buyersEqual, buyersHash, func(s any) string {
			b := s.(buyersState)
			return fmt.Sprintf("stock %d, %d buyers, %d keys", b.stock, len(b.bought), len(b.keys))
		})
}

func hasKey(s buyersState, op Op) bool { _, ok := s.keys[purchase{op.User, op.Key}]; return ok }

func buyersEqual(a, b any) bool {
	x, y := a.(buyersState), b.(buyersState)
	return x.stock == y.stock && maps.Equal(x.bought, y.bought) && maps.Equal(x.keys, y.keys)
}

// buyersHash does not depend on the maps' order: an XOR of each entry's.
func buyersHash(s any) uint64 {
	b := s.(buyersState)
	h := uint64(b.stock) * 0x9e3779b97f4a7c15
	entry := func(parts ...string) uint64 {
		f := fnv.New64a()
		for _, p := range parts {
			f.Write([]byte(p))
			f.Write([]byte{0})
		}
		return f.Sum64()
	}
	for u, n := range b.bought {
		h ^= entry("u", u, fmt.Sprint(n))
	}
	for k, ks := range b.keys {
		h ^= entry("k", k.user, k.key, ks.order)
	}
	return h
}
