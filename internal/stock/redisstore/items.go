package redisstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

// items.go: sales beside the default one, each an item with an id, keys
// of its own (ItemKeys), a window and a per-user limit.
//
// An item lives in Redis, so every replica agrees on it without any
// configuration: its id in the registry (ItemRegistry), its settings
// (ItemMetaKey) and its sale in its own keys, one hash tag, one Redis
// Cluster slot: Create claims the id in the registry (one script), then
// the item's settings and sale are written in one MULTI of its slot by
// Create and Reset (a new epoch, the ledger cleared, the window set). Items builds each item's
// Service from the default sale's settings (a template) and keeps it; the
// service's store is pinned to the epoch of the reset its settings come
// from (pinEpoch), so a sale that finds the item reset since, by any
// replica, writes nothing, and Items sells again with a service built
// from the new settings: a per-user limit never applies to another sale
// than its own. The window is not a setting of the service: the scripts
// read it from Redis (window.lua). Under a witness each item's store is
// witnessed in a register of its own (ItemsConfig.Witness), as the
// default sale's is in its: a rewound item halts itself, not the others.

// MaxItems bounds the registry: Create refuses an item beyond it, so the
// list and the services kept stay bounded.
const MaxItems = 1000

// maxWindowMS is the latest bound a window may have, 9999-12-31 (unix ms).
const maxWindowMS = 253402300799999

// Item states, by Redis's clock (ItemStatus.State).
const (
	ItemUpcoming = "upcoming" // before starts_at
	ItemOpen     = "open"
	ItemEnded    = "ended" // from ends_at on
	// ItemHalted: its sale went back in time and is halted (guard.lua),
	// whatever its window: every sale answers store_lost until an
	// operator reconciles it.
	ItemHalted = "halted"
	// ItemArchived: archived (Items.Archive): it sells no more, for good.
	ItemArchived = "archived"
)

// Item is an item's settings, as Create and Reset take them and the
// registry keeps them.
type Item struct {
	ID    string `json:"id"`
	Stock int64  `json:"stock"` // units the sale starts with
	// StartsAt and EndsAt bound the sale's window, unix ms by Redis's
	// clock; 0 is no bound. EndsAt, when both are set, is after StartsAt.
	StartsAt int64 `json:"starts_at"`
	EndsAt   int64 `json:"ends_at"`
	// PerUserLimit is the most units one named buyer may buy in the sale;
	// 0 inherits the default sale's (ServiceConfig.PerUserLimit, from
	// stock.per_user_limit; itself 0: no limit), as an operator who set
	// one limit for the shop expects of every sale in it. An item that
	// needs more sets its own. Needs the order ledger.
	PerUserLimit int `json:"per_user_limit"`
}

// Check refuses settings no sale can use; the error wraps ErrBadItem.
func (it Item) Check() error {
	if err := CheckItemID(it.ID); err != nil {
		return err
	}
	switch {
	case it.Stock < 0 || it.Stock > MaxStock:
		return fmt.Errorf("%w: stock %d: want 0..%d (2^53-1)", stock.ErrBadItem, it.Stock, int64(MaxStock))
	case it.StartsAt < 0 || it.EndsAt < 0 || it.StartsAt > maxWindowMS || it.EndsAt > maxWindowMS:
		return fmt.Errorf("%w: starts_at %d, ends_at %d: want unix ms up to 9999-12-31, or 0 for no bound", stock.ErrBadItem, it.StartsAt, it.EndsAt)
	case it.StartsAt > 0 && it.EndsAt > 0 && it.EndsAt <= it.StartsAt:
		return fmt.Errorf("%w: ends_at %d is not after starts_at %d", stock.ErrBadItem, it.EndsAt, it.StartsAt)
	case it.PerUserLimit < 0 || int64(it.PerUserLimit) > MaxStock:
		return fmt.Errorf("%w: per_user_limit %d: want 0 (the default sale's limit) or more", stock.ErrBadItem, it.PerUserLimit)
	}
	return nil
}

// itemRecord is an item's registry entry: its settings and the epoch of
// the reset that wrote them.
type itemRecord struct {
	Item
	Epoch string `json:"epoch"`
}

