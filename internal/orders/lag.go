package orders

import (
	"context"
	"fmt"
	"strings"
)

// Lag is the number of stream entries the group has not stored yet:
// undelivered plus pending (see the package doc).
func (c *Consumer) Lag(ctx context.Context) (int64, error) {
	rdb, stream := c.cfg.Redis, c.cfg.Stream
	groups, err := rdb.XInfoGroups(ctx, stream).Result()
	if isNoSuchKey(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("orders: lag: %w", err)
	}
	for _, g := range groups {
		if g.Name != c.cfg.Group {
			continue
		}
		if g.Lag >= 0 {
			return g.Lag + g.Pending, nil
		}
		n, err := c.countAfter(ctx, g.LastDeliveredID)
		if err != nil {
			return 0, err
		}
		return n + g.Pending, nil
	}
	n, err := rdb.XLen(ctx, stream).Result()
	if err != nil {
		return 0, fmt.Errorf("orders: lag: %w", err)
	}
	return n, nil
}

// countAfter counts the entries after id, a page at a time: the fallback
// when Redis cannot compute a group's lag.
func (c *Consumer) countAfter(ctx context.Context, id string) (int64, error) {
	const page = 1000
	var n int64
	for {
		msgs, err := c.cfg.Redis.XRangeN(ctx, c.cfg.Stream, "("+id, "+", page).Result()
		if err != nil {
			return 0, fmt.Errorf("orders: lag: %w", err)
		}
		n += int64(len(msgs))
		if len(msgs) < page {
			return n, nil
		}
		id = msgs[len(msgs)-1].ID
	}
}

// Durable is the number of rows stored for sale.
func (c *Consumer) Durable(ctx context.Context, sale string) (int64, error) {
	var n int64
	err := c.cfg.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+c.cfg.Table+"` WHERE sale = ?", sale).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("orders: durable: %w", err)
	}
	return n, nil
}

// Redis answers these as plain errors; the prefixes are the protocol's.
func isNoGroup(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOGROUP")
}

func isBusyGroup(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "BUSYGROUP")
}

func isNoSuchKey(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "ERR no such key")
}
