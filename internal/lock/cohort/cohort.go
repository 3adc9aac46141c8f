// Package cohort is the local half of every cohort lock backend: per key,
// the goroutines of one process queue in FIFO order, one of them (the
// "front") acquires the lock from the server, and a released lock is passed
// in memory to the next local waiter, a bounded number of times in a row,
// before it goes back to the server so that other processes get their turn.
//
// A backend supplies only its server side, a Server handing out Holds (a
// Redis key with its renewals, an etcd key on a session, a ZooKeeper node);
// this package owns everything else: the FIFO, the pass bound, the fencing
// token layout, loss propagation, cancellation while queued, and the
// lifetime of its goroutines after Close.
//
// # Passing
//
// Config.Handoffs bounds the passes per hold: 0 means DefaultHandoffs (8), a
// negative value means no passing at all (every acquisition goes to the
// server), and values above MaxHandoffs (65535) are capped. A hold is passed
// only while a local goroutine waits, the bound allows it, the hold has not
// been lost (Done still open) and Hold.Passable says it is still valid
// enough to lend. Otherwise it is released to the server, and the next local
// waiter becomes the front and acquires anew; its request may overlap the
// release, which the server orders.
//
// Design notes follow the package clause.
package cohort

// Design notes.
//
// # Token
//
// A lease's token is Base<<16 | passes: the hold's base (strictly greater
// for every later hold of a key, the server's guarantee) in the high 48
// bits, and the number of passes on that hold so far (0 for the lease the
// server granted) in the low 16 bits. Passes never exceed 65535, so tokens
// grow strictly in lock order, across passes and across holds.
//
// A hold whose server records its holder (a Transferer) is instead passed
// by a server step that makes a new hold per lease, and a lease's token is
// its hold's Base as is: the server mints one per lease.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/lock"
)

// Token is the token of a lease passes passes into a hold with base.
func Token(base, passes uint64) uint64 { return base<<PassBits | passes }

// BaseOf is the hold base a token was made from.
func BaseOf(token uint64) uint64 { return token >> PassBits }

// The token layout, the one place it is written: a lease's token is its
// hold's base in the high 48 bits and the passes before it in the low 16
// (Token, BaseOf). Backends that mint their own counter (redislock's
// {K}:fence, mysqllock's counter row) advance it by BaseOf.
const (
	// PassBits is how many low bits of a token count the passes.
	PassBits = 16
	// DefaultHandoffs is Config.Handoffs when it is zero.
	DefaultHandoffs = 8
	// MaxHandoffs is the largest pass count: the low PassBits of a token.
	MaxHandoffs = 1<<PassBits - 1
	// MaxBase is the largest Hold.Base that fits the token's high bits.
	MaxBase = 1<<(64-PassBits) - 1
	// DefaultCleanupTimeout is Config.CleanupTimeout when it is zero.
	DefaultCleanupTimeout = 3 * time.Second
)

// Server is a backend's server side: it acquires a key's lock for this
// process.
type Server interface {
	// Acquire blocks until the lock for key is held or ctx is done (ctx
	// also ends when the cohort Locker closes). The cohort calls it from
	// one goroutine per key at a time, but a new call may overlap the
	// Release of the key's previous hold. Errors should wrap a lock
	// sentinel (ErrUnavailable, ErrClosed); others are reported as
	// ErrUnavailable.
	Acquire(ctx context.Context, key string) (Hold, error)
}

// Hold is one acquisition from the server, lent by the cohort to one or
// more local leases in a row.
type Hold interface {
	// Base is the token base: at most MaxBase, and strictly greater than
	// the base of every earlier hold of the same key through the backend.
	Base() uint64

	// Done is closed when the hold is, or may be, lost. The current lease's
	// Done then closes with Err, and the hold is never passed on. A nil
	// channel means the hold cannot be lost (an in-process lock).
	Done() <-chan struct{}

	// AfterFunc arranges to call f in its own goroutine once Done closes,
	// with context.AfterFunc's contract (stop undoes it and reports
	// whether it did); a lock.Signal provides Done and AfterFunc. The
	// cohort watches every hold this way rather than with a goroutine
	// per hold. Not called when Done is nil.
	AfterFunc(f func()) (stop func() bool)

	// Err explains a closed Done; it need not wrap lock.ErrLost.
	Err() error

	// Passable reports whether the hold may be lent to one more lease now:
	// enough validity left, the session that made it still current, the
	// token sequence not moved past it. It is called with the cohort's
	// mutex held: it must not block or call back into the cohort.
	Passable() bool

	// Release gives the hold back to the server. The cohort calls it
	// exactly once per hold, also after a loss (to clean up whatever the
	// server may still keep). An error should wrap lock.ErrNotHeld (the
	// hold was gone already) or lock.ErrUnavailable (not confirmed).
	Release(ctx context.Context) error
}