// ItemStatus is an item's sale at one instant, by Redis's clock.
type ItemStatus struct {
	Item Item // its settings, as created or last reset
	// PerUserLimit is the limit its sales keep (Items.PerUserLimit):
	// Item's, else the default sale's; 0: none.
	PerUserLimit int
	Stock        int64 // units left
	Lucky        int64 // units sold
	Initial      int64 // the stock of its last reset
	// StartsAt and EndsAt are the window Redis holds (unix ms, 0: none).
	StartsAt, EndsAt int64
	State            string // ItemUpcoming, ItemOpen, ItemEnded or ItemHalted
	Halted           string // the halt key's reason, when State is ItemHalted
	ArchivedAt       int64  // when it was archived, unix ms by Redis's clock; 0: it is not
	SoldOut          bool   // no unit left
	Now              int64  // Redis's clock at the read, unix ms
	// EndSeenAt is when a sale first saw the window ended (unix ms by
	// Redis's clock): the end latch, which keeps the item ended whatever
	// the clock says later (window.lua); 0: not latched.
	EndSeenAt int64
}

// ItemsConfig wires Items, and is the one recipe of every sale's store,
// the default sale's included (Store).
type ItemsConfig struct {
	Redis redis.UniversalClient
	// Base is the default sale's keys: items have the order ledger when
	// it has (Base.Orders set), and none when it is segmented.
	Base Keys
	// Acks makes items' sales and resets wait for replicas, as the
	// default sale's (Store.WithReplicaAcks).
	Acks ReplicaAcks
	// Service is the template of every sale's service (ServiceFor), the
	// default sale's included; Items also sets an item's PerUserLimit
	// (its own, when it sets one: else the template's, Items.PerUserLimit).
	Service stock.ServiceConfig
	// Witness, if set, is sale id's witness register (witness.go; id ""
	// the default sale's): each item's sale is witnessed in a register of
	// its own (ItemWitnessName), so a rewound item halts only itself.
	// WitnessTimeout bounds one round (0: DefaultWitnessTimeout).
	Witness        func(id string) stock.Register
	WitnessTimeout time.Duration
	// Clock is what items' windows check the stock Redis's clock
	// against (Store.WithWindowClock): stock.max_clock_skew.
	Clock WindowClock
	// Units, if set, is sale id's durable orders (id "": the default
	// sale's), which learning the sale checks Redis against
	// (Store.WithDurableUnits).
	Units func(id string) DurableUnits
	// Unsupported lists what else in the configuration items do not
	// support: Create and every sale are then refused with
	// ErrItemsUnsupported naming it.
	Unsupported []string
	// Reservations: units sold can come back (Store.WithReservations;
	// Service.PaymentWindow reserves them). Items do not take them yet:
	// they are then unsupported, naming it.
	Reservations bool
	// DurableStates: with Reservations, every end also goes into
	// Keys.Ended for MySQL (Store.WithDurableStates; orders.durable).
	DurableStates bool
}

// Items is the items of one stock Redis: their registry, their sales,
// and a Service kept per item. It is safe for concurrent use.
type Items struct {
	cfg         ItemsConfig
	unsupported error
	mu          sync.Mutex
	sales       map[string]*itemSale
}

// itemSale is an item's service, built from rec.
type itemSale struct {
	rec   itemRecord
	store *Store
	svc   *stock.Service
}

// NewItems returns the items of cfg.Redis. Segmented stock and unfenced
// locked sales (the lab's control, whose plain write checks no window)
// are refused, besides cfg.Unsupported.
func NewItems(cfg ItemsConfig) *Items {
	why := slices.Clone(cfg.Unsupported)
	if cfg.Base.Segments > 1 {
		why = append(why, fmt.Sprintf("segmented stock (%d segments)", cfg.Base.Segments))
	}
	if cmp.Or(cfg.Service.Mode, stock.ModeLocked) == stock.ModeLocked && !cfg.Service.Fencing {
		why = append(why, "unfenced sales (their write checks no window)")
	}
	if cfg.Reservations {
		why = append(why, "reservations (orders.payment_window: the default sale's only, for now)")
	}
	m := &Items{cfg: cfg, sales: map[string]*itemSale{}}
	if len(why) > 0 {
		m.unsupported = fmt.Errorf("%w: %s", stock.ErrItemsUnsupported, strings.Join(why, ", "))
	}
	return m
}

