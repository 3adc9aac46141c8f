package cohort

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"seckill/internal/lock"
)

var errBaseOverflow = fmt.Errorf("%w: token base above 2^48-1", lock.ErrUnavailable)

// held is a server hold as the cohort lends it. Fields other than h, q and
// base are guarded by Locker.mu.
type held struct {
	h      Hold
	q      *queue
	base   uint64 // Token(Hold.Base(), 0), or Hold.Base() for a Transferer
	minted bool   // h is a Transferer: the token is base alone
	passes uint64 // passes in this run so far: the token's low bits, unless minted
	cur    *lease // the lease holding it now; nil once detached
	lost   error  // why it was lost, if it was
	moving bool   // a Transfer is in flight: it decides the front role and the give-back

	unwatch func() bool // stops the loss watch (Hold.AfterFunc); nil if the hold cannot be lost
}

// lease is one local holder of a hold.
type lease struct {
	c        *Locker
	hd       *held
	token    uint64
	released atomic.Bool

	// The lease's end, as lock.Signal does it, but with the channel made
	// only when Done is called: most holders never call it, and under
	// contention a lease is made per acquisition.
	mu    sync.Mutex
	done  chan struct{}
	err   error
	ended bool
}

// closedChan is Done of a lease that ended before anyone asked for Done.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// end records err and closes Done; it reports whether this call did, so
// the first reason is the one kept.
func (ls *lease) end(err error) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.ended {
		return false
	}
	ls.ended, ls.err = true, err
	if ls.done != nil {
		close(ls.done)
	} else {
		ls.done = closedChan
	}
	return true
}

var _ lock.Lease = (*lease)(nil)

// HoldOf returns the server hold behind a lease of a cohort Locker, for a
// backend's tests and diagnostics; ok is false for any other lease.
func HoldOf(l lock.Lease) (h Hold, ok bool) {
	ls, ok := l.(*lease)
	if !ok {
		return nil, false
	}
	return ls.hd.h, true
}

// Key is the key passed to Acquire.
func (ls *lease) Key() string { return ls.hd.q.key }

// Token is the hold's base<<16 | the passes before this lease.
func (ls *lease) Token() uint64 { return ls.token }

// Done closes on Release, or when the hold is lost.
func (ls *lease) Done() <-chan struct{} {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.done == nil {
		ls.done = make(chan struct{})
	}
	return ls.done
}

// Err is nil while held, then lock.ErrReleased or an error wrapping
// lock.ErrLost.
func (ls *lease) Err() error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.err
}

// grantLocked lends hd to a new lease and makes it the current one.
func (c *Locker) grantLocked(hd *held) *lease {
	token := hd.base | hd.passes
	if hd.minted {
		token = hd.base
	}
	ls := &lease{c: c, hd: hd, token: token}
	hd.cur = ls
	return ls
}

// holdLocked makes h the hold lent on q, passes passes into its run, and
// watches it for loss.
func (c *Locker) holdLocked(q *queue, h Hold, passes uint64) *held {
	hd := &held{h: h, q: q, base: Token(h.Base(), 0), passes: passes}
	if _, ok := h.(Transferer); ok {
		hd.base, hd.minted = h.Base(), true
	}
	q.hold = hd
	if h.Done() != nil {
		hd.unwatch = h.AfterFunc(func() { c.lostHold(hd) })
	}
	return hd
}

// lostHold ends hd as lost: its Done closed before it was released.
func (c *Locker) lostHold(hd *held) {
	done, ok := c.g.Add()
	if !ok {
		return // Close ends every hold itself
	}
	defer done()
	err := hd.h.Err()
	if err == nil {
		err = errors.New("hold ended")
	}
	if !errors.Is(err, lock.ErrLost) {
		err = fmt.Errorf("%w: %w", lock.ErrLost, err)
	}
	c.mu.Lock()
	if hd.cur == nil { // released meanwhile: Release gave it back
		c.mu.Unlock()
		return
	}
	c.loseLocked(hd, err)
	moving := hd.moving
	c.mu.Unlock()
	if !moving { // else the transfer gives back what it ends with
		_ = c.giveBack(hd)
	}
}

// loseLocked ends hd as lost: its lease's Done closes with err, it is
// never passed on, and the next local waiter acquires from the server. The
// caller then gives the hold back.
func (c *Locker) loseLocked(hd *held, err error) {
	hd.lost = err
	ls := c.detachLocked(hd)
	if ls.end(err) {
		c.log.Warn("lock lost", "backend", c.name, "key", hd.q.key, "err", err)
	}
	if !hd.moving { // else the transfer's waiter is the next front
		c.nextFrontLocked(hd.q)
	}
}

