package stock

import (
	"context"
	"errors"
	"sync"
)

// bell.go: sold out reaches the queue at once.
//
// When the last unit of a locked sale goes, the buyers of this process
// queued for the segment's lock (in Locker.Acquire, or in the combining
// queue) would each still take the lock in turn to read a 0: the sold-out
// answers of a flood came out at the lock's pace, one per turn. So a holder
// whose section finds the segment's stock at 0 (read, or left by its write)
// rings the segment's bell, and every buyer waiting for that segment's lock
// stops waiting and reads the stock again without the lock (peek.go).
//
// The bell decides nothing. A woken buyer is answered by its own read
// without the lock, which is the read a new buyer makes, with all of its
// rules: a segment at 0 moves a buyer of a segmented sale on to the next
// segment, never answers the sale sold out (segmented.go); a buyer whose
// key already sold (a replay) is sent back to the lock, whose script
// answers its original sale; a sale refilled by a reset since the ring
// sends its buyers back too. So each answer is linearizable at its own
// read, and a ring that is wrong — early, late, spurious, missed — costs
// at most a read or a turn at the lock, never a wrong answer:
// TestBellRungWithStockLeftSellsEveryUnit rings with units left.
//
// A buyer takes the bell's generation before its first read, so a ring
// between that read and its joining the queue still wakes it. A buyer
// woken, or going back to the lock, keeps its first arrival's wait bound
// (WaitTimeout): being woken never lengthens a wait.

// FailpointRingEarly, when armed with return (or error), makes every
// holder ring its segment's bell before it reads, units left or not: the
// lab's broken bell, whose woken buyers must still buy every unit and never
// be told sold out while one is left (the lab's bellearly cell).
const FailpointRingEarly = "stock/ringEarly"

// errRung is what a wait for the lock ends with when the segment's bell
// rang: never an answer, the buyer reads again (Service.sellIn).
var errRung = errors.New("stock: woken: the segment's stock reached 0")

// bell is one segment's. Each generation wakes the waits that joined it,
// synchronously: when rings returns, every one of them has ended, so the
// holder's release cannot hand the lock to a buyer it just woke.
type bell struct {
	mu  sync.Mutex
	gen *bellGen
}

// bellGen is one generation of a bell: what a buyer waits on.
type bellGen struct {
	b     *bell
	rung  chan struct{} // closed by the ring
	waits map[*context.CancelCauseFunc]struct{}
}

// current is the generation the next ring ends: a buyer takes it before
// its read without the lock, and waits on it.
func (b *bell) current() *bellGen {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gen == nil {
		b.gen = &bellGen{b: b, rung: make(chan struct{}), waits: map[*context.CancelCauseFunc]struct{}{}}
	}
	return b.gen
}

// rings wakes every buyer waiting on the current generation; the next
// buyer takes a new one.
func (b *bell) rings() {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.gen
	if g == nil {
		return
	}
	b.gen = nil
	close(g.rung)
	for cancel := range g.waits {
		(*cancel)(errRung)
	}
	clear(g.waits)
}

// done is closed when g rings; nil (never) for a nil g.
func (g *bellGen) done() <-chan struct{} {
	if g == nil {
		return nil
	}
	return g.rung
}

// hasRung reports whether g rang; a nil g never does.
func (g *bellGen) hasRung() bool {
	select {
	case <-g.done():
		return true
	default:
		return false
	}
}

// wakeable derives from ctx a context for a wait that also ends, with
// cause errRung, when g rings. stop releases it; a nil g (a sale that
// reads nothing without the lock: unfenced) wakes nothing.
func (g *bellGen) wakeable(ctx context.Context) (wctx context.Context, stop func()) {
	if g == nil {
		return ctx, func() {}
	}
	wctx, cancel := context.WithCancelCause(ctx)
	g.b.mu.Lock()
	if g.hasRung() {
		cancel(errRung)
	} else {
		g.waits[&cancel] = struct{}{}
	}
	g.b.mu.Unlock()
	return wctx, func() {
		g.b.mu.Lock()
		delete(g.waits, &cancel)
		g.b.mu.Unlock()
		cancel(nil)
	}
}

// woken reports whether a wait on wctx (from wakeable) ended by the bell,
// while the buyer's own ctx is still live.
func woken(ctx, wctx context.Context) bool {
	return ctx.Err() == nil && errors.Is(context.Cause(wctx), errRung)
}

// left is the stock the section left in its segment, and whether it knows
// it: 0 when it read 0 (ErrSoldOut), what it read less what it sold when
// its write was answered. Any other error, a write without an answer
// included, says nothing: it rings nothing and leaves no hint.
func (b *batch) left() (int64, bool) {
	switch {
	case errors.Is(b.err, ErrSoldOut):
		return 0, true
	case b.err != nil:
		return 0, false
	case b.v != nil:
		sold := int64(0)
		for _, v := range b.v {
			if v.Kind == VerdictSold {
				sold++
			}
		}
		return b.cur - sold, true
	default:
		return b.cur - int64(b.k), true
	}
}
