package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"seckill/internal/backoff"
	"seckill/internal/stock/redisstore"
)

// ends.go: each reserved order's end in MySQL (orders.payment_window with
// orders.durable; docs/reservations.md, "Durable states"). The order
// itself is a row of the orders table, stored from the ledger like any
// other: an order with no row here is reserved. Its end (paid, cancelled
// or expired) is a row of Table + "_ends", written two ways:
//
//   - a payment answered paid is written before its answer (Ends.Record,
//     from the handler): paid is money, and its 200 promises MySQL holds
//     it;
//   - every end, that one too, is copied from the stock Redis's set of
//     ends not yet stored (redisstore.Store.Ended), which the script that
//     decides an end writes to, by a StateSyncer in every replica.
//
// Both insert the same row, so either may come first and a second is a
// no-op. Updates only move forward: an end never replaces another (a row
// is inserted or left as it is), so a copy delivered late, twice or out of
// order changes nothing. An end that differs from the one stored, or a
// payment id stored for another order (UNIQUE payment_once), is a conflict
// — a stock Redis that lost an end and decided the order again — logged,
// counted, and not stored.

// The ends table. An end's row never changes once inserted.
const endsDDL = "CREATE TABLE IF NOT EXISTS `%s_ends` (" + `
	id         VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	state      VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	payment_id VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
	ended_at   DATETIME(3)  NOT NULL,
	PRIMARY KEY (id),
	UNIQUE KEY payment_once (payment_id)
) ENGINE=InnoDB`

// ErrEndConflict: MySQL holds another end for the order, or the payment
// id paid another order. Nothing was stored.
var ErrEndConflict = errors.New("orders: mysql holds another end")

// Ends stores orders' ends in Table + "_ends". Safe for concurrent use.
type Ends struct {
	db    *sql.DB
	base  string // the orders table
	table string // base + "_ends"
	log   *slog.Logger
	ready atomic.Bool // the table exists

	stored, conflicts atomic.Int64
}