// PerUserLimit is the per-user limit item it's sales keep: its own when
// it sets one, else the default sale's (0: none).
func (m *Items) PerUserLimit(it Item) int {
	return cmp.Or(it.PerUserLimit, m.cfg.Service.PerUserLimit)
}

// Unsupported says why this configuration cannot sell items, or is nil.
func (m *Items) Unsupported() error { return m.unsupported }

// LoadScripts loads the scripts of items' sales (Store.LoadScripts).
func (m *Items) LoadScripts(ctx context.Context) error {
	st := NewStore(m.cfg.Redis, ItemKeys(m.cfg.Base, "x"))
	if err := st.LoadScripts(ctx); err != nil {
		return err
	}
	return WrapRedis(ctx, "load scripts", itemScript.Load(ctx, m.cfg.Redis).Err())
}

// ServiceFor is sale id's service configuration, sold from st (its
// Store): the template's, under the sale's lock key (the template's for
// the default sale, id "", else ItemLockKey of it).
func (c ItemsConfig) ServiceFor(id string, st *Store) stock.ServiceConfig {
	cfg := c.Service
	cfg.Store = st
	if id != "" {
		cfg.LockKey = ItemLockKey(c.Service.LockKey, id)
	}
	return cfg
}

// store is item id's store (ItemsConfig.Store).
func (m *Items) store(id string) *Store { return m.cfg.Store(id) }

// Store is sale id's store: the default sale's (Base) when id is "",
// else item id's (ItemKeys). Every sale's is built here, one way: with
// the replica acks, witnessed in the sale's register if any (its resets
// record their epoch there first, its sales are answered once recorded,
// and its learning of the sale checks it), the window clock (inert for a
// sale without a window) and the durable orders its learning checks.
func (c ItemsConfig) Store(id string) *Store {
	keys := c.Base
	if id != "" {
		keys = ItemKeys(c.Base, id)
	}
	st := NewStore(c.Redis, keys).WithReplicaAcks(c.Acks)
	if c.Witness != nil {
		st = st.WithWitness(c.Witness(id), c.WitnessTimeout)
	}
	st = st.WithWindowClock(c.Clock)
	if c.Units != nil {
		st = st.WithDurableUnits(c.Units(id))
	}
	if c.Reservations {
		st = st.WithReservations()
		if c.DurableStates {
			st = st.WithDurableStates()
		}
	}
	return st
}

// Create makes item it, with it.Stock units and its window, and returns
// its status; ErrItemExists if there is one of that id already.
func (m *Items) Create(ctx context.Context, it Item) (ItemStatus, error) {
	return m.put(ctx, it, true)
}

// Reset starts item it.ID's sale over with the settings of it, as
// Store.Reset does the default sale's (a new epoch, the order ledger
// cleared), and returns its status; ErrNoItem if there is none of that id.
func (m *Items) Reset(ctx context.Context, it Item) (ItemStatus, error) {
	return m.put(ctx, it, false)
}

