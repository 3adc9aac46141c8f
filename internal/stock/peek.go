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

// While units remain that read is a round trip on every winner's way to
// the lock, and a script the stock Redis runs for every buyer: it answers
// nobody. So a buyer skips it while the last section of this process in
// the segment left units (segment.left). That is only a hint: another
// replica may have sold the rest since, and then the buyer's section,
// under the lock, reads the 0 and answers it (a combined batch, at once
// for all its members), rings the bell for the buyers queued with it, and
// leaves 0, so the next buyer reads without the lock again. A stale hint
// costs the buyers of this process one turn at the lock after the sale
// sold out elsewhere, never a wrong answer: every refusal the read
// without the lock gives, the fenced read gives too. A woken buyer always
// reads (Service.sellIn).

// unitsLeft reports whether this process's last section in the segment
// left units (a hint: see above).
func (seg *segment) unitsLeft() bool { return seg.left.Load() > 0 }

// sawLeft records what a section left in the segment: n when it knows
// it, else nothing known (0, so the next buyer reads without the lock).
func (seg *segment) sawLeft(n int64, known bool) {
	if !known {
		n = 0
	}
	seg.left.Store(max(n, 0))
}

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