// Transferer is implemented by a Hold whose server records which holder has
// the lock (Redisson's owner field), so that lending it to the next local
// lease must be done on the server. The cohort then passes the lock by
// calling Transfer, under the same rules (bound, FIFO, never a lost hold),
// and every lease has a hold of its own: a lease's token is its hold's Base
// as is, minted by the server per lease (it need not fit 48 bits), instead
// of Base<<16 | passes.
type Transferer interface {
	// Transfer hands the lock, in one server step, to a new holder that
	// replaces this hold, and returns the new hold; its Base must exceed
	// this one's. The cohort calls it in place of Release, without its
	// mutex held. After a success it never releases this hold. After an
	// error it releases this hold (as after a loss), and Transfer must have
	// cleaned up any new holder it may have made. The error should wrap
	// lock.ErrNotHeld or lock.ErrUnavailable.
	Transfer(ctx context.Context) (Hold, error)
}

// KeyObserver is implemented by a Server that keeps per-key state for as
// long as a key is in use locally (etcdlock keeps a prefix watch). The
// cohort calls Queued each time a goroutine queues behind key's front, and
// Idle once key has neither a front nor waiters. Both are called with the
// cohort's mutex held: they must not block or call back into the cohort.
type KeyObserver interface {
	Queued(key string)
	Idle(key string)
}

// Config configures a Locker.
type Config struct {
	// Name prefixes errors, e.g. "zklock".
	Name string
	// Handoffs bounds the passes per hold. The default (0) is
	// DefaultHandoffs; a negative value disables passing; values above
	// MaxHandoffs are capped.
	Handoffs int
	// CleanupTimeout bounds the releases the cohort makes on its own (of
	// a lost hold, of a grant nobody waits for any more, at Close). The
	// default is 3s.
	CleanupTimeout time.Duration
	// Log receives a warning per lost lease. The default is slog.Default().
	Log *slog.Logger
}

// Locker is a cohort lock over a Server. Safe for concurrent use.
type Locker struct {
	srv     Server
	obs     KeyObserver // srv, if it observes keys
	name    string
	bound   uint64
	cleanup time.Duration
	log     *slog.Logger

	life     context.Context // cancelled by Close
	stopLife context.CancelFunc
	passes   atomic.Uint64
	g        lock.Group // goroutines Close waits for: losses, transfers, give-backs

	mu       sync.Mutex
	closed   bool
	keys     map[string]*queue
	watchers int           // WaitQueued calls in progress
	changed  chan struct{} // closed and replaced on a queue change while watched
}

var (
	_ lock.Locker = (*Locker)(nil)
	_ lock.Closer = (*Locker)(nil)
)

