package witness

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"seckill/internal/stock"
)

// Table is the MySQL table that holds every MySQL register, one row each.
const Table = "stock_witness"

// The limits of a row: name is a VARCHAR(191) (the longest utf8mb4 key
// InnoDB indexes in every row format), value a MEDIUMBLOB.
const (
	maxNameChars = 191
	maxValueLen  = 1<<24 - 1
)

// schema creates Table. The name compares byte for byte (utf8mb4_bin), not
// by the server's default collation, which would make "Stock" and "stock"
// one register.
const schema = `CREATE TABLE IF NOT EXISTS ` + Table + ` (
	name    VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
	value   MEDIUMBLOB NOT NULL,
	version BIGINT     NOT NULL
) ENGINE=InnoDB`

const (
	getSQL    = `SELECT value FROM ` + Table + ` WHERE name = ?`
	insertSQL = `INSERT IGNORE INTO ` + Table + ` (name, value, version) VALUES (?, ?, 1)`
	updateSQL = `UPDATE ` + Table + ` SET value = ?, version = version + 1 WHERE name = ? AND value = ?`
)

// MySQL is a stock.Register in one row of Table, keyed by name. Its Put
// compares the value, not the version column (which counts stored Puts,
// for people reading the table): a restored backup takes that count back.
type MySQL struct {
	db   *sql.DB
	name string
	bad  error // the name cannot be a key of Table
}

var _ stock.Register = (*MySQL)(nil)

// NewMySQL returns the register in name's row of Table on db. It uses db
// and does not close it; Init creates the table. The name must be valid
// UTF-8 of at most 191 characters with no trailing space (the column
// ignores trailing spaces when it compares); Init, Get and Put report an
// error for one that is not.
func NewMySQL(db *sql.DB, name string) *MySQL {
	m := &MySQL{db: db, name: name}
	switch {
	case !utf8.ValidString(name):
		m.bad = fmt.Errorf("witness: mysql register name %q is not valid UTF-8", name)
	case utf8.RuneCountInString(name) > maxNameChars:
		m.bad = fmt.Errorf("witness: mysql register name %q is longer than %d characters", name, maxNameChars)
	case strings.TrimRight(name, " ") != name:
		m.bad = fmt.Errorf("witness: mysql register name %q ends with a space", name)
	}
	return m
}

// Name is "mysql stock_witness/" and the name.
func (m *MySQL) Name() string { return "mysql " + Table + "/" + m.name }

// Init creates Table if it does not exist.
func (m *MySQL) Init(ctx context.Context) error {
	if m.bad != nil {
		return m.bad
	}
	if _, err := m.db.ExecContext(ctx, schema); err != nil {
		return m.wrap(ctx, "create table", err)
	}
	return nil
}

// Get reads the row's value, or nil when there is none.
func (m *MySQL) Get(ctx context.Context) ([]byte, error) {
	if m.bad != nil {
		return nil, m.bad
	}
	var value []byte
	err := m.db.QueryRowContext(ctx, getSQL, m.name).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, m.wrap(ctx, "get", err)
	}
	if value == nil {
		value = []byte{} // stored, but empty: not the nil of "absent"
	}
	return value, nil
}

// Put writes the row if its value is still expect: with nil, an INSERT
// IGNORE that a row already there turns into nothing; otherwise an UPDATE
// guarded by the value. Either is one autocommitted statement, and either
// stored exactly when it affected one row. The UPDATE always changes the
// row (the version column moves), so its count is 1 whether the driver
// counts changed or matched rows.
func (m *MySQL) Put(ctx context.Context, value, expect []byte) (bool, error) {
	if m.bad != nil {
		return false, m.bad
	}
	// INSERT IGNORE would store a value too long for the column cut short,
	// with a warning: refuse it before it is sent.
	if len(value) > maxValueLen {
		return false, fmt.Errorf("witness: mysql put %s: value of %d bytes exceeds MEDIUMBLOB's %d", m.name, len(value), maxValueLen)
	}
	if value == nil {
		value = []byte{} // NOT NULL: an empty value, not SQL NULL
	}
	var (
		res sql.Result
		err error
	)
	if expect == nil {
		res, err = m.db.ExecContext(ctx, insertSQL, m.name, value)
	} else {
		res, err = m.db.ExecContext(ctx, updateSQL, value, m.name, expect)
	}
	if err != nil {
		return false, m.wrap(ctx, "put", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, m.wrap(ctx, "put", err)
	}
	return n == 1, nil
}

// wrap wraps an error from the driver: stock.ErrRegisterUnavailable when
// the server did not answer, and the caller's context error as well when
// that context has ended.
func (m *MySQL) wrap(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		if !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		return fmt.Errorf("witness: mysql %s %s: %w: %w", op, m.name, stock.ErrRegisterUnavailable, err)
	}
	if mysqlUnavailable(err) {
		return fmt.Errorf("witness: mysql %s %s: %w: %w", op, m.name, stock.ErrRegisterUnavailable, err)
	}
	return fmt.Errorf("witness: mysql %s %s: %w", op, m.name, err)
}

// MySQL error numbers that mean the server did not do the statement for
// want of the server, not because of the statement.
const (
	errTooManyConnections = 1040
	errServerShutdown     = 1053
	errLockWaitTimeout    = 1205 // innodb_lock_wait_timeout: someone held the row
	errConnectionKilled   = 1927 // MariaDB: KILL CONNECTION of this session
	errStatementTimeout   = 1969 // MariaDB: max_statement_time
	errIdleTimeout        = 4031 // MySQL 8.0.24+: wait_timeout closed the session
)

// mysqlUnavailable reports whether err means the server did not answer
// (connection refused, reset or lost, a timeout, a shutdown), as opposed
// to answering with an SQL error.
func mysqlUnavailable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case errTooManyConnections, errServerShutdown, errLockWaitTimeout,
			errConnectionKilled, errStatementTimeout, errIdleTimeout:
			return true
		}
		return false
	}
	for _, e := range []error{
		context.DeadlineExceeded, driver.ErrBadConn, mysql.ErrInvalidConn,
		io.EOF, io.ErrUnexpectedEOF,
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne)
}
