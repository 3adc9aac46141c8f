package history

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math"
)

// buyers.go: the sale to named buyers (the order ledger on): the counter,
// plus what ledger.lua decides for each buyer, in its order — a key with a
// sale of this reset answers that sale (a replay): a key is its buyer's
// own, so the same key from another buyer is another purchase; then
// sold_out with no unit left; then
// limit_reached at the per-user limit (which the model accepts at sold out
// too); else a sale, which records the key.

// buyersState is the stock (with the unanswered sales placed where they
// were sent, as in the counter), the units each named buyer bought, and
// each purchase's (buyer and key's) sale. Its maps are never changed once
// made: a step that changes one copies it.
type buyersState struct {
	c      counterState
	bought map[string]int
	keys   map[purchase]keySale
}

// keySale is a key's sale: its order id ("" when unknown) and the stock
// it left (-1 when unknown).
type keySale struct {
	order string
	after int64
}

// Buyers is the model of the sale to named buyers, with the per-user
// limit (0: none). checkAfter as in Counter. A replay must name its key's
// sale: the order and, with checkAfter, the stock it left, each when both
// are known; a sale's are unknown when it was settled by its receipt, or
// never answered.
//
// An unanswered send that Check's strip left with no buyer and no key
// (its buyer's only send) is a plain unit that may have gone, placed
// where it was sent as in Counter; one that other sends of its buyer
// could see branches, sold or not. Without that, a run with dozens of
// cut purchases, each its buyer's only one, branched on every one of them
// and ran out of its minute.
func Buyers(initial int64, limit int, checkAfter bool) Model {
	sell := func(s buyersState, op Op) []buyersState {
		if op.Key != "" && hasKey(s, op) {
			return nil
		}
		if limit > 0 && op.User != "" && s.bought[op.User] >= limit {
			return nil
		}
		var out []buyersState
		for _, c := range s.c.sell(op, checkAfter) {
			n := buyersState{c: c, bought: s.bought, keys: s.keys}
			if op.User != "" {
				n.bought = maps.Clone(s.bought)
				n.bought[op.User]++
			}
			if op.Key != "" {
				n.keys = maps.Clone(s.keys)
				n.keys[purchase{op.User, op.Key}] = keySale{order: op.Order, after: op.After}
			}
			out = append(out, n)
		}
		return out
	}
	with := func(s buyersState, cs []counterState) []any {
		out := make([]any, len(cs))
		for i, c := range cs {
			out[i] = buyersState{c: c, bought: s.bought, keys: s.keys}
		}
		return out
	}
	step := func(state, _, output any) []any {
		s, op := state.(buyersState), output.(Op)
		ks, keyed := s.keys[purchase{op.User, op.Key}]
		keyed = keyed && op.Key != ""
		switch op.Outcome {
		case Sold, SoldSometime:
			sold := sell(s, op)
			out := make([]any, len(sold))
			for i, n := range sold {
				out[i] = n
			}
			return out
		case Replay:
			if keyed && (ks.order == "" || op.Order == "" || ks.order == op.Order) &&
				(!checkAfter || ks.after < 0 || op.After < 0 || ks.after == op.After) {
				return []any{s}
			}
		case SoldOut:
			if !keyed {
				return with(s, s.c.take(s.c.stock, false))
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
			if op.User == "" && op.Key == "" {
				s.c.maybe++
				return []any{s}
			}
			out := []any{s}
			for _, n := range sell(s, op) {
				out = append(out, n)
			}
			return out
		case Read:
			return with(s, s.c.take(s.c.stock-op.After, true))
		}
		return nil
	}
	m := newModel(initial, checkAfter, buyersState{c: counterState{stock: initial, budget: math.MaxInt64}, bought: map[string]int{}, keys: map[purchase]keySale{}},
		step, buyersEqual, buyersHash, func(s any) string {
			b := s.(buyersState)
			return fmt.Sprintf("stock %d (%d that may have gone), %d buyers, %d keys", b.c.stock, b.c.maybe, len(b.bought), len(b.keys))
		})
	m.pinned, m.strip = true, true
	m.pin = func(op Op) bool { return op.Outcome == Unknown && op.User == "" && op.Key == "" }
	m.wrap = func(c counterState) any {
		return buyersState{c: c, bought: map[string]int{}, keys: map[purchase]keySale{}}
	}
	return m
}

func hasKey(s buyersState, op Op) bool { _, ok := s.keys[purchase{op.User, op.Key}]; return ok }

func buyersEqual(a, b any) bool {
	x, y := a.(buyersState), b.(buyersState)
	return x.c == y.c && maps.Equal(x.bought, y.bought) && maps.Equal(x.keys, y.keys)
}

// buyersHash does not depend on the maps' order: an XOR of each entry's.
func buyersHash(s any) uint64 {
	b := s.(buyersState)
	h := b.c.hash() * 0x9e3779b97f4a7c15
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
		h ^= entry("k", k.user, k.key, ks.order, fmt.Sprint(ks.after))
	}
	return h
}
