package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"seckill/internal/failpoint"
	"seckill/internal/lock"
)

// sell.go: the critical section, for one buyer or a combined batch of them.

// batch is what one critical section did for n buyers: the stock it read,
// the k units it sold (or sent, when unconfirmed) to the first k of them
// or, with the ledger, each buyer's verdict; or the error that answers all
// of them.
type batch struct {
	f   Fence
	n   int
	cur int64
	k   int
	v   []Verdict // with the ledger: what each buyer got
	err error
}

// id is buyer i's attempt id, and its order id. A lone buyer's is the
// batch's own, so a sale without combining is exactly what it always was;
// a member of a larger batch gets MemberAttempt, its receipt's name.
func (b *batch) id(i int) string {
	if b.n > 1 {
		return MemberAttempt(b.f.Lease, i)
	}
	return b.f.Lease
}

// answer is buyer i's part of the batch.
func (b *batch) answer(i int) (Sale, error) {
	id := b.id(i)
	var ue *UnconfirmedError
	switch {
	case b.err == nil && b.v != nil:
		return b.v[i].sale(id)
	case b.err == nil && i < b.k:
		return Sale{StockAfter: b.cur - 1 - int64(i), Token: b.f.Token, Attempt: id}, nil
	case b.err == nil:
		return Sale{}, ErrSoldOut // the batch took the last units
	case errors.As(b.err, &ue):
		return Sale{}, &UnconfirmedError{Attempt: unconfirmedAttempt(id, b.v, i), Err: ue.Err}
	default:
		return Sale{}, b.err
	}
}

// unconfirmedAttempt is the attempt an unconfirmed answer names for member
// i of a ledger write whose verdicts vs came back (nil if none did): its
// own id, or for a replay the original order's, whose receipt is the one
// that settles it (the replay itself wrote none, so its own id's receipt
// would say "not sold" for good).
func unconfirmedAttempt(id string, vs []Verdict, i int) string {
	if i < len(vs) && vs[i].Kind == VerdictReplay {
		return vs[i].Order
	}
	return id
}

// sale is the answer of a verdict to the buyer whose attempt id is id.
func (v Verdict) sale(id string) (Sale, error) {
	switch v.Kind {
	case VerdictSold, VerdictReplay:
		return Sale{StockAfter: v.After, Token: v.Token, Attempt: id, OrderID: v.Order, Replayed: v.Kind == VerdictReplay, PayBy: v.PayBy}, nil
	case VerdictLimit:
		return Sale{}, ErrLimitReached
	case VerdictEnded:
		return Sale{}, WindowRefusal(false, v.Ends)
	default:
		return Sale{}, ErrSoldOut
	}
}

// section is the critical section under lease for a batch of buyers: read,
// decide, work, check, write. Fencing, the lease's loss and the confirm
// deadline apply to the batch as a whole: it sells to its first k buyers or
// to none — with the ledger, to those the script finds under the limit and
// without an earlier sale of their key, in order.
func (s *Service) section(ctx context.Context, seg *segment, lease lock.Lease, buyers []Buyer) batch {
	n := len(buyers)
	b := batch{n: n, f: Fence{Lock: seg.ident, Token: lease.Token(), Lease: NewAttemptID(), Quiet: s.cfg.LockTTL}}
	if s.cfg.OnBatch != nil {
		s.cfg.OnBatch(n)
	}
	if failpoint.Eval(ctx, FailpointRingEarly) != nil {
		seg.bell.rings() // the lab's broken bell: rung with units left
	}
	defer func() {
		n, known := b.left()
		seg.sawLeft(n, known)
		if known && n <= 0 {
			seg.bell.rings() // the buyers queued behind it read again (bell.go)
		}
	}()
	for try := 1; ; try++ {
		s.sellUnder(ctx, seg, lease, buyers, &b)
		var fe *FencedError
		if try == MaxReadsAfterReturn || !errors.As(b.err, &fe) || !fe.Returned {
			return b
		}
		// A reservation's unit came back between the read and the write,
		// which refused to overwrite it (nothing was written): the same
		// lease reads again, and sells it too.
		s.cfg.OnEvent(EventReadAfterReturn)
		b = batch{n: b.n, f: b.f}
	}
}

// MaxReadsAfterReturn bounds how many times one section reads, when
// returns keep landing between its read and its write; the last refusal
// answers its buyers fenced (nothing sold).
const MaxReadsAfterReturn = 3

// FailpointAfterRead, armed, runs between a section's read and its work:
// the lab puts a reservation's return there.
const FailpointAfterRead = "stock/afterRead"

// sellUnder is one read, work and write of a section, into b.
func (s *Service) sellUnder(ctx context.Context, seg *segment, lease lock.Lease, buyers []Buyer, b *batch) {
	n := len(buyers)
	ledger := s.ledger()
	b.cur, b.err = s.read(ctx, seg, lease, b.f, ledger && anyKey(buyers))
	if b.err != nil {
		return
	}
	if err := failpoint.Eval(ctx, FailpointAfterRead); err != nil {
		b.err = err
		return
	}
	if b.cur <= 0 && !(ledger && anyKey(buyers)) {
		// Sold out, and no key whose earlier sale a replay would answer.
		b.err = ErrSoldOut
		return
	}
	if b.cur > 0 {
		if b.err = s.work(ctx, lease, int(min(int64(n), b.cur))); b.err != nil {
			return
		}
	}
	if !ledger {
		b.k = int(min(int64(n), b.cur))
		b.err = s.write(ctx, seg, lease, b.f, b.cur, b.k, n)
		return
	}
	members := make([]Member, n)
	for i, by := range buyers {
		members[i] = Member{Buyer: by, ID: b.id(i)}
	}
	la := s.ledgerArgs()
	b.err = s.fencedCall(ctx, lease, b.f, n, func(ctx context.Context) (err error) {
		b.v, err = seg.store.WriteLedger(ctx, b.f, b.cur, members, la)
		return err
	})
}