// NewEnds returns the ends of the orders table table in db.
func NewEnds(db *sql.DB, table string, log *slog.Logger) (*Ends, error) {
	if table == "" {
		table = DefaultTable
	}
	if !identifier.MatchString(table) {
		return nil, fmt.Errorf("%w: table %q is not a plain identifier of at most 59 characters", ErrConfig, table)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Ends{db: db, base: table, table: table + "_ends", log: log}, nil
}

// EnsureSchema creates the ends table if it does not exist.
func (s *Ends) EnsureSchema(ctx context.Context) error {
	if s.ready.Load() {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf(endsDDL, s.base)); err != nil {
		return fmt.Errorf("orders: create the ends table: %w", err)
	}
	s.ready.Store(true)
	return nil
}

// EndStats is what Ends stored and refused since it was made.
type EndStats struct {
	Stored    int64 // rows inserted (a copy of an end already stored is not counted)
	Conflicts int64 // ends refused: another end, or the payment id's other order
}

// Stats reads the counts.
func (s *Ends) Stats() EndStats {
	return EndStats{Stored: s.stored.Load(), Conflicts: s.conflicts.Load()}
}

// Record stores ends in one transaction. It returns nil once every end is
// in MySQL, or was one MySQL already held; an end refused (a conflict) is
// logged and counted, and errors.Is(err, ErrEndConflict) when every other
// end was stored. Any other error stores nothing.
func (s *Ends) Record(ctx context.Context, ends []redisstore.End) error {
	if err := s.EnsureSchema(ctx); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("orders: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var stored int64
	var refused []error
	for _, e := range ends {
		n, err := s.insert(ctx, tx, e)
		if err != nil {
			return err
		}
		if n == 1 {
			stored++
			continue
		}
		if err := s.held(ctx, tx, e); err != nil {
			refused = append(refused, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("orders: commit %d ends: %w", len(ends), err)
	}
	s.stored.Add(stored)
	for _, err := range refused {
		s.conflicts.Add(1)
		s.log.Error("orders: an end not stored: the stock Redis decided an order again (it lost state)", "err", err)
	}
	return errors.Join(refused...)
}

// insert adds e's row, or leaves the one that holds its id or payment id:
// 1 inserted, 0 left.
func (s *Ends) insert(ctx context.Context, tx *sql.Tx, e redisstore.End) (int64, error) {
	res, err := tx.ExecContext(ctx, "INSERT INTO `"+s.table+"` (id, state, payment_id, ended_at) VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE id = id",
		e.Order, e.State, nullIfEmpty(e.PaymentID), e.At.UTC())
	if err != nil {
		return 0, fmt.Errorf("orders: store the end of order %s: %w", e.Order, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("orders: store the end of order %s: %w", e.Order, err)
	}
	return n, nil
}

// held checks that the row left in e's place is e itself (a copy stored
// before): nil, or the conflict.
func (s *Ends) held(ctx context.Context, tx *sql.Tx, e redisstore.End) error {
	var state string
	var pid sql.NullString
	err := tx.QueryRowContext(ctx, "SELECT state, payment_id FROM `"+s.table+"` WHERE id = ?", e.Order).Scan(&state, &pid)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// Not the id: the payment id's row holds the place.
		var other string
		if err := tx.QueryRowContext(ctx, "SELECT id FROM `"+s.table+"` WHERE payment_id = ?", e.PaymentID).Scan(&other); err != nil {
			return fmt.Errorf("orders: read the end of order %s: %w", e.Order, err)
		}
		return fmt.Errorf("%w: payment %s paid order %s in MySQL, not order %s", ErrEndConflict, e.PaymentID, other, e.Order)
	case err != nil:
		return fmt.Errorf("orders: read the end of order %s: %w", e.Order, err)
	case state != e.State || pid.String != e.PaymentID:
		return fmt.Errorf("%w: order %s is %s in MySQL (payment %q), not %s (payment %q)", ErrEndConflict, e.Order, state, pid.String, e.State, e.PaymentID)
	}
	return nil
}

// EndSource is where a StateSyncer reads the ends MySQL does not hold yet
// (redisstore.Store).
type EndSource interface {
	Ended(ctx context.Context, n int) ([]redisstore.End, error)
	Synced(ctx context.Context, ends []redisstore.End) error
}

// Timing of a StateSyncer: a batch of at most syncBatch ends, and when
// none is waiting, a look every syncPoll.
const (
	syncBatch = 100
	syncPoll  = 200 * time.Millisecond
)

// StateSyncer copies the ends src does not hold in MySQL yet into ends.
// Every replica runs one: two copying one end store it once.
type StateSyncer struct {
	src  EndSource
	ends *Ends
	log  *slog.Logger
	poll time.Duration
}

// NewStateSyncer copies src's ends into ends every poll (syncPoll if 0)
// while none is waiting, at once while some are.
func NewStateSyncer(src EndSource, ends *Ends, poll time.Duration) *StateSyncer {
	if poll <= 0 {
		poll = syncPoll
	}
	return &StateSyncer{src: src, ends: ends, log: ends.log, poll: poll}
}

// Run copies until ctx ends, then returns nil. Failures are logged and
// retried with a backoff; an end leaves Redis only once MySQL holds it.
func (y *StateSyncer) Run(ctx context.Context) error {
	retry := backoff.Backoff{Initial: backoffMin, Max: backoffMax, Jitter: 0.5}
	for ctx.Err() == nil {
		n, err := y.step(ctx)
		wait := time.Duration(0)
		switch {
		case err != nil && ctx.Err() == nil:
			wait = retry.Next()
			y.log.Warn("orders: ends not stored yet; retrying", "err", err, "in", wait)
		case err != nil:
		case n < syncBatch:
			retry.Reset()
			wait = y.poll
		default:
			retry.Reset()
		}
		if wait > 0 && backoff.Sleep(ctx, wait) != nil {
			break
		}
	}
	return nil
}

// step stores one batch and removes it from Redis: how many it read.
func (y *StateSyncer) step(ctx context.Context) (int, error) {
	ends, err := y.src.Ended(ctx, syncBatch)
	if err != nil || len(ends) == 0 {
		return 0, err
	}
	var good []redisstore.End
	for _, e := range ends {
		if e.Malformed != "" {
			y.log.Error("orders: an ended order's entry is malformed; dropped", "why", e.Malformed)
			continue
		}
		good = append(good, e)
	}
	if err := y.ends.Record(ctx, good); err != nil && !errors.Is(err, ErrEndConflict) {
		return 0, err
	}
	// A conflict is logged and counted by Record: the end MySQL holds
	// stays, and this one is not retried forever.
	return len(ends), y.src.Synced(ctx, ends)
}
