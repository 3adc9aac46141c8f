package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"seckill/internal/api"
	"seckill/internal/stock"
)

// ledger.go: the order ledger's reconciliation. Every unit sold
// leaves an order in the script that takes it, so the ledger's orders must
// equal lucky; and once the durable consumer has caught up, MySQL's rows
// for the sale must equal the ledger's orders.

// Ledger reads the order ledger; *redisstore.Store implements it.
type Ledger interface {
	// LedgerStats reads the sale id, the orders and lucky in one round
	// trip, so they can be compared with each other under load.
	LedgerStats(ctx context.Context) (stock.LedgerStats, error)
}

// DurableOrders reads the ledger's durable copy; *orders.Consumer
// implements it.
type DurableOrders interface {
	Durable(ctx context.Context, sale string) (int64, error)
	Lag(ctx context.Context) (int64, error)
}

// LedgerRecord is the ledger part of a Record.
type LedgerRecord struct {
	// Item is the item whose ledger this is (Record.ItemLedger), "" for
	// the default sale's.
	Item   string `json:"item,omitempty"`
	Sale   string `json:"sale"`
	Orders int64  `json:"orders"`
	// Lucky is lucky as read with Orders (Record.Lucky is read with the
	// stock, at another instant).
	Lucky int64 `json:"lucky"`
	// Durable is MySQL's rows for Sale, when compared: the consumer had no
	// lag and no sale happened while they were counted. Nil otherwise.
	Durable *int64 `json:"durable,omitempty"`
	// Lag is the consumer's lag as read, -1 when it was not read (no
	// durable orders, or the read failed).
	Lag int64 `json:"lag"`
}

// checkLedger adds the ledger's reconciliation to r. A Redis failure is
// an error (ErrRedis) as for the sale's keys; a MySQL failure only skips
// the durable comparison, which the next run makes.
func (a *Auditor) checkLedger(ctx context.Context, r *Record) ([]string, error) {
	l, bad, durable, err := a.reconcile(ctx, a.cfg.Ledger, a.cfg.Durable)
	r.Ledger = l
	return append(bad, durable...), err
}

// reconcile compares ledger's orders with its lucky (the problems in
// bad), and with durable (nil: none) its durable copy's rows with its
// orders (in durableBad).
func (a *Auditor) reconcile(ctx context.Context, ledger Ledger, d DurableOrders) (_ *LedgerRecord, bad, durableBad []string, _ error) {
	st, err := ledger.LedgerStats(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: read ledger: %w", ErrRedis, err)
	}
	l := &LedgerRecord{Sale: st.Sale, Orders: st.Orders, Lucky: st.Lucky, Lag: -1}
	if p := api.LedgerProblem(st.Orders, st.Lucky); p != "" {
		bad = append(bad, p)
	}
	if d == nil {
		return l, bad, nil, nil
	}
	// Lag 0 says every entry so far is stored; the rows are counted after
	// it, and the ledger read again: unchanged, no sale slipped in between
	// and the rows must be exactly its orders. Changed (a sale, a reset),
	// the comparison waits for a quieter run.
	lag, err := d.Lag(ctx)
	if err != nil {
		a.logDurable("lag", err)
		return l, bad, nil, nil
	}
	l.Lag = lag
	if lag != 0 {
		return l, bad, nil, nil
	}
	rows, err := d.Durable(ctx, st.Sale)
	if err != nil {
		a.logDurable("durable", err)
		return l, bad, nil, nil
	}
	again, err := ledger.LedgerStats(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: read ledger: %w", ErrRedis, err)
	}
	if again != st {
		return l, bad, nil, nil
	}
	l.Durable = &rows
	if rows != st.Orders {
		durableBad = append(durableBad, fmt.Sprintf("durable orders = %d, want the ledger's %d for sale %s with no lag (%+d)",
			rows, st.Orders, st.Sale, rows-st.Orders))
	}
	return l, bad, durableBad, nil
}

// ItemLedgers is an item's ledger and its durable copy (Config.ItemLedgers).
type ItemLedgers func(ctx context.Context, id string) (Ledger, DurableOrders, error)

// checkItemDurable reconciles one item's durable copy, the next in id
// order after the last run's (a count per item per run would be a MySQL
// query per item): the item, its ledger and the problems, each named for
// it. An item that no longer exists is skipped.
func (a *Auditor) checkItemDurable(ctx context.Context, ids []string) (string, *LedgerRecord, []string, error) {
	if len(ids) == 0 || a.cfg.ItemLedgers == nil {
		return "", nil, nil, nil
	}
	a.mu.Lock()
	i, _ := slices.BinarySearch(ids, a.nextItem)
	if i == len(ids) {
		i = 0
	}
	id := ids[i]
	a.nextItem = id + "\x00" // the next id after this one
	a.mu.Unlock()
	ledger, d, err := a.cfg.ItemLedgers(ctx, id)
	if errors.Is(err, stock.ErrNoItem) {
		return "", nil, nil, nil
	}
	if err != nil {
		return "", nil, nil, fmt.Errorf("%w: item %s: %w", ErrRedis, id, err)
	}
	// The survey compares every item's ledger with its lucky already:
	// only the durable comparison is this one's.
	l, _, durable, err := a.reconcile(ctx, ledger, d)
	if err != nil {
		return "", nil, nil, err
	}
	l.Item = id
	for i, b := range durable {
		durable[i] = "item " + id + ": " + b
	}
	return id, l, durable, nil
}

func (a *Auditor) logDurable(what string, err error) {
	// Debug: the consumer itself warns about the outage, every run would
	// repeat it, and the record shows the comparison missing.
	a.cfg.Logger.Debug("audit: durable orders not compared", "read", what, "err", err)
}

// fields are the ledger's fields in the audit stream's entry.
func (l *LedgerRecord) fields() []any {
	if l == nil {
		return nil
	}
	f := []any{"sale", l.Sale, "orders", l.Orders, "ledger_lucky", l.Lucky, "lag", l.Lag}
	if l.Durable != nil {
		f = append(f, "durable", *l.Durable)
	}
	return f
}
