package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// durable.go: what trimming assumes of MySQL. A trimmed order's only copy
// is its row, so a commit must be on disk when it returns: InnoDB's
// innodb_flush_log_at_trx_commit=1 (the default). At 0 or 2 a crash of the
// MySQL host loses the last second of commits, and with them orders Redis
// no longer holds.

// ErrNotDurable: the server may lose a commit it acknowledged.
var ErrNotDurable = errors.New("orders: mysql may lose acknowledged commits")

// CheckDurable reads the server's innodb_flush_log_at_trx_commit: nil at
// 1, ErrNotDurable otherwise, another error when it cannot be read.
func CheckDurable(ctx context.Context, db *sql.DB) error {
	var v int
	if err := db.QueryRowContext(ctx, "SELECT @@innodb_flush_log_at_trx_commit").Scan(&v); err != nil {
		return fmt.Errorf("orders: read innodb_flush_log_at_trx_commit: %w", err)
	}
	if v != 1 {
		return fmt.Errorf("%w: innodb_flush_log_at_trx_commit is %d, want 1", ErrNotDurable, v)
	}
	return nil
}