func (m *Items) put(ctx context.Context, it Item, create bool) (ItemStatus, error) {
	if m.unsupported != nil {
		return ItemStatus{}, m.unsupported
	}
	if err := it.Check(); err != nil {
		return ItemStatus{}, err
	}
	if it.PerUserLimit > 0 && m.cfg.Base.Orders == "" {
		return ItemStatus{}, fmt.Errorf("%w: per_user_limit needs the order ledger, which is off", stock.ErrBadItem)
	}
	// Before the reset sweeps anything of a sale: a create of an item
	// that exists must not touch its idempotency records.
	_, err := m.record(ctx, it.ID)
	switch {
	case create && err == nil:
		return ItemStatus{}, fmt.Errorf("%w: %s (reset it instead, unless it is archived)", stock.ErrItemExists, it.ID)
	case create && errors.Is(err, stock.ErrNoItem):
	case err != nil:
		return ItemStatus{}, err
	}
	// A reset would sweep an archived item's ledger, kept for audit.
	// (One racing an archive cannot revive it: the MULTI below keeps
	// archived_at, which every sale checks.)
	if !create {
		if err := m.refuseArchived(ctx, it.ID); err != nil {
			return ItemStatus{}, err
		}
	}
	st := m.store(it.ID)
	epoch, err := st.beginReset(ctx, it.Stock)
	if err != nil {
		return ItemStatus{}, err
	}
	meta, err := json.Marshal(itemRecord{Item: it, Epoch: epoch})
	if err != nil {
		return ItemStatus{}, err
	}
	// Whatever the answer, the item may have changed: its next sale
	// reads its settings again.
	defer func() {
		m.mu.Lock()
		delete(m.sales, it.ID)
		m.mu.Unlock()
	}()
	if create {
		// The registry is one key of its own slot, the item's keys
		// another's: a claim there first decides between two creates of
		// one id, then the item's own MULTI writes its sale and settings.
		n, err := claimScript.Run(ctx, m.cfg.Redis, []string{ItemRegistry}, it.ID, meta, MaxItems).Int64()
		switch {
		case err != nil:
			return ItemStatus{}, WrapRedis(ctx, "item registry", err)
		case n == 0:
			return ItemStatus{}, fmt.Errorf("%w: %s (reset it instead)", stock.ErrItemExists, it.ID)
		case n < 0:
			return ItemStatus{}, fmt.Errorf("%w: the registry holds %d items, the most there may be", stock.ErrBadItem, MaxItems)
		}
	}
	tx := func(p redis.Pipeliner) error {
		st.queueReset(ctx, p, it.Stock, epoch)
		// A new window: its end not seen yet. Never archived_at, nor the
		// high-water clock, which is the clock's, not the sale's.
		p.HDel(ctx, st.keys.Window, "starts_at", "ends_at", "end_seen_at")
		if it.StartsAt > 0 || it.EndsAt > 0 {
			p.HSet(ctx, st.keys.Window, "starts_at", it.StartsAt, "ends_at", it.EndsAt)
		}
		p.Set(ctx, ItemMetaKey(it.ID), meta, 0)
		return nil
	}
	if st.acks.Replicas > 0 {
		err = st.resetAcked(ctx, tx)
	} else {
		_, err = m.cfg.Redis.TxPipelined(ctx, tx)
		err = WrapRedis(ctx, "reset item", err)
	}
	if err != nil {
		return ItemStatus{}, err
	}
	if !create {
		// The registry's copy, for an item read before it had settings
		// of its own (record): the item's own key, just written, is the
		// one read. A failure here changes nothing read.
		_ = m.cfg.Redis.HSet(ctx, ItemRegistry, it.ID, meta).Err()
	}
	return m.Status(ctx, it.ID)
}

// record reads item id's settings: its own key (ItemMetaKey), else its
// registry entry (an item claimed whose first write never came, or made
// before items kept their settings in their own slot); ErrNoItem when
// neither has it.
func (m *Items) record(ctx context.Context, id string) (itemRecord, error) {
	var own, reg *redis.StringCmd
	_, _ = m.cfg.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		own, reg = p.Get(ctx, ItemMetaKey(id)), p.HGet(ctx, ItemRegistry, id)
		return nil
	}) // each command carries its own error
	return recordOf(ctx, id, own, reg)
}

// recordOf is record's answer from its two reads.
func recordOf(ctx context.Context, id string, own, reg *redis.StringCmd) (itemRecord, error) {
	raw, err := own.Result()
	if errors.Is(err, redis.Nil) {
		raw, err = reg.Result()
	}
	if errors.Is(err, redis.Nil) {
		return itemRecord{}, fmt.Errorf("%w: %s", stock.ErrNoItem, id)
	}
	if err != nil {
		return itemRecord{}, WrapRedis(ctx, "item registry", err)
	}
	return parseRecord(id, raw)
}

func parseRecord(id, raw string) (itemRecord, error) {
	var rec itemRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return itemRecord{}, fmt.Errorf("stock: item %s: registry entry %q: %w", id, truncate(raw, 80), err)
	}
	rec.ID = id
	return rec, nil
}

