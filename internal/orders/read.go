package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// MaxRead bounds the ids of one Orders call: a page of GET /orders.
const MaxRead = redisstore.MaxOrdersLimit

// ErrTooManyIDs: Orders was asked for more than MaxRead ids.
var ErrTooManyIDs = errors.New("orders: too many ids to read")

// Orders reads the orders of sale with ids from the table, in the order
// of ids; an id without a row of that sale is left out. It is how the
// orders trimmed from the ledger in Redis once stored (Config.TrimEvery)
// are still read by id and by buyer. At most MaxRead ids.
func (c *Consumer) Orders(ctx context.Context, sale string, ids []string) ([]stock.Order, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if len(ids) > MaxRead {
		return nil, fmt.Errorf("%w: %d, at most %d", ErrTooManyIDs, len(ids), MaxRead)
	}
	q := "SELECT id, sale, `user`, idem_key, token, replica, stock_after, unit, sold_at, entry, format FROM `" + c.cfg.Table +
		"` WHERE sale = ? AND id IN (?" + strings.Repeat(",?", len(ids)-1) + ")"
	args := make([]any, 0, len(ids)+1)
	args = append(args, sale)
	for _, id := range ids {
		args = append(args, id)
	}
	rs, err := c.cfg.ReadDB.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("orders: read orders: %w", err)
	}
	defer rs.Close()
	found := make(map[string]stock.Order, len(ids))
	for rs.Next() {
		var (
			o         stock.Order
			user, key sql.NullString
			unit      sql.NullInt64
			at        soldAt
			format    int
		)
		if err := rs.Scan(&o.ID, &o.Sale, &user, &key, &o.Token, &o.Replica, &o.StockAfter, &unit, &at, &o.Entry, &format); err != nil {
			return nil, fmt.Errorf("orders: read orders: %w", err)
		}
		if format > RowFormat {
			return nil, fmt.Errorf("%w: row %s of %s is format %d, this stockd reads up to %d (a newer replica stored it; upgrade this one)",
				stock.ErrOrderFormat, o.ID, c.cfg.Table, format, RowFormat)
		}
		o.User, o.Key, o.Unit, o.Time = user.String, key.String, unit.Int64, time.Time(at)
		found[o.ID] = o
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("orders: read orders: %w", err)
	}
	out := make([]stock.Order, 0, len(found))
	for _, id := range ids {
		if o, ok := found[id]; ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// soldAt scans sold_at, UTC (see schema.go), with or without the DSN's
// parseTime.
type soldAt time.Time

func (s *soldAt) Scan(v any) error {
	switch v := v.(type) {
	case time.Time:
		*s = soldAt(v.UTC())
		return nil
	case []byte:
		t, err := time.ParseInLocation("2006-01-02 15:04:05.999999", string(v), time.UTC)
		if err != nil {
			return fmt.Errorf("sold_at %q: %w", v, err)
		}
		*s = soldAt(t)
		return nil
	}
	return fmt.Errorf("sold_at: unexpected %T", v)
}
