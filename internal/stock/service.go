package stock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"seckill/internal/failpoint"
	"seckill/internal/lock"
)

// Mode selects how a sale is made.
type Mode string

const (
	// ModeLocked: acquire the lock, read, decide, (work), write, release —
	// the shape of the articles, where the lock is all that prevents
	// overselling (plus fencing, for backends whose tokens can be trusted).
	ModeLocked Mode = "locked"
	// ModeAtomic: one Lua script does check-and-decrement; no lock at all.
	// The production ceiling the locked mode is measured against.
	ModeAtomic Mode = "atomic"
)

// Sale is the outcome of a successful Reduce or ReduceFor.
type Sale struct {
	StockAfter int64  // stock left after this sale (after the original one, if Replayed)
	Token      uint64 // fencing token of the lease it was made under; 0 in atomic mode
	Attempt    string // the attempt id: the sale's lease in the fence, and its receipt
	// OrderID is the order the sale left in the ledger: its attempt id (a
	// combined member's MemberAttempt), or, when Replayed, the original
	// sale's. Empty when the ledger is off, or fencing is (see Keys.Orders).
	OrderID string
	// Replayed: the buyer's idempotency key had already sold; this is the
	// original sale's answer and nothing was sold now.
	Replayed bool
	// PayBy, with a payment window, is when the order's reservation
	// lapses unless paid (unix ms, Redis's clock); 0 without one, and for
	// a replay.
	PayBy int64
}

// Event is something a Service saw that an operator should be able to count.
type Event string

// Events reported through ServiceConfig.OnEvent.
const (
	// EventRetried: a read or write got no definite answer and was sent again
	// with the same identity.
	EventRetried Event = "retried"
	// EventUnconfirmed: a sale's write stayed unanswered past ConfirmTimeout.
	EventUnconfirmed Event = "unconfirmed"
	// EventTokenCollision: two leases held one token; the lock lost state.
	EventTokenCollision Event = "token_collision"
	// EventTokensAdvanced: the lock handed out a token below the fence and was
	// asked to move its sequence past it (lock.TokenAdvancer).
	EventTokensAdvanced Event = "tokens_advanced"
	// EventMixedLock: the fence belongs to another lock identity.
	EventMixedLock Event = "mixed_lock"
	// EventFenceRestarted: the fence had refused every token for LockTTL and
	// restarted at this sale's token (Fence.Quiet).
	EventFenceRestarted Event = "fence_restarted"
	// EventSoldOutUnlocked: a buyer was answered sold out from a read
	// without the lock (peek.go).
	EventSoldOutUnlocked Event = "sold_out_unlocked"
	// EventShed: a buyer was answered busy at once, the lock's queue being
	// too long to serve it within the wait timeout (shed.go).
	EventShed Event = "shed"
	// EventReadAfterReturn: a reservation's unit came back between a
	// section's read and its write, which was refused; the section read
	// again (sell.go). The lab's reserve cells count it to know the race
	// was run, not only survived.
	EventReadAfterReturn Event = "read_after_return"
)

