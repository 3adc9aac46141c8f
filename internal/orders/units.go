package orders

import (
	"context"
	"database/sql"
	"fmt"

	"seckill/internal/stock/redisstore"
)

var _ redisstore.DurableUnits = (*Consumer)(nil)

// HighestUnit is the highest unit number committed in the table for
// sale, 0 when it holds none: the durable side of the check a stockd
// makes when it learns the sale (redisstore.DurableUnits). One indexed read
// (UNIQUE (sale, unit)), on the read pool.
func (c *Consumer) HighestUnit(ctx context.Context, sale string) (int64, error) {
	var n sql.NullInt64
	q := "SELECT MAX(unit) FROM `" + c.cfg.Table + "` WHERE sale = ?"
	if err := c.cfg.ReadDB.QueryRowContext(ctx, q, sale).Scan(&n); err != nil {
		return 0, fmt.Errorf("orders: read the highest unit of sale %s: %w", sale, err)
	}
	return n.Int64, nil
}
