package stock

import (
	"context"
	"errors"
	"fmt"
)

// peek.go: losers answered without the lock.
//
// After the last unit, a locked sale would still make every buyer take the
// lock to read a 0: a queue of buyers waiting two round trips each to be
// told "sold out". So a locked sale first reads the stock without the lock
// (peek.lua). A 0 there is final until a reset (within a sale the stock
// only falls, and a reset moves the sale's epoch, which the read checks),
// so "sold out" is answered at once. The read checks what the fenced read
// checks before it: a missing stock key is a lost sale, never "0 left"; a
// halted or rewound sale is refused; an epoch this process has not seen is
// learnt first (Store.guarded). A buyer whose idempotency key has a record
// still takes the lock: only the sale script can tell a replay of this
// sale, which must answer its original order. A peek that gets no answer
// decides nothing: the sale goes on as before and its own read settles it.
// An item's window (Keys.Window) is checked here too: before it every
// buyer is refused at once; after it every buyer but one whose key has a
// record, which the sale script answers (ledger.lua).

// soldOutEarly answers b from a read without the lock when that read is
// final: ErrSoldOut for a sold-out segment (and a buyer without a record
// to replay), or the definite refusal the fenced read would give (a lost,
// broken or halted sale). nil means the sale goes on under the lock.
func (s *Service) soldOutEarly(ctx context.Context, seg *segment, b Buyer) error {
	if !s.ledger() {
		b.Key = "" // no ledger, no record to replay
	}
	n, record, err := seg.store.Peek(ctx, b)
	switch {
	case errors.Is(err, ErrStoreLost), errors.Is(err, ErrNotInteger), errors.Is(err, ErrStoreRewound),
		errors.Is(err, ErrNotStarted), errors.Is(err, ErrItemChanged):
		return err
	case errors.Is(err, ErrEnded):
		if record {
			return nil // a key sold before the end: the write answers its replay
		}
		return err
	case err != nil:
		return nil // no answer is no decision: the fenced read will tell
	case n <= 0 && !record:
		s.cfg.OnEvent(EventSoldOutUnlocked)
		return fmt.Errorf("%w: read without the lock", ErrSoldOut)
	}
	return nil
}