// ServiceConfig wires a Service. Zero durations get the documented defaults.
type ServiceConfig struct {
	Store  Store
	Locker lock.Locker // unused in ModeAtomic
	Mode   Mode        // default ModeLocked

	// Backend names the lock backend; with LockKey (and LockCluster) it is the
	// lock identity recorded in the fence: tokens of different identities
	// never compare.
	Backend string
	// LockCluster, if set, names the lock server's cluster (an etcd cluster
	// id, say), so a new cluster is a new token space.
	LockCluster string
	// LockTTL is how long the lock outlives a silent holder. A fence that
	// has accepted no read for that long restarts at the next token it is
	// shown, stale or of another lock (Fence.Quiet): the sale then recovers
	// by itself from a lock service that lost its state. Zero: never.
	LockTTL time.Duration
	// Fencing turns on token checks at read and write. Only set it for
	// backends whose tokens are trustworthy and shared by every replica
	// (lock.Info.Safe, and distributed): "none" has no exclusion at all and
	// "local" hands out per-process tokens, and both exist to show the
	// overselling the articles start from, so fencing them would hide it.
	Fencing bool

	LockKey     string
	WaitTimeout time.Duration // max wait for the lock; default 5s
	// ReleaseTimeout bounds the Release made after the sale with a context
	// detached from the request, so a client that hangs up does not leave
	// the lock held until its TTL; default 2s.
	ReleaseTimeout time.Duration
	Delay          Delay // simulated work inside the critical section
	// ConfirmTimeout bounds how long a read or write that got no answer is
	// retried (with the same identity, so a retry never sells twice) before
	// the sale is given up — as ErrUnconfirmed once the write was sent;
	// default 3s.
	ConfirmTimeout time.Duration

	// Combine turns on request combining (locked mode only; off by
	// default, so each request takes the lock itself, as in the articles):
	// while one request of this process is acquiring a segment's lock, the
	// others for that segment queue behind it, and once it holds the lock
	// it sells to all of them in one critical section — one fenced read,
	// k = min(buyers, stock), one fenced write (Store.WriteBatch). See
	// combine.go.
	Combine bool
	// CombineMax bounds a batch, the request holding the lock included;
	// default 64.
	CombineMax int
	// Shed answers ErrBusy at once (a *BusyError with a RetryAfter) to a
	// buyer whom the lock's queue in this process could not serve within
	// WaitTimeout, instead of holding it for the whole wait (shed.go).
	// Locked mode only.
	Shed bool
	// MaxQueue bounds, with Shed, the requests of this process queued for
	// one segment's lock (the holder's included); 0: no bound but the wait.
	MaxQueue int

	// PerUserLimit bounds the units one named buyer may buy in a sale (the
	// ledger's buyer count, checked by the script that sells); 0, the
	// default, is no limit. Needs the ledger (Keys.Orders).
	PerUserLimit int
	// IdempotencyTTL is how long an idempotency key's record answers
	// replays; default 24h (DefaultIdempotencyTTL).
	IdempotencyTTL time.Duration
	// Replica names this process in the orders it writes.
	Replica string
	// PaymentWindow, when positive, reserves each unit sold until a
	// payment, a cancel or this long after the sale, whichever comes
	// first (Sale.PayBy; redisstore's reservations). Needs the ledger; 0,
	// the default, is today's sale: a unit sold is final.
	PaymentWindow time.Duration

	// OnLockWait, if set, observes how long each sale waited for the lock
	// (success or not): its Acquire, and with combining its time queued.
	OnLockWait func(time.Duration)
	// OnBatch, if set, observes each critical section's buyers: 1
	// without combining, the batch's size with it.
	OnBatch func(n int)
	// OnEvent, if set, counts the events above.
	OnEvent func(Event)
	Logger  *slog.Logger // default slog.Default()
}

// Service runs sales. It is safe for concurrent use.
type Service struct {
	cfg   ServiceConfig
	log   *slog.Logger
	segs  []*segment                // one per stock segment (Keys.Segments)
	mixed atomic.Pointer[mixedNote] // the last refusal for another lock identity
}

// segment is one stock segment as the service sells it: its store, lock
// key, fence identity and, with combining, its queue.
type segment struct {
	i       int
	store   Segment
	lockKey string
	ident   string    // the lock identity its fence records
	comb    *combiner // nil without combining
	// empty is a hint that the segment was seen empty, so other requests
	// try it last; a sold-out answer never rests on it (reduceSegmented).
	empty atomic.Bool
	// busy counts this process's requests on the segment, for the choice
	// between two (pick).
	busy atomic.Int64
	adm  admission // the bound on its lock's queue (shed.go)
	bell bell      // rung when a holder finds it at 0 (bell.go)
	// left is the stock this process's last section left in the segment
	// when it knew it, else 0: while it is above 0 a buyer skips the read
	// without the lock (peek.go).
	left atomic.Int64
}

// mixedNote is kept so /readyz can say why every sale is refused.
type mixedNote struct {
	at  time.Time
	err error
}

// mixedMemory is how long a refusal for another lock identity keeps
// FenceProblem reporting it.
const mixedMemory = time.Minute

func (s *Service) noteMixed(err error) {
	s.mixed.Store(&mixedNote{at: time.Now(), err: err})
}

// FenceProblem explains why sales are being refused for a reason an
// operator must fix (the fence belongs to another lock: replicas configured
// with different backends, lock keys or lock clusters), or returns nil. It
// forgets a refusal after a minute without another.
func (s *Service) FenceProblem() error {
	n := s.mixed.Load()
	if n == nil || time.Since(n.at) > mixedMemory {
		return nil
	}
	return n.err
}

