package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

// orders.go: reading the ledger (OrderReader). Each call is one round trip
// that sees the ledger at one instant: orders.lua for orders, a MULTI for
// the counts.

var _ stock.OrderReader = (*Store)(nil)

// Order returns the order with id (an order id is the attempt id of the
// sale that made it), ErrNoOrder if the ledger has none (a sale that did
// not sell, an earlier sale's, an unknown id, or one trimmed once stored:
// TrimLedger) or ErrNoLedger.
func (s *Store) Order(ctx context.Context, id string) (stock.Order, error) {
	if !s.Ledger() {
		return stock.Order{}, stock.ErrNoLedger
	}
	_, orders, err := s.readOrders(ctx, "id", id)
	if err != nil {
		return stock.Order{}, err
	}
	if len(orders) != 1 || orders[0].Trimmed() {
		return stock.Order{}, fmt.Errorf("%w: %q", stock.ErrNoOrder, truncate(id, 80))
	}
	return orders[0], nil
}

// OrdersByUser returns user's orders of the current sale, oldest first,
// from offset, at most limit of them (DefaultOrdersLimit if limit <= 0,
// capped at MaxOrdersLimit), and how many the user has in all. An order
// trimmed from the stream once stored (TrimLedger) is listed by its ID
// and Sale alone (Order.Trimmed): its durable copy has the rest.
func (s *Store) OrdersByUser(ctx context.Context, user string, offset, limit int) ([]stock.Order, int64, error) {
	if !s.Ledger() {
		return nil, 0, stock.ErrNoLedger
	}
	if limit <= 0 {
		limit = DefaultOrdersLimit
	}
	limit = min(limit, MaxOrdersLimit)
	offset = max(offset, 0)
	total, found, err := s.readOrders(ctx, "user", user, offset, limit)
	if err != nil {
		return nil, 0, err
	}
	return found, total, nil
}

// LedgerStats reads the sale id, the orders (XLEN plus the trimmed
// count), the named buyers (HLEN) and lucky in one MULTI, so orders ==
// lucky can be checked on one instant's numbers.
func (s *Store) LedgerStats(ctx context.Context) (stock.LedgerStats, error) {
	if !s.Ledger() {
		return stock.LedgerStats{}, stock.ErrNoLedger
	}
	var sale *redis.StringCmd
	var orders, buyers *redis.IntCmd
	var lucky, trimmed *redis.StringCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		sale = p.Get(ctx, s.keys.Sale)
		orders = p.XLen(ctx, s.keys.Orders)
		trimmed = p.Get(ctx, s.keys.Trimmed)
		buyers = p.HLen(ctx, s.keys.Buyers)
		lucky = p.Get(ctx, s.keys.Lucky)
		return nil
	})
	if err != nil && err != redis.Nil {
		return stock.LedgerStats{}, WrapRedis(ctx, "ledger stats", err)
	}
	st := stock.LedgerStats{Sale: sale.Val(), Orders: orders.Val(), Buyers: buyers.Val()}
	if v := lucky.Val(); v != "" {
		if st.Lucky, err = checkInt(v); err != nil {
			return stock.LedgerStats{}, fmt.Errorf("stock: ledger stats: %w", notInt(s.keys.Lucky))
		}
	}
	if v := trimmed.Val(); v != "" {
		if st.Trimmed, err = checkInt(v); err != nil {
			return stock.LedgerStats{}, fmt.Errorf("stock: ledger stats: %w", notInt(s.keys.Trimmed))
		}
		st.Orders += st.Trimmed
	}
	return st, nil
}

// readOrders runs orders.lua in mode ('id' or 'user'); an order the
// stream does not hold is returned as Trimmed.
func (s *Store) readOrders(ctx context.Context, mode string, args ...any) (int64, []stock.Order, error) {
	res, err := ordersScript.Run(ctx, s.rdb, []string{s.keys.OrderIndex, s.keys.Orders, s.keys.ByUser, s.keys.Sale},
		append([]any{mode}, args...)...).Slice()
	if err != nil && err != redis.Nil {
		return 0, nil, WrapRedis(ctx, "read orders", err)
	}
	if len(res) < 2 {
		return 0, nil, fmt.Errorf("stock: read orders: short reply %v", res)
	}
	total, _ := res[0].(int64)
	sale, _ := res[1].(string)
	orders := make([]stock.Order, 0, len(res)-2)
	for _, e := range res[2:] {
		if id, ok := e.(string); ok {
			orders = append(orders, stock.Order{ID: id, Sale: sale})
			continue
		}
		o, err := parseEntry(e)
		if err != nil {
			return 0, nil, fmt.Errorf("stock: read orders: %w", err)
		}
		orders = append(orders, o)
	}
	return total, orders, nil
}

// parseEntry reads one XRANGE entry, {id, {field, value, ...}}, as an
// Order.
func parseEntry(e any) (stock.Order, error) {
	pair, ok := e.([]any)
	if !ok || len(pair) != 2 {
		return stock.Order{}, fmt.Errorf("bad stream entry %v", e)
	}
	entry, _ := pair[0].(string)
	kv, ok := pair[1].([]any)
	if !ok || len(kv)%2 != 0 {
		return stock.Order{}, fmt.Errorf("bad stream entry %v", e)
	}
	fields := make(map[string]string, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, _ := kv[i].(string)
		v, _ := kv[i+1].(string)
		fields[k] = v
	}
	return OrderFromFields(entry, fields)
}

// OrderFromFields reads an order from its stream entry's id and fields, as
// the ledger scripts write them: what a consumer of the stream (the durable
// orders) decodes with.
func OrderFromFields(entry string, f map[string]string) (stock.Order, error) {
	if err := CheckLedgerFormat(entry, f["format"]); err != nil {
		return stock.Order{}, err
	}
	o := stock.Order{ID: f["id"], Sale: f["sale"], User: f["user"], Key: f["key"], Replica: f["replica"], Entry: entry}
	var err error
	if o.Token, err = strconv.ParseUint(f["token"], 10, 64); err != nil {
		return stock.Order{}, fmt.Errorf("order %s: bad token %q", entry, f["token"])
	}
	if o.StockAfter, err = strconv.ParseInt(f["stock_after"], 10, 64); err != nil {
		return stock.Order{}, fmt.Errorf("order %s: bad stock_after %q", entry, f["stock_after"])
	}
	if u, ok := f["unit"]; ok {
		if o.Unit, err = strconv.ParseInt(u, 10, 64); err != nil || o.Unit < 1 {
			return stock.Order{}, fmt.Errorf("order %s: bad unit %q", entry, u)
		}
	}
	ms, err := strconv.ParseInt(f["time"], 10, 64)
	if err != nil {
		return stock.Order{}, fmt.Errorf("order %s: bad time %q", entry, f["time"])
	}
	o.Time = time.UnixMilli(ms).UTC()
	if o.ID == "" {
		return stock.Order{}, fmt.Errorf("order %s: no id", entry)
	}
	return o, nil
}