// List returns every item's settings, by id (at most MaxItems), its
// PerUserLimit the one in effect (Items.PerUserLimit): the registry's
// ids, then each item's own settings (record), one pipeline.
func (m *Items) List(ctx context.Context) ([]Item, error) {
	all, err := m.cfg.Redis.HGetAll(ctx, ItemRegistry).Result()
	if err != nil {
		return nil, WrapRedis(ctx, "item registry", err)
	}
	own := make(map[string]*redis.StringCmd, len(all))
	_, _ = m.cfg.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for id := range all {
			own[id] = p.Get(ctx, ItemMetaKey(id))
		}
		return nil
	}) // each command carries its own error
	out := make([]Item, 0, len(all))
	for id, raw := range all {
		rec, err := recordOf(ctx, id, own[id], redis.NewStringResult(raw, nil))
		if err != nil {
			return nil, err
		}
		rec.PerUserLimit = m.PerUserLimit(rec.Item)
		out = append(out, rec.Item)
	}
	slices.SortFunc(out, func(a, b Item) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// IDs lists the items' ids, in no order: List without reading each
// item's settings.
func (m *Items) IDs(ctx context.Context) ([]string, error) {
	ids, err := m.cfg.Redis.HKeys(ctx, ItemRegistry).Result()
	return ids, WrapRedis(ctx, "item registry", err)
}

// ReduceFor sells one unit of item id to b, as Service.ReduceFor sells
// the default sale's, with the same errors, and besides: ErrNoItem, a
// *WindowError (ErrNotStarted, ErrEnded) outside the item's window,
// ErrItemsUnsupported, and ErrBadItem for a malformed id.
func (m *Items) ReduceFor(ctx context.Context, id string, b stock.Buyer) (stock.Sale, error) {
	if m.unsupported != nil {
		return stock.Sale{}, m.unsupported
	}
	if err := CheckItemID(id); err != nil {
		return stock.Sale{}, err
	}
	fresh := false
	for {
		is, err := m.sale(ctx, id, fresh)
		if err != nil {
			return stock.Sale{}, err
		}
		sale, err := is.svc.ReduceFor(ctx, b)
		if errors.Is(err, stock.ErrEnded) && !errors.Is(err, stock.ErrUnconfirmed) {
			// An archived item's sales end at its window's check
			// (window.lua); say which end it was.
			if aerr := m.refuseArchived(ctx, id); aerr != nil {
				return stock.Sale{}, aerr
			}
		}
		if !errors.Is(err, stock.ErrItemChanged) || errors.Is(err, stock.ErrUnconfirmed) {
			return sale, err
		}
		// Nothing was written: sell again under the new settings.
		if fresh {
			return stock.Sale{}, fmt.Errorf("%w: item %s was reset again during its sale", stock.ErrUnavailable, id)
		}
		fresh = true
	}
}

// Receipt is Store.Receipt for a sale of item id.
func (m *Items) Receipt(ctx context.Context, id, attempt string) (stockAfter int64, sold bool, err error) {
	if err := CheckItemID(id); err != nil {
		return 0, false, err
	}
	is, err := m.sale(ctx, id, false)
	if err != nil {
		return 0, false, err
	}
	return is.store.Receipt(ctx, attempt)
}

// Orders is item id's order ledger (its Store): ErrNoItem when there is
// no such item, and ErrNoLedger from its reads when the ledger is off.
func (m *Items) Orders(ctx context.Context, id string) (stock.OrderReader, error) {
	if m.unsupported != nil {
		return nil, m.unsupported
	}
	if err := CheckItemID(id); err != nil {
		return nil, err
	}
	if _, err := m.record(ctx, id); err != nil {
		return nil, err
	}
	return m.store(id), nil
}

// sale is item id's service: the one kept, unless fresh or none is, else
// one built from the registry (kept while its entry stays the same).
func (m *Items) sale(ctx context.Context, id string, fresh bool) (*itemSale, error) {
	m.mu.Lock()
	is := m.sales[id]
	m.mu.Unlock()
	if is != nil && !fresh {
		return is, nil
	}
	rec, err := m.record(ctx, id)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if is := m.sales[id]; is != nil && is.rec == rec {
		return is, nil
	}
	st := m.store(id)
	st.pinEpoch(rec.Epoch)
	cfg := m.cfg.ServiceFor(id, st)
	cfg.PerUserLimit = m.PerUserLimit(rec.Item)
	is = &itemSale{rec: rec, store: st, svc: stock.NewService(cfg)}
	m.sales[id] = is
	return is, nil
}