// NewService returns a Service for cfg.
func NewService(cfg ServiceConfig) *Service {
	if cfg.Mode == "" {
		cfg.Mode = ModeLocked
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = 5 * time.Second
	}
	if cfg.ReleaseTimeout <= 0 {
		cfg.ReleaseTimeout = 2 * time.Second
	}
	if cfg.ConfirmTimeout <= 0 {
		cfg.ConfirmTimeout = 3 * time.Second
	}
	if cfg.CombineMax <= 0 {
		cfg.CombineMax = 64
	}
	if cfg.IdempotencyTTL <= 0 {
		cfg.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if cfg.OnEvent == nil {
		cfg.OnEvent = func(Event) {}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Service{cfg: cfg, log: log}
	n := 1
	if cfg.Store != nil {
		n = cfg.Store.Segments()
	}
	for i := range n {
		seg := &segment{i: i, lockKey: SegmentKey(cfg.LockKey, i)}
		seg.ident = s.identity(seg.lockKey)
		if cfg.Store != nil {
			seg.store = cfg.Store.Segment(i)
		}
		if cfg.Combine && cfg.Mode == ModeLocked {
			seg.comb = &combiner{max: cfg.CombineMax}
		}
		s.segs = append(s.segs, seg)
	}
	return s
}

// LockIdentity is the token space this service's leases belong to, as the
// fence records it: backend, lock key and, when known, the lock cluster.
// With segments it is segment 0's; segment i's names its own lock key.
func (s *Service) LockIdentity() string { return s.segs[0].ident }

func (s *Service) identity(lockKey string) string {
	id := s.cfg.Backend + "/" + lockKey
	if s.cfg.LockCluster != "" {
		id += "@" + s.cfg.LockCluster
	}
	return id
}

// Reduce sells one unit to an anonymous buyer without an idempotency key:
// ReduceFor(ctx, Buyer{}).
func (s *Service) Reduce(ctx context.Context) (Sale, error) {
	return s.ReduceFor(ctx, Buyer{})
}

// FailpointFalseSoldOut, when armed with return (or error), makes
// ReduceFor answer sold out without looking at the stock: a wrong answer
// whose totals balance, for the lab's history check to catch.
const FailpointFalseSoldOut = "stock/falseSoldOut"

// ReduceFor sells one unit to b. With the ledger on (Keys.Orders) the sale
// leaves an order (Sale.OrderID), a replayed key answers its original sale
// (Sale.Replayed) and sells nothing, and the per-user limit applies; all
// of it is decided by the script that takes the unit. Errors wrap
// ErrSoldOut, ErrBusy, ErrLockLost, ErrFenced, ErrMixedBackends,
// ErrUnconfirmed, ErrUnavailable or lock.ErrUnavailable; and for a buyer,
// ErrLimitReached or ErrBadBuyer (nothing sold).
//
// With the ledger off, a non-empty b is ErrNoLedger: a key that cannot be
// honoured is refused rather than ignored, since the client's retry would
// sell twice. With fencing off (locked mode), b is ignored and no order is
// written: that is the articles' unfenced sale, the lab's oversell control.
func (s *Service) ReduceFor(ctx context.Context, b Buyer) (Sale, error) {
	if err := b.Check(); err != nil {
		return Sale{}, err
	}
	if failpoint.Eval(ctx, FailpointFalseSoldOut) != nil {
		// The lab's broken build: a sold_out told without looking, which
		// no sum notices (nothing was sold), and the history check must.
		return Sale{}, ErrSoldOut
	}
	if b != (Buyer{}) && (s.cfg.Store == nil || !s.cfg.Store.Ledger()) {
		return Sale{}, fmt.Errorf("%w: cannot sell to buyer %q with key %q", ErrNoLedger, b.User, b.Key)
	}
	if len(s.segs) > 1 {
		return s.reduceSegmented(ctx, b)
	}
	return s.reduceIn(ctx, s.segs[0], b)
}

// reduceIn sells one unit of segment seg to b; ErrSoldOut means that
// segment is empty. A sale is answered once the witness, if any, holds it.
func (s *Service) reduceIn(ctx context.Context, seg *segment, b Buyer) (Sale, error) {
	sale, err := s.sellIn(ctx, seg, b)
	if err != nil {
		return sale, err
	}
	return s.witnessed(ctx, seg, sale)
}

// witnessed holds a sold answer until the witness records its ceiling
// (witness.go), after the lock is released: the register's round trip is
// not spent inside the critical section, and the sales waiting together
// share it. Not recorded in time, the sale is unconfirmed: it sold in
// Redis, and its receipt says so.
func (s *Service) witnessed(ctx context.Context, seg *segment, sale Sale) (Sale, error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ConfirmTimeout)
	defer cancel()
	err := seg.store.AwaitWitness(wctx)
	if err == nil {
		return sale, nil
	}
	attempt := sale.Attempt
	if sale.Replayed {
		attempt = sale.OrderID // the replay wrote no receipt of its own
	}
	if errors.Is(err, ErrWitnessLost) {
		// The witness lost the sale: this one stays unconfirmed (its
		// receipt says it sold); every replica's next is refused.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ConfirmTimeout)
		herr := seg.store.HaltWitnessLost(hctx, err)
		if !errors.Is(herr, ErrStoreRewound) && !errors.Is(herr, ErrUnavailable) {
			s.log.Error("the witness lost the sale, and the halt was not written", "err", err, "halt", herr)
		}
		cancel()
	}
	s.cfg.OnEvent(EventUnconfirmed)
	s.log.Warn("sale unconfirmed: the witness did not record it; its receipt will tell", "attempt", attempt, "err", err)
	return Sale{}, &UnconfirmedError{Attempt: attempt, Err: err}
}

// sellIn is reduceIn's sale itself.
func (s *Service) sellIn(ctx context.Context, seg *segment, b Buyer) (Sale, error) {
	switch {
	case s.cfg.Mode == ModeAtomic:
		return s.sellAtomic(ctx, seg, b)
	}
	// The articles' unfenced sale (the lab's control) reads as they do:
	// nothing without the lock, so no bell wakes it.
	var gen *bellGen
	read := false // read without the lock
	if s.cfg.Fencing {
		gen = seg.bell.current() // before the read: a ring after it wakes this buyer
		if !seg.unitsLeft() {
			read = true
			if err := s.soldOutEarly(ctx, seg, b); err != nil {
				return Sale{}, err
			}
		}
	}
	if s.cfg.Shed {
		perLock := 1
		if seg.comb != nil {
			perLock = s.cfg.CombineMax
		}
		if err := seg.adm.enter(perLock, s.cfg.MaxQueue, s.cfg.WaitTimeout); err != nil {
			// Busy is for a sale with units left: a buyer who skipped the
			// read on a hint (peek.go), which may be stale, reads first.
			if s.cfg.Fencing && !read {
				if rerr := s.soldOutEarly(ctx, seg, b); rerr != nil {
					return Sale{}, rerr
				}
			}
			s.cfg.OnEvent(EventShed)
			return Sale{}, err
		}
		defer seg.adm.leave()
	}
	since := time.Now()
	for {
		sale, err := s.sellQueued(ctx, seg, b, since, gen)
		if !errors.Is(err, errRung) {
			return sale, err
		}
		// The segment reached 0 while this buyer waited (bell.go): its own
		// read without the lock answers it, or sends it back to the lock.
		gen = seg.bell.current()
		if err := s.soldOutEarly(ctx, seg, b); err != nil {
			return Sale{}, err
		}
	}
}

// sellQueued waits for seg's lock (in the combining queue, or in the
// Locker) and sells under it; errRung when gen rang first.
func (s *Service) sellQueued(ctx context.Context, seg *segment, b Buyer, since time.Time, gen *bellGen) (Sale, error) {
	if seg.comb != nil {
		return s.combined(ctx, seg, b, since, gen)
	}
	lease, err := s.acquire(ctx, seg, since, gen)
	if err != nil {
		return Sale{}, err
	}
	defer s.release(ctx, lease)
	bt := s.section(ctx, seg, lease, []Buyer{b})
	return bt.answer(0)
}

// ledger reports whether sales write the order ledger: it is on and the
// sale is fenced or atomic (the unfenced write has no ledger form).
func (s *Service) ledger() bool {
	return s.cfg.Store != nil && s.cfg.Store.Ledger() && (s.cfg.Fencing || s.cfg.Mode == ModeAtomic)
}

// ledgerArgs are this service's settings for a ledger script run now.
func (s *Service) ledgerArgs() LedgerArgs {
	return LedgerArgs{Limit: s.cfg.PerUserLimit, TTL: s.cfg.IdempotencyTTL, Replica: s.cfg.Replica, Now: time.Now(),
		PaymentWindow: s.cfg.PaymentWindow}
}

// acquire takes seg's lock for a request that has been waiting since since:
// its wait is bounded by WaitTimeout from then, queued time included. It
// ends with errRung when gen rings first (bell.go), before or during the
// wait.
func (s *Service) acquire(ctx context.Context, seg *segment, since time.Time, gen *bellGen) (lock.Lease, error) {
	if gen.hasRung() {
		return nil, errRung
	}
	wctx, cancel := context.WithDeadline(ctx, since.Add(s.cfg.WaitTimeout))
	defer cancel()
	wctx, stop := gen.wakeable(wctx)
	defer stop()
	lease, err := s.cfg.Locker.Acquire(wctx, seg.lockKey)
	if s.cfg.OnLockWait != nil {
		s.cfg.OnLockWait(time.Since(since))
	}
	switch {
	case err == nil:
		if s.cfg.Shed {
			seg.adm.acquired(time.Now(), s.cfg.WaitTimeout)
		}
		return lease, nil
	case errors.Is(err, lock.ErrUnavailable):
		return nil, fmt.Errorf("stock: acquire %q: %w", seg.lockKey, err)
	case woken(ctx, wctx):
		return nil, errRung
	case ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lock.ErrNotObtained)):
		// Our own wait bound expired, not the caller's context.
		return nil, fmt.Errorf("%w: not obtained within %s: %w", ErrBusy, s.cfg.WaitTimeout, err)
	default:
		return nil, fmt.Errorf("stock: acquire %q: %w", seg.lockKey, err)
	}
}

