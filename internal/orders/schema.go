package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/go-sql-driver/mysql"
)

// MySQL error numbers the schema tolerates: a concurrent replica already
// added (1061) or dropped (1091) the index, and the one that explains a
// failed UNIQUE (1062).
const (
	errDupColumn    = 1060
	errDupKeyName   = 1061
	errCantDropKey  = 1091
	errDupEntry     = 1062
	uniqueBuyerName = "sale_user_once"
)

// The key columns are ASCII compared byte for byte (ascii_bin): order,
// sale and idempotency ids and buyers are printable ASCII without spaces
// (parse refuses anything else), so "U1" and "u1" are two buyers and pad
// space never matters. sold_at is UTC (in the DSN's loc, UTC by
// default). user and idem_key are NULL when absent, so UNIQUE (sale, user)
// never binds anonymous buyers.
const ordersDDL = "CREATE TABLE IF NOT EXISTS `%s` (" + `
	id          VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	sale        VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	` + "`user`" + `      VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NULL,
	idem_key    VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
	token       BIGINT UNSIGNED NOT NULL,
	replica     VARCHAR(64)  CHARACTER SET utf8mb4 NOT NULL,
	stock_after BIGINT       NOT NULL,
	unit        BIGINT       NULL,
	sold_at     DATETIME(3)  NOT NULL,
	entry       VARCHAR(40)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	format      TINYINT UNSIGNED NOT NULL DEFAULT 1,
	PRIMARY KEY (id),
	KEY sale_user (sale, ` + "`user`" + `),
	UNIQUE KEY ` + uniqueUnitName + ` (sale, unit),
	UNIQUE KEY ` + uniqueKeyName + ` (sale, ` + "`user`" + `, idem_key)
) ENGINE=InnoDB`

// The sale's unique keys besides the id: one order per unit (its number,
// unit, is the lucky count its sale made), one per buyer's idempotency
// key. NULLs never collide, so an anonymous buyer's orders (user NULL)
// are not bound by the key's, and entries written before units were
// numbered (unit NULL) not by the unit's. Tables made before these keys
// get them (and the unit column) at start: migrations below.
//
// format is the row's format (RowFormat): a reader refuses a row of a
// newer one (read.go). Rows from before it are format 1, its default.
const (
	uniqueUnitName = "sale_unit_once"
	uniqueKeyName  = "sale_key_once"
)

// migrations bring a table made before these keys up to date: each adds
// what schemaHas does not find.
var migrations = []struct{ what, kind, name, ddl string }{
	{"unit column", "column", "unit", "ADD COLUMN unit BIGINT NULL AFTER stock_after"},
	{"UNIQUE (sale, unit)", "index", uniqueUnitName, "ADD UNIQUE KEY " + uniqueUnitName + " (sale, unit)"},
	{"UNIQUE (sale, user, idem_key)", "index", uniqueKeyName, "ADD UNIQUE KEY " + uniqueKeyName + " (sale, `user`, idem_key)"},
	// Rows from before formats (0.9.0, which writes none) are format 1:
	// the default, so 0.9.0's inserts, which name no format, stay rows
	// of format 1 while it runs beside this build.
	{"format column", "column", "format", "ADD COLUMN format TINYINT UNSIGNED NOT NULL DEFAULT 1 AFTER entry"},
}

// migrate runs the migrations table lacks, and says so in log (if not
// nil): a table changed under a running older release is news for its
// operator. Another replica may run one at the same time (1060 duplicate
// column, 1061 duplicate key name): done either way.
func migrate(ctx context.Context, db *sql.DB, table string, log *slog.Logger) error {
	for _, m := range migrations {
		has, err := schemaHas(ctx, db, table, m.kind, m.name)
		if err != nil {
			return err
		}
		if has {
			continue
		}
		_, err = db.ExecContext(ctx, "ALTER TABLE `"+table+"` "+m.ddl)
		if isMySQL(err, errDupEntry) {
			return fmt.Errorf("orders: add the %s to %s: the table already holds two orders for one of them (sold twice): %w", m.what, table, err)
		}
		if err != nil && !isMySQL(err, errDupKeyName) && !isMySQL(err, errDupColumn) {
			return fmt.Errorf("orders: add the %s to %s: %w", m.what, table, err)
		}
		if log != nil {
			log.Info("durable orders: table migrated", "table", table, "added", m.what)
		}
	}
	return nil
}

// schemaHas reports whether table has the column or index (kind) name.
func schemaHas(ctx context.Context, db *sql.DB, table, kind, name string) (bool, error) {
	q := "SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? AND index_name = ?"
	if kind == "column" {
		q = "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?"
	}
	var n int
	if err := db.QueryRowContext(ctx, q, table, name).Scan(&n); err != nil {
		return false, fmt.Errorf("orders: read the %s %s of %s: %w", kind, name, table, err)
	}
	return n > 0, nil
}