func anyKey(buyers []Buyer) bool {
	for _, b := range buyers {
		if b.Key != "" {
			return true
		}
	}
	return false
}

// read is the fenced read (or the articles' plain GET without fencing);
// replays says a buyer's key may be replayed by the write (Store.read).
func (s *Service) read(ctx context.Context, seg *segment, lease lock.Lease, f Fence, replays bool) (int64, error) {
	if !s.cfg.Fencing {
		return seg.store.ReadUnfenced(ctx)
	}
	var rd Reading
	tries, err := s.confirm(ctx, func(ctx context.Context) (err error) {
		rd, err = seg.store.Read(ctx, f, replays)
		return err
	})
	s.countRetries(tries)
	s.fenceTrouble(ctx, lease, err)
	if rd.Restarted {
		s.cfg.OnEvent(EventFenceRestarted)
		s.log.Warn("FENCE RESTARTED: it had refused every token for a lock TTL (the lock service lost its state, or another lock took over); it now follows this lease's token",
			"lock", f.Lock, "token", f.Token)
	}
	return rd.Stock, err
}

// work spends the simulated business time of the buyers a section may
// sell to (up to the stock it read), one draw each, and looks at the lease
// last. A combined batch does each buyer's work, as the articles' sale
// does once per request: combining saves the lock's round trips, not the
// business work, and a batch is the same workload as its buyers sold one
// by one.
func (s *Service) work(ctx context.Context, lease lock.Lease, buyers int) error {
	var d time.Duration
	for range buyers {
		d += s.cfg.Delay.Next()
	}
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-lease.Done():
			t.Stop()
			return lostErr(lease)
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("stock: sale abandoned: %w", ctx.Err())
		}
	}
	// The delay may have ended at the same instant the lease was lost; the
	// select above picks at random, so look again before writing. Fencing is
	// what closes the remaining window (loss after this check).
	select {
	case <-lease.Done():
		return lostErr(lease)
	default:
		return nil
	}
}

// write sells k units read as cur, for a batch of n buyers.
func (s *Service) write(ctx context.Context, seg *segment, lease lock.Lease, f Fence, cur int64, k, n int) error {
	if !s.cfg.Fencing {
		// The articles' write: not idempotent, so no retry; it is the lab's
		// control for what fencing prevents.
		return seg.store.WriteUnfenced(ctx, cur-int64(k), k)
	}
	return s.fencedCall(ctx, lease, f, n, func(ctx context.Context) error {
		if n == 1 {
			return seg.store.Write(ctx, f, cur-1, 0)
		}
		return seg.store.Write(ctx, f, cur-int64(k), k)
	})
}

// fencedCall runs a fenced write, op, for n buyers under f until it is
// answered (confirm), and says what a refusal tells of the lock.
func (s *Service) fencedCall(ctx context.Context, lease lock.Lease, f Fence, n int, op func(context.Context) error) error {
	tries, err := s.confirm(ctx, op)
	s.countRetries(tries)
	s.fenceTrouble(ctx, lease, err)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrFenced), errors.Is(err, ErrMixedBackends), errors.Is(err, ErrNotInteger), errors.Is(err, ErrStoreLost):
		// A definite refusal: nothing was written. A lost stock key is
		// definite even after an unanswered try: the receipt is read
		// first, so a try that sold would have answered with it.
		return err
	case (errors.Is(err, ErrOutOfMemory) || IsWindowRefusal(err)) && tries == 1:
		// Definite only when no earlier try went unanswered: such a try
		// may still run, and sell, once memory frees up (or, in its
		// window, once it opens).
		return err
	default:
		s.cfg.OnEvent(EventUnconfirmed)
		s.log.Warn("sale unconfirmed: the write got no answer, or too few replicas acknowledged it; its receipt will tell",
			"attempt", f.Lease, "token", f.Token, "buyers", n, "err", err)
		return &UnconfirmedError{Attempt: f.Lease, Err: err}
	}
}

// sellAtomic is the atomic mode's sale to b in seg: one script, no lock.
func (s *Service) sellAtomic(ctx context.Context, seg *segment, b Buyer) (Sale, error) {
	id := NewAttemptID()
	var after int64
	var v Verdict
	ledger, la := s.ledger(), s.ledgerArgs()
	tries, err := s.confirm(ctx, func(ctx context.Context) (err error) {
		if ledger {
			v, err = seg.store.SellLedger(ctx, id, b, la)
			return err
		}
		after, err = seg.store.SellAtomic(ctx, id)
		return err
	})
	s.countRetries(tries)
	switch {
	case err == nil && ledger:
		return v.sale(id)
	case err == nil:
		return Sale{StockAfter: after, Attempt: id}, nil
	case errors.Is(err, ErrSoldOut), errors.Is(err, ErrNotInteger):
		return Sale{}, err // definite: nothing was written
	case (errors.Is(err, ErrOutOfMemory) || errors.Is(err, ErrStoreLost) || IsWindowRefusal(err) ||
		errors.Is(err, ErrItemChanged)) && tries == 1:
		// Definite, as in fencedCall: the script refused before writing
		// (a lost or halted sale, a closed window, an item reset since its
		// service was built), and no earlier try is left to run.
		return Sale{}, err
	default:
		s.cfg.OnEvent(EventUnconfirmed)
		return Sale{}, &UnconfirmedError{Attempt: unconfirmedAttempt(id, []Verdict{v}, 0), Err: err}
	}
}
