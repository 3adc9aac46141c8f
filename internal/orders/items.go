package orders

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/backoff"
)

// DefaultItemsTable is the items' orders table when ItemsConfig names
// none: the default sale's table's name plus "_items".
const DefaultItemsTable = DefaultTable + "_items"

// Timing of ItemConsumers: how often the list of items is read again,
// and how long a round that found nothing waits before the next (doubling
// from itemsIdleMin while nothing comes, back to it when anything does).
const (
	itemsListEvery = time.Second
	itemsIdleMin   = 10 * time.Millisecond
	itemsIdleMax   = 250 * time.Millisecond
)

// ItemsConfig configures ItemConsumers.
type ItemsConfig struct {
	// Config is every item's consumer's, as for the default sale's
	// (Redis, Group, Consumer, DB, ReadDB, ClaimIdle, Batch, TrimEvery,
	// Logger); Table is the items' table (EnsureItemsSchema), by default
	// DefaultItemsTable. Stream and Item are set per item; UniqueBuyer
	// must be false (each item has a per-user limit of its own).
	Config
	// Items lists the items' ids. Required.
	Items func(ctx context.Context) ([]string, error)
	// Stream is item id's ledger stream (redisstore.ItemKeys). Required.
	Stream func(id string) string
}

// ItemConsumers stores every item's ledger in the items' table, as a
// Consumer does the default sale's, and in the same group name: an
// item's sale writes only keys of its own (one Redis Cluster slot), so
// each item has a stream and a group of its own.
//
// One goroutine takes turns with every item's consumer, a non-blocking
// step each, rather than a blocked read per item: a blocked read holds a
// Redis connection for its whole wait, and a sale may have many items.
// A round that finds nothing waits (itemsIdleMin, doubling to
// itemsIdleMax) before the next: that wait, at most itemsIdleMax, is
// what an idle item's first order waits to be stored, and a round costs
// one read per item. The list of items is read again every
// itemsListEvery. An item whose step fails backs off alone: the others
// go on.
type ItemConsumers struct {
	cfg     ItemsConfig
	running atomic.Bool
	listErr atomic.Int64
	mu      sync.Mutex
	byID    map[string]*itemLoop
}

// itemLoop is an item's consumer and its loop; only Run's goroutine
// touches the loop and its retry.
type itemLoop struct {
	c       *Consumer
	l       loop
	retry   backoff.Backoff
	retryAt time.Time
}

// NewItemConsumers returns the items' consumers of cfg; like New, it only
// validates.
func NewItemConsumers(cfg ItemsConfig) (*ItemConsumers, error) {
	if cfg.Table == "" {
		cfg.Table = DefaultItemsTable
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case cfg.Items == nil:
		return nil, fmt.Errorf("%w: Items is nil", ErrConfig)
	case cfg.Stream == nil:
		return nil, fmt.Errorf("%w: Stream is nil", ErrConfig)
	}
	// Validate the template as an item's: every field but the stream.
	probe := cfg.Config
	probe.Stream, probe.Item = "x", "x"
	if _, err := probe.withDefaults(); err != nil {
		return nil, err
	}
	return &ItemConsumers{cfg: cfg, byID: map[string]*itemLoop{}}, nil
}

// For is item id's consumer, for its Lag, Durable and Orders (Run runs
// every item's; For does not start anything). An id that is not an item's
// yet is as good: its stream has no entries.
func (m *ItemConsumers) For(id string) (*Consumer, error) {
	it, err := m.item(id)
	if err != nil {
		return nil, err
	}
	return it.c, nil
}

// item is id's consumer and loop, made on first use.
func (m *ItemConsumers) item(id string) (*itemLoop, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if it := m.byID[id]; it != nil {
		return it, nil
	}
	cfg := m.cfg.Config
	cfg.Stream, cfg.Item = m.cfg.Stream(id), id
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	c.log = c.log.With("item", id)
	it := &itemLoop{
		c: c, l: loop{c: c, own: true, block: -1},
		retry: backoff.Backoff{Initial: backoffMin, Max: backoffMax, Jitter: 0.5},
	}
	m.byID[id] = it
	return it, nil
}

// Serve creates the items' tables once MySQL answers (EnsureItemsSchema,
// retried with a backoff), then runs until ctx ends (Run). It returns nil
// when ctx ends, at either step.
func (m *ItemConsumers) Serve(ctx context.Context) error {
	log := m.cfg.Logger
	if !ensure(ctx, log, func(ctx context.Context) error { return ensureItemsSchema(ctx, m.cfg.DB, m.cfg.Table, log) }) {
		return nil
	}
	log.Info("durable orders: storing the items' ledgers in MySQL", "table", m.cfg.Table)
	return m.Run(ctx)
}

// Run stores every item's entries until ctx ends, then returns nil; like
// Consumer.Run, it retries failures and never returns for them.
func (m *ItemConsumers) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer m.running.Store(false)
	var (
		ids    []string
		listed time.Time
		idle   = itemsIdleMin
	)
	for ctx.Err() == nil {
		if time.Since(listed) >= itemsListEvery {
			if got, err := m.list(ctx); err == nil {
				ids, listed = got, time.Now()
			} else if ctx.Err() == nil {
				m.listErr.Add(1)
				m.cfg.Logger.Warn("orders: could not list the items; their orders wait in their streams", "err", err)
				listed = time.Now() // retried at the next listing
			}
		}
		stored := 0
		for _, id := range ids {
			if ctx.Err() != nil {
				break
			}
			it, err := m.item(id)
			if err != nil {
				continue // refused when listed
			}
			stored += it.turn(ctx)
		}
		if stored > 0 {
			idle = itemsIdleMin
			continue
		}
		if backoff.Sleep(ctx, idle) != nil {
			break
		}
		idle = min(2*idle, itemsIdleMax)
	}
	return nil
}

// list is the items' ids, sorted, leaving out any whose consumer cannot
// be made (logged once, when first listed).
func (m *ItemConsumers) list(ctx context.Context) ([]string, error) {
	ids, err := m.cfg.Items(ctx)
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	out := ids[:0]
	for _, id := range ids {
		m.mu.Lock()
		known := m.byID[id] != nil
		m.mu.Unlock()
		if _, err := m.item(id); err != nil {
			if !known {
				m.cfg.Logger.Error("orders: an item's ledger cannot be stored", "item", id, "err", err)
			}
			continue
		}
		out = append(out, id)
	}
	return out, nil
}

// turn is one step of the item's consumer (and its trim), unless it is
// backing off; it returns the entries it stored.
func (it *itemLoop) turn(ctx context.Context) int {
	if time.Now().Before(it.retryAt) {
		return 0
	}
	n, err := it.l.step(ctx)
	it.l.trim(ctx)
	switch {
	case err == nil:
		it.retry.Reset()
	case ctx.Err() == nil:
		it.c.stats.errors.Add(1)
		delay := it.retry.Next()
		it.retryAt = time.Now().Add(delay)
		it.c.log.Warn("orders: retrying", "err", err, "in", delay)
	}
	return n
}

// Stats sums every item's consumer's counters; Errors also counts the
// failed listings of the items.
func (m *ItemConsumers) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s Stats
	for _, it := range m.byID {
		t := it.c.Stats()
		s.Inserted += t.Inserted
		s.Duplicates += t.Duplicates
		s.Conflicts += t.Conflicts
		s.Claimed += t.Claimed
		s.Malformed += t.Malformed
		s.Errors += t.Errors
		s.Groups += t.Groups
		s.Trimmed += t.Trimmed
		s.TrimErrors += t.TrimErrors
	}
	s.Errors += m.listErr.Load()
	return s
}
