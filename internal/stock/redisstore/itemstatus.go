package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/item.lua
var itemSrc string

var itemScript = redis.NewScript(itemSrc)

//go:embed lua/claim.lua
var claimSrc string

// claimScript claims an item's id in the registry (Items.put).
var claimScript = redis.NewScript(claimSrc)

// Status reads item id: its settings and its sale at one instant, with
// its state by Redis's clock, in one round trip (the registry's entry and
// item.lua, pipelined). ErrNoItem when there is none; ErrStoreLost when
// the registry has it but Redis lost its sale. A halted sale reads as
// ItemHalted, with its counters: what its sales answer, not "open".
func (m *Items) Status(ctx context.Context, id string) (ItemStatus, error) {
	if err := CheckItemID(id); err != nil {
		return ItemStatus{}, err
	}
	keys := ItemKeys(m.cfg.Base, id)
	ks := []string{keys.Stock, keys.Lucky, keys.Initial, keys.Window, keys.Halt}
	// The item's settings, then its sale, read on one connection of its
	// slot one after the other; the registry's copy beside them (record).
	run := func(eval func(p redis.Pipeliner) *redis.Cmd) (own, reg *redis.StringCmd, c *redis.Cmd) {
		p := m.cfg.Redis.Pipeline()
		own, reg = p.Get(ctx, ItemMetaKey(id)), p.HGet(ctx, ItemRegistry, id)
		c = eval(p)
		_, _ = p.Exec(ctx) // each command carries its own error
		return own, reg, c
	}
	own, reg, c := run(func(p redis.Pipeliner) *redis.Cmd { return itemScript.EvalSha(ctx, p, ks) })
	if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
		own, reg, c = run(func(p redis.Pipeliner) *redis.Cmd { return itemScript.Eval(ctx, p, ks) })
	}
	rec, err := recordOf(ctx, id, own, reg)
	if err != nil {
		return ItemStatus{}, err
	}
	vals, err := c.StringSlice()
	if err != nil {
		return ItemStatus{}, WrapRedis(ctx, "item status", err)
	}
	if len(vals) != 10 {
		return ItemStatus{}, fmt.Errorf("stock: item status: unexpected reply %v", vals)
	}
	st, err := itemStatus(rec.Item, keys, vals)
	st.PerUserLimit = m.PerUserLimit(rec.Item)
	return st, err
}

// itemStatus reads item.lua's answer vals for item it of keys.
func itemStatus(it Item, keys Keys, vals []string) (ItemStatus, error) {
	st := ItemStatus{Item: it}
	if vals[0] == "" {
		return ItemStatus{}, fmt.Errorf("stock: item %s: %w", it.ID, lost(keys.Stock))
	}
	for i, c := range []struct {
		dst *int64
		key string
	}{{&st.Stock, keys.Stock}, {&st.Lucky, keys.Lucky}, {&st.Initial, keys.Initial}} {
		if vals[i] == "" {
			continue // lucky and initial: 0 until written
		}
		n, err := checkInt(vals[i])
		if err != nil {
			return ItemStatus{}, fmt.Errorf("stock: item %s: %w", it.ID, notInt(c.key))
		}
		*c.dst = n
	}
	var high int64
	for _, f := range []struct {
		dst *int64
		v   string
	}{{&st.StartsAt, vals[3]}, {&st.EndsAt, vals[4]}, {&st.Now, vals[5]}, {&st.EndSeenAt, vals[8]}, {&high, vals[9]}} {
		if f.v == "" {
			continue
		}
		n, err := strconv.ParseInt(f.v, 10, 64)
		if err != nil {
			return ItemStatus{}, fmt.Errorf("stock: item %s: window %q holds %q, not unix ms", it.ID, keys.Window, truncate(f.v, 24))
		}
		*f.dst = n
	}
	// window.lua's clock: only forward, and ended once a sale saw the end.
	st.State = windowState(st.StartsAt, st.EndsAt, max(st.Now, high))
	if st.EndsAt > 0 && st.EndSeenAt > 0 {
		st.State = ItemEnded
	}
	if vals[7] != "" {
		n, err := strconv.ParseInt(vals[7], 10, 64)
		if err != nil {
			return ItemStatus{}, fmt.Errorf("stock: item %s: window %q holds archived_at %q, not unix ms", it.ID, keys.Window, truncate(vals[7], 24))
		}
		st.State, st.ArchivedAt = ItemArchived, n
	}
	if vals[6] != "" {
		st.State, st.Halted = ItemHalted, truncate(vals[6], 200)
	}
	st.SoldOut = st.Stock <= 0
	return st, nil
}

// windowState is window.lua's rule: upcoming before starts_at, ended from
// ends_at on (0: no bound), open between.
func windowState(starts, ends, now int64) string {
	switch {
	case starts > 0 && now < starts:
		return ItemUpcoming
	case ends > 0 && now >= ends:
		return ItemEnded
	}
	return ItemOpen
}
