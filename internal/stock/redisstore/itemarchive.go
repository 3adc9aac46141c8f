package redisstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

// itemarchive.go: archiving an item. The registry is bounded (MaxItems),
// so an item that is done must be able to leave it, without losing its
// books and orders, which an audit may still ask for.
//
// The mark that stops its sales is archived_at in the item's window hash
// (Keys.Window), set once by archive.lua: every script that reads to sell
// or takes a unit checks the window there (window.lua), in the item's
// slot, so an archive that lands mid-sale refuses that sale's write; a
// reset keeps the mark (it deletes only starts_at and ends_at). Then the
// item moves from the registry to the archive (ItemArchive), which frees
// its place under MaxItems. Its keys stay: GET /items/:id, its receipts,
// its orders and its ledger read as before.

//go:embed lua/archive.lua
var archiveSrc string

var archiveScript = redis.NewScript(archiveSrc)

// Archive stops item id's sales for good and takes it out of the
// registry (and MaxItems' count) into the archive, keeping its keys; it
// returns its status, State ItemArchived. Archiving an archived item
// again changes nothing. ErrNoItem when there is no such item.
func (m *Items) Archive(ctx context.Context, id string) (ItemStatus, error) {
	if m.unsupported != nil {
		return ItemStatus{}, m.unsupported
	}
	if err := CheckItemID(id); err != nil {
		return ItemStatus{}, err
	}
	rec, err := m.record(ctx, id)
	if err != nil {
		return ItemStatus{}, err
	}
	keys := ItemKeys(m.cfg.Base, id)
	if err := archiveScript.Run(ctx, m.cfg.Redis, []string{keys.Window}).Err(); err != nil {
		return ItemStatus{}, WrapRedis(ctx, "archive item", err)
	}
	meta, err := json.Marshal(rec)
	if err != nil {
		return ItemStatus{}, err
	}
	// The sales are stopped; what follows is bookkeeping, in the
	// registry's slot, and an archive cut here is finished by sending it
	// again. Into the archive first: the item is never in neither.
	if _, err := m.cfg.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, ItemArchive, id, meta)
		p.HDel(ctx, ItemRegistry, id)
		return nil
	}); err != nil {
		return ItemStatus{}, WrapRedis(ctx, "archive item", err)
	}
	m.mu.Lock()
	delete(m.sales, id)
	m.mu.Unlock()
	return m.Status(ctx, id)
}

// refuseArchived is ErrItemArchived when item id is archived, else nil.
func (m *Items) refuseArchived(ctx context.Context, id string) error {
	at, err := m.cfg.Redis.HGet(ctx, ItemKeys(m.cfg.Base, id).Window, "archived_at").Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil
	case err != nil:
		return WrapRedis(ctx, "item archive mark", err)
	}
	return fmt.Errorf("%w: %s (archived at %s unix ms)", stock.ErrItemArchived, id, at)
}
