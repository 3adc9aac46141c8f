package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// orderscheck.go: a check of the sale Redis holds that does not go through
// the witness. The witness catches a Redis that went back while the
// witness did not; when both come back from the same night's backups and
// every stockd restarts, each agrees with the other and the units sold
// since the backup would be sold again. The durable orders (orders.durable:
// MySQL, restored or not on its own schedule) number each order's unit
// (ledger.lua: unit = lucky after the sale), so a Redis that holds fewer
// units sold than MySQL committed for the same sale id went back.
//
// It runs whenever a process learns the sale (learnEpoch): at the first
// sale after a start and after a reset elsewhere. It assumes the orders
// database is not restored to a point before Redis's: then it holds less
// and sees nothing (the witness's generation is the check for that).

// ErrOrdersAhead: the durable orders hold a unit of the sale that Redis
// does not count as sold: Redis went back (restored from a backup
// together with the witness, or on its own without a witness). The sale
// halts with this reason, which its text starts with, until an operator
// reconciles (the runbook).
var ErrOrdersAhead = errors.New("orders_ahead")

// DurableUnits reads the durable orders: the highest unit number committed
// for a sale id (the ledger's Keys.Sale), 0 when it holds none.
type DurableUnits interface {
	HighestUnit(ctx context.Context, sale string) (int64, error)
}

// WithDurableUnits returns the store checking, whenever it learns the
// sale, that Redis counts every unit u holds committed for it (nil: no
// check). It applies to a store with the order ledger only, whose sales
// number their units.
func (s *Store) WithDurableUnits(u DurableUnits) *Store {
	n := s.WithReplicaAcks(s.acks)
	for _, seg := range n.segs {
		seg.units = u
	}
	return n
}

// checkUnits compares Redis's units sold with the durable orders' highest
// for the sale Redis holds. MySQL is read first and Redis after, so a sale
// committed in between cannot make a healthy Redis look behind; a reset in
// between (another sale id) skips the check, which the next learning of
// the sale makes. A durable store that does not answer skips it too: the
// orders are written after the 200 and never stop a sale (DurableUnits
// says so where it is built).
func (s *Store) checkUnits(ctx context.Context) error {
	if s.units == nil || !s.Ledger() {
		return nil
	}
	sale, err := s.saleID(ctx)
	if err != nil || sale == "" {
		return err
	}
	highest, err := s.units.HighestUnit(ctx, sale)
	if err != nil || highest <= 0 {
		return nil
	}
	var now, lucky *redis.StringCmd
	if _, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Get(ctx, s.keys.Sale)
		lucky = p.Get(ctx, s.keys.Lucky)
		return nil
	}); err != nil && err != redis.Nil {
		return WrapRedis(ctx, "read the units sold", err)
	}
	if now.Val() != sale {
		return nil
	}
	sold := int64(0)
	if v := lucky.Val(); v != "" {
		if sold, err = checkInt(v); err != nil {
			return fmt.Errorf("stock: read the units sold: %w", err)
		}
	}
	if highest <= sold {
		return nil
	}
	why := fmt.Sprintf("%s: the durable orders hold unit %d of sale %s, redis counts %d sold: redis went back (a backup restored with the witness, or without one)",
		ErrOrdersAhead, highest, sale, sold)
	return s.halt(ctx, "learn the sale", why)
}

// saleID is the ledger's id of the sale Redis holds, "" when none.
func (s *Store) saleID(ctx context.Context) (string, error) {
	sale, err := s.rdb.Get(ctx, s.keys.Sale).Result()
	if err == redis.Nil {
		return "", nil
	}
	if err != nil {
		return "", WrapRedis(ctx, "read the sale id", err)
	}
	return sale, nil
}