func (s *Service) countRetries(tries int) {
	for range tries - 1 {
		s.cfg.OnEvent(EventRetried)
	}
}

// fenceTrouble reacts to what a fenced call's refusal says about the lock.
// A collision is logged loudly and counted. A stale token may be a paused
// holder, or a lock service that forgot its counter and now hands out
// tokens below the fence — every later sale would be refused for good — so
// a lock that can move its sequence forward is asked to move it past the
// fence's high-water mark; forward-only, so a merely late holder's call
// costs one script and changes nothing.
func (s *Service) fenceTrouble(ctx context.Context, lease lock.Lease, err error) {
	var fe *FencedError
	switch {
	case err == nil:
	case errors.As(err, &fe) && fe.Collision:
		s.cfg.OnEvent(EventTokenCollision)
		s.log.Error("TOKEN COLLISION: two leases held one fencing token, so the lock service lost state; both refused",
			"lock", fe.Lock, "token", fe.Token)
	case errors.As(err, &fe) && fe.Stale():
		adv, ok := s.cfg.Locker.(lock.TokenAdvancer)
		if !ok {
			return
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ReleaseTimeout)
		defer cancel()
		if aerr := adv.AdvanceTokens(actx, lease.Key(), fe.Highest); aerr != nil {
			s.log.Warn("could not advance the lock's tokens past the fence", "lock", fe.Lock, "above", fe.Highest, "err", aerr)
			return
		}
		s.cfg.OnEvent(EventTokensAdvanced)
		s.log.Warn("lock handed out a token below the fence (a late holder, or the lock service lost state); advanced its tokens past it",
			"lock", fe.Lock, "token", fe.Token, "fence", fe.Highest)
	case errors.Is(err, ErrMixedBackends):
		s.cfg.OnEvent(EventMixedLock)
		s.noteMixed(err)
	}
}

// release uses a context detached from the request: a client hanging up
// mid-sale must not skip the release and leave the lock to its TTL.
func (s *Service) release(ctx context.Context, lease lock.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ReleaseTimeout)
	defer cancel()
	if err := lease.Release(rctx); err != nil {
		// ErrNotHeld after a lost lease is expected and already reported as
		// ErrLockLost or ErrFenced; anything else is worth a look.
		lvl := slog.LevelWarn
		if errors.Is(err, lock.ErrNotHeld) {
			lvl = slog.LevelDebug
		}
		s.log.Log(rctx, lvl, "release lock", "key", lease.Key(), "token", lease.Token(), "err", err)
	}
}

func lostErr(lease lock.Lease) error {
	return fmt.Errorf("%w: token %d: %w", ErrLockLost, lease.Token(), lease.Err())
}