// New returns a Locker acquiring from srv.
func New(srv Server, cfg Config) *Locker {
	bound := cfg.Handoffs
	switch {
	case bound == 0:
		bound = DefaultHandoffs
	case bound < 0:
		bound = 0
	case bound > MaxHandoffs:
		bound = MaxHandoffs
	}
	if cfg.Name == "" {
		cfg.Name = "cohort"
	}
	if cfg.CleanupTimeout <= 0 {
		cfg.CleanupTimeout = DefaultCleanupTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	life, stop := context.WithCancel(context.Background())
	obs, _ := srv.(KeyObserver)
	return &Locker{srv: srv, obs: obs, name: cfg.Name, bound: uint64(bound), cleanup: cfg.CleanupTimeout,
		log: cfg.Log, life: life, stopLife: stop, keys: make(map[string]*queue)}
}

// Handoffs is the resolved pass bound (0: passing disabled).
func (c *Locker) Handoffs() int { return int(c.bound) }

// Passes counts the leases passed in memory so far.
func (c *Locker) Passes() uint64 { return c.passes.Load() }

// Waiting reports how many goroutines wait for key behind its front.
func (c *Locker) Waiting(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.keys[key]; q != nil {
		return q.waiting
	}
	return 0
}

// WaitQueued returns once at least n goroutines wait for key behind its
// front, or with ctx's error; with n = 0, once key has a front (or a hold).
// It is for tests and tools that must know a waiter has queued.
func (c *Locker) WaitQueued(ctx context.Context, key string, n int) error {
	c.mu.Lock()
	c.watchers++
	defer func() {
		c.mu.Lock()
		c.watchers--
		c.mu.Unlock()
	}()
	for {
		if q := c.keys[key]; q != nil && q.waiting >= n {
			c.mu.Unlock()
			return nil
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
	}
}

// changedLocked wakes WaitQueued callers, if any.
func (c *Locker) changedLocked() {
	if c.watchers > 0 && c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// Close stops the Locker: waiting Acquires return lock.ErrClosed, an
// acquisition in flight has its ctx cancelled, held leases become lost (Err
// wraps ErrLost and ErrClosed) and their holds are released under
// CleanupTimeout. Close returns once every goroutine of the Locker has
// ended, with the errors of those releases other than lock.ErrNotHeld;
// later calls return nil at once.
func (c *Locker) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.stopLife()
	lost := fmt.Errorf("%w: %w", lock.ErrLost, lock.ErrClosed)
	var holds []*held
	for _, q := range c.keys {
		if hd := q.hold; hd != nil {
			c.loseLocked(hd, lost)
			if !hd.moving { // a transfer in flight gives back what it ends with
				holds = append(holds, hd)
			}
		}
	}
	c.mu.Unlock()

	errs := make([]error, len(holds))
	var wg sync.WaitGroup
	for i, hd := range holds {
		wg.Go(func() { errs[i] = c.giveBack(hd) })
	}
	wg.Wait()
	c.g.Close()
	return errors.Join(errs...)
}

// spawn runs f on a goroutine Close waits for; once Close is waiting it
// runs f inline, so nothing starts behind Close's back.
func (c *Locker) spawn(f func()) {
	if !c.g.Go(f) {
		f()
	}
}

// giveBack releases hd's hold to the server under CleanupTimeout, for
// releases nobody waits for. It returns the error, unless it wraps
// lock.ErrNotHeld (the hold was gone already).
func (c *Locker) giveBack(hd *held) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cleanup)
	defer cancel()
	err := hd.h.Release(ctx)
	if err == nil || errors.Is(err, lock.ErrNotHeld) {
		return nil
	}
	c.log.Debug("releasing a hold in the background failed", "key", hd.q.key, "err", err)
	if !errors.Is(err, lock.ErrUnavailable) {
		err = fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: release %q: %w", c.name, hd.q.key, err)
}

// fail maps an acquisition error onto the lock sentinels.
func (c *Locker) fail(ctx context.Context, key string, err error) error {
	switch {
	case ctx.Err() != nil:
		if errors.Is(err, lock.ErrUnavailable) {
			return fmt.Errorf("%s: acquire %q: %w: %w: %w", c.name, key, lock.ErrNotObtained, ctx.Err(), err)
		}
		return fmt.Errorf("%s: acquire %q: %w: %w", c.name, key, lock.ErrNotObtained, ctx.Err())
	case errors.Is(err, lock.ErrClosed), c.isClosed():
		return fmt.Errorf("%s: acquire %q: %w", c.name, key, lock.ErrClosed)
	case errors.Is(err, lock.ErrUnavailable), errors.Is(err, lock.ErrNotObtained):
		return fmt.Errorf("%s: acquire %q: %w", c.name, key, err)
	default:
		return fmt.Errorf("%s: acquire %q: %w: %w", c.name, key, lock.ErrUnavailable, err)
	}
}

func (c *Locker) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
