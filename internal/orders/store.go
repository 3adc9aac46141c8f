package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// errRefused is the dead-letter reason of an order a unique key of the
// sale refused (reportConflicts logs which).
var errRefused = errors.New("refused: the sale already has an order for its unit, key or limited buyer (sold twice)")

// outcome is what storing one batch did, added to Stats after the commit.
type outcome struct {
	inserted, duplicates, conflicts, malformed int64
}

// store writes msgs in one transaction: a multi-row insert of the orders
// and the dead letters of the malformed ones. After it returns nil every
// entry of msgs may be acknowledged; after an error none is stored.
func (c *Consumer) store(ctx context.Context, msgs []redis.XMessage) (outcome, error) {
	var (
		rows    []row
		dead    []dead
		refused []row // turned away by a unique key other than the id's
		out     outcome
		table   = c.cfg.Table
	)
	byEntry := make(map[string]redis.XMessage, len(msgs))
	for _, m := range msgs {
		byEntry[m.ID] = m
		r, err := parse(m)
		if err != nil {
			dead = append(dead, deadLetter(m, err))
			continue
		}
		rows = append(rows, r)
	}
	tx, err := c.cfg.DB.BeginTx(ctx, nil)
	if err != nil {
		return out, fmt.Errorf("orders: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if len(rows) > 0 {
		res, err := tx.ExecContext(ctx, insertSQL(table, c.cfg.Item != "", len(rows)), insertArgs(c.cfg.Item, rows)...)
		if err != nil {
			return out, fmt.Errorf("orders: insert %d rows: %w", len(rows), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return out, fmt.Errorf("orders: insert: %w", err)
		}
		out.inserted, out.duplicates = n, int64(len(rows))-n
		if out.duplicates > 0 {
			if refused, err = c.refused(ctx, tx, rows); err != nil {
				return out, err
			}
			out.conflicts = int64(len(refused))
		}
	}
	// A refused order is acknowledged with its batch, and the ledger may
	// then trim it from Redis: its entry is kept here, so that MySQL holds
	// every entry the group acknowledged.
	malformed := len(dead)
	for _, r := range refused {
		dead = append(dead, deadLetter(byEntry[r.entry], errRefused))
	}
	for _, d := range dead {
		q, args := "INSERT INTO `"+table+"_dead` (entry, reason, raw) VALUES (?, ?, ?)", []any{d.entry, d.reason, d.raw}
		if c.cfg.Item != "" {
			q, args = "INSERT INTO `"+table+"_dead` (item, entry, reason, raw) VALUES (?, ?, ?, ?)", append([]any{c.cfg.Item}, args...)
		}
		_, err := tx.ExecContext(ctx, q+" ON DUPLICATE KEY UPDATE entry = entry", args...)
		if err != nil {
			return out, fmt.Errorf("orders: dead letter: %w", err)
		}
	}
	if err = tx.Commit(); err != nil {
		return out, fmt.Errorf("orders: commit: %w", err)
	}
	c.reportConflicts(ctx, refused)
	for _, d := range dead[:malformed] {
		c.log.Error("orders: malformed ledger entry, dead-lettered and acknowledged",
			"table", table+"_dead", "entry", d.entry, "reason", d.reason)
	}
	out.malformed = int64(malformed)
	return out, nil
}

// insertSQL inserts n rows; a row whose id (or, with the unique buyer key,
// sale and user) is already there changes nothing and counts 0 affected
// rows, so RowsAffected is the number inserted. Unlike INSERT IGNORE it
// keeps strict mode's errors: nothing is silently truncated.
// With item, the rows go to an items' table (EnsureItemsSchema), item
// first.
func insertSQL(table string, item bool, n int) string {
	var b strings.Builder
	cols, marks := "id, sale, `user`, idem_key, token, replica, stock_after, unit, sold_at, entry, format", "(?,?,?,?,?,?,?,?,?,?,?)"
	if item {
		cols, marks = "item, "+cols, "(?,?,?,?,?,?,?,?,?,?,?,?)"
	}
	b.WriteString("INSERT INTO `" + table + "` (" + cols + ") VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(marks)
	}
	b.WriteString(" ON DUPLICATE KEY UPDATE id = id")
	return b.String()
}

// insertArgs are rows' values for insertSQL, each led by item if it is
// not "".
func insertArgs(item string, rows []row) []any {
	args := make([]any, 0, 12*len(rows))
	for _, r := range rows {
		unit := sql.NullInt64{Int64: r.unit, Valid: r.unit > 0}
		if item != "" {
			args = append(args, item)
		}
		args = append(args, r.id, r.sale, nullIfEmpty(r.user), nullIfEmpty(r.key),
			r.token, r.replica, r.stockAfter, unit, r.soldAt, r.entry, RowFormat)
	}
	return args
}

func nullIfEmpty(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// refused returns the rows whose id is not in the table after the insert:
// the ones a unique key of the sale turned away, not redeliveries.
func (c *Consumer) refused(ctx context.Context, tx *sql.Tx, rows []row) ([]row, error) {
	q := "SELECT id FROM `" + c.cfg.Table + "` WHERE id IN (?" + strings.Repeat(",?", len(rows)-1) + ")"
	args := make([]any, len(rows))
	for i, r := range rows {
		args[i] = r.id
	}
	rs, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("orders: find refused rows: %w", err)
	}
	defer rs.Close()
	found := make(map[string]bool, len(rows))
	for rs.Next() {
		var id string
		if err := rs.Scan(&id); err != nil {
			return nil, fmt.Errorf("orders: find refused rows: %w", err)
		}
		found[id] = true
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("orders: find refused rows: %w", err)
	}
	var out []row
	for _, r := range rows {
		if !found[r.id] {
			out = append(out, r)
		}
	}
	return out, nil
}

// reportConflicts logs the orders a unique key of the sale refused, each
// with the row that holds its place: a unit sold twice (UNIQUE (sale,
// unit): a stock Redis that went back in time and sold it again), one
// buyer's key sold twice (UNIQUE (sale, user, idem_key)), or a second
// unit to a buyer with per-user limit 1 (UNIQUE (sale, user)).
func (c *Consumer) reportConflicts(ctx context.Context, refused []row) {
	for _, r := range refused {
		why, holder := "a buyer has a second order in one sale with per-user limit 1 (oversold)", ""
		find := func(q string, args ...any) bool {
			return c.cfg.DB.QueryRowContext(ctx, "SELECT id FROM `"+c.cfg.Table+"` WHERE "+q+" LIMIT 1", args...).Scan(&holder) == nil
		}
		switch {
		case r.unit > 0 && find("sale = ? AND unit = ?", r.sale, r.unit):
			why = "a unit has a second order (sold twice: the stock Redis lost acknowledged sales and sold them again)"
		case r.key != "" && find("sale = ? AND `user` <=> ? AND idem_key = ?", r.sale, nullIfEmpty(r.user), r.key):
			why = "an idempotency key has a second order (sold twice)"
		}
		c.log.Error("orders: "+why+"; not stored",
			"sale", r.sale, "user", r.user, "key", r.key, "unit", r.unit, "order", r.id, "held_by", holder, "entry", r.entry)
	}
}