// detachLocked takes hd off its queue and stops its loss watch; it returns the
// lease that held it.
func (c *Locker) detachLocked(hd *held) *lease {
	ls := hd.cur
	hd.cur = nil
	if hd.q.hold == hd {
		hd.q.hold = nil
	}
	if hd.unwatch != nil {
		hd.unwatch()
	}
	return ls
}

// passableLocked reports whether hd may be passed to the next waiter.
func (c *Locker) passableLocked(hd *held) bool {
	if hd.q.head == nil || hd.lost != nil || c.closed || hd.passes >= c.bound {
		return false
	}
	if done := hd.h.Done(); done != nil {
		select {
		case <-done:
			return false
		default:
		}
	}
	return hd.h.Passable()
}

// Release gives the lock up. If another goroutine of this Locker waits for
// the key and the hold may be passed (see the package documentation), the
// lease is passed to it in memory and Release returns nil at once;
// otherwise the hold goes back to the server within ctx. The first call
// releases or, if the lease was lost already, returns an error wrapping
// lock.ErrNotHeld and the loss; later calls return lock.ErrNotHeld. If the
// server release fails, Done closes with ErrLost and the error wraps the
// server's (lock.ErrNotHeld or lock.ErrUnavailable).
func (ls *lease) Release(ctx context.Context) error {
	c, hd := ls.c, ls.hd
	if !ls.released.CompareAndSwap(false, true) {
		return fmt.Errorf("%s: release %q: %w", c.name, hd.q.key, lock.ErrNotHeld)
	}
	c.mu.Lock()
	if hd.cur != ls {
		c.mu.Unlock()
		return fmt.Errorf("%s: release %q: %w: %w", c.name, hd.q.key, lock.ErrNotHeld, ls.Err())
	}
	if c.passableLocked(hd) {
		if tr, ok := hd.h.(Transferer); ok {
			return c.transfer(ctx, ls, tr)
		}
		w := hd.q.pop()
		hd.passes++
		next := c.grantLocked(hd)
		ls.end(lock.ErrReleased)
		c.changedLocked()
		c.mu.Unlock()
		c.passes.Add(1)
		w.ch <- next // buffered
		return nil
	}
	// Give the hold back. The next waiter becomes the front now, so its
	// server request overlaps our release; the server orders the two.
	c.detachLocked(hd)
	c.nextFrontLocked(hd.q)
	c.mu.Unlock()
	err := hd.h.Release(ctx)
	if err == nil {
		ls.end(lock.ErrReleased)
		return nil
	}
	ls.end(fmt.Errorf("%w: release: %w", lock.ErrLost, err))
	if !errors.Is(err, lock.ErrNotHeld) && !errors.Is(err, lock.ErrUnavailable) {
		err = fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: release %q: %w", c.name, hd.q.key, err)
}

// transfer passes ls's hold to the next waiter through the server (see
// Transferer). Called with c.mu held and hd passable; it unlocks c.mu. The
// waiter is taken off the queue first, so it gets either the new lease or
// the front role, whatever happens meanwhile: a loss, or Close, while the
// transfer is in flight only ends ls; what to give back is decided here.
func (c *Locker) transfer(ctx context.Context, ls *lease, tr Transferer) error {
	hd := ls.hd
	q := hd.q
	w := q.pop()
	hd.moving = true
	c.changedLocked()
	done, _ := c.g.Add() // not closed (passableLocked): Close waits for the transfer
	c.mu.Unlock()
	defer done()
	h, err := tr.Transfer(ctx)

	c.mu.Lock()
	hd.moving = false
	if err == nil && hd.lost == nil && !c.closed {
		c.detachLocked(hd)
		next := c.grantLocked(c.holdLocked(q, h, hd.passes+1))
		ls.end(lock.ErrReleased)
		c.mu.Unlock()
		c.passes.Add(1)
		w.ch <- next // buffered
		return nil
	}
	lost := hd.lost
	if lost == nil {
		hd.lost = fmt.Errorf("%w: release: %w", lock.ErrLost, err)
		c.detachLocked(hd)
		ls.end(hd.lost)
	}
	w.ch <- nil // buffered: the waiter acquires from the server
	c.changedLocked()
	c.mu.Unlock()
	back := hd // the transfer failed: this hold is still to be released
	if err == nil {
		back = &held{h: h, q: q} // made, but lost or closed meanwhile
	}
	c.spawn(func() { _ = c.giveBack(back) })
	if err == nil || lost != nil {
		return fmt.Errorf("%s: release %q: %w: %w", c.name, q.key, lock.ErrNotHeld, lost)
	}
	if !errors.Is(err, lock.ErrNotHeld) && !errors.Is(err, lock.ErrUnavailable) {
		err = fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: release %q: %w", c.name, q.key, err)
}