// The dead-letter table: entries that could not become rows (see the
// package doc), one row per stream entry id.
const deadDDL = "CREATE TABLE IF NOT EXISTS `%s_dead` (" + `
	entry     VARCHAR(40)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	reason    VARCHAR(255)  CHARACTER SET utf8mb4 NOT NULL,
	raw       TEXT          CHARACTER SET utf8mb4 NOT NULL,
	stored_at DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
	PRIMARY KEY (entry)
) ENGINE=InnoDB`

// The items' tables (EnsureItemsSchema) are the orders table with the
// item's id in a column of its own, and dead letters keyed by item and
// entry: stream entry ids are per stream, so two items' entries can share
// one. They never carry UNIQUE (sale, user): each item has a per-user
// limit of its own, which its sale script enforces.
const itemColumnDDL = "ADD COLUMN item VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL FIRST, ADD KEY item_sale (item, sale)"

const itemsDeadDDL = "CREATE TABLE IF NOT EXISTS `%s_dead` (" + `
	item      VARCHAR(32)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	entry     VARCHAR(40)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	reason    VARCHAR(255)  CHARACTER SET utf8mb4 NOT NULL,
	raw       TEXT          CHARACTER SET utf8mb4 NOT NULL,
	stored_at DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
	PRIMARY KEY (item, entry)
) ENGINE=InnoDB`

// EnsureItemsSchema creates the items' orders table and its dead-letter
// table (table + "_dead"), as EnsureSchema does the default sale's, with
// an item column and without UNIQUE (sale, user). It is idempotent and
// safe to run from every replica at once.
func EnsureItemsSchema(ctx context.Context, db *sql.DB, table string) error {
	return ensureItemsSchema(ctx, db, table, nil)
}

// ensureItemsSchema is EnsureItemsSchema, logging its migrations to log.
func ensureItemsSchema(ctx context.Context, db *sql.DB, table string, log *slog.Logger) error {
	if !identifier.MatchString(table) {
		return fmt.Errorf("%w: table %q is not a plain identifier of at most 59 characters", ErrConfig, table)
	}
	has, err := schemaHas(ctx, db, table, "column", "item")
	if err != nil {
		return err
	}
	if !has {
		// CREATE … then ADD COLUMN: one DDL for both tables' columns. A
		// table made by another replica meanwhile has the column (1060).
		if _, err := db.ExecContext(ctx, fmt.Sprintf(ordersDDL, table)); err != nil {
			return fmt.Errorf("orders: create table: %w", err)
		}
		_, err := db.ExecContext(ctx, "ALTER TABLE `"+table+"` "+itemColumnDDL)
		if err != nil && !isMySQL(err, errDupColumn) && !isMySQL(err, errDupKeyName) {
			return fmt.Errorf("orders: add the item column to %s: %w", table, err)
		}
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf(itemsDeadDDL, table)); err != nil {
		return fmt.Errorf("orders: create table: %w", err)
	}
	return migrate(ctx, db, table, log)
}

// EnsureSchema creates table and its dead-letter table (table + "_dead")
// if they do not exist, and adds or drops UNIQUE (sale, user) to match
// uniqueBuyer, so a replica started with another per-user limit adapts
// the table. It is idempotent and safe to run from every replica at once.
// Adding the unique key fails (wrapped MySQL error 1062) when a buyer
// already has two rows in one sale.
func EnsureSchema(ctx context.Context, db *sql.DB, table string, uniqueBuyer bool) error {
	return ensureSchema(ctx, db, table, uniqueBuyer, nil)
}

// ensureSchema is EnsureSchema, logging its migrations to log.
func ensureSchema(ctx context.Context, db *sql.DB, table string, uniqueBuyer bool, log *slog.Logger) error {
	if !identifier.MatchString(table) {
		return fmt.Errorf("%w: table %q is not a plain identifier of at most 59 characters", ErrConfig, table)
	}
	for _, ddl := range []string{ordersDDL, deadDDL} {
		if _, err := db.ExecContext(ctx, fmt.Sprintf(ddl, table)); err != nil {
			return fmt.Errorf("orders: create table: %w", err)
		}
	}
	if err := migrate(ctx, db, table, log); err != nil {
		return err
	}
	has, err := schemaHas(ctx, db, table, "index", uniqueBuyerName)
	if err != nil {
		return err
	}
	switch {
	case uniqueBuyer && !has:
		_, err = db.ExecContext(ctx, fmt.Sprintf("ALTER TABLE `%s` ADD UNIQUE KEY %s (sale, `user`)", table, uniqueBuyerName))
		if isMySQL(err, errDupEntry) {
			return fmt.Errorf("orders: UNIQUE (sale, user) on %s: a buyer already has two orders in one sale (delete those sales' rows or keep the limit above 1): %w", table, err)
		}
		if isMySQL(err, errDupKeyName) {
			err = nil
		}
	case !uniqueBuyer && has:
		_, err = db.ExecContext(ctx, fmt.Sprintf("ALTER TABLE `%s` DROP KEY %s", table, uniqueBuyerName))
		if isMySQL(err, errCantDropKey) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("orders: unique buyer key: %w", err)
	}
	return nil
}

// isMySQL reports whether err is the server's error number code.
func isMySQL(err error, code uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == code
}
