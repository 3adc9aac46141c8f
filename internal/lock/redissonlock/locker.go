package redissonlock

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
)

// Defaults, as in Redisson.
const (
	// DefaultWatchdog is Redisson's lockWatchdogTimeout.
	DefaultWatchdog = 30 * time.Second

	// DefaultLocalHandoffs bounds a run of local hand-offs (Options.LocalHandoffs).
	DefaultLocalHandoffs = 8

	// abandonTimeout bounds the best-effort release of a hold that a script
	// call may have made before its reply was lost, or answered unexpectedly.
	abandonTimeout = time.Second
)

var (
	_ lock.Locker    = (*Locker)(nil)
	_ lock.Closer    = (*Locker)(nil)
	_ lock.Pinger    = (*Locker)(nil)
	_ lock.Describer = (*Locker)(nil)
)

// Options configure a Locker. Zero values select the documented defaults.
type Options struct {
	// Watchdog is the TTL a lock is held with when LeaseTime is 0; a
	// background renewal extends it every Watchdog/3 while the lock is held,
	// so a crashed holder blocks others for at most Watchdog. The default is
	// 30s (DefaultWatchdog).
	Watchdog time.Duration

	// LeaseTime, when positive, holds every lock for exactly this long after
	// its last acquire, re-entry or partial release, with no renewal
	// (Redisson's lock(leaseTime)): the lease's Done closes when it runs out,
	// whether or not the work is finished. The default, 0, uses the watchdog.
	LeaseTime time.Duration

	// LocalHandoffs bounds how many times in a row a final Release hands
	// the lock straight to a goroutine waiting in the same Locker (one
	// script call: the owner field is replaced and a new fencing token
	// minted) instead of releasing it. The Release after the bound
	// publishes a "yield" and lets other processes' waiters go first, unless
	// none is listening, in which case the hand-offs go on. The default, 0,
	// is DefaultLocalHandoffs (8); a negative value disables hand-offs, so
	// every final Release deletes the lock and publishes.
	LocalHandoffs int
}

// Stats are cumulative counters of one Locker, cheap enough to read per
// request. They let a benchmark check that a release wakes one waiter per
// process rather than a herd.
type Stats struct {
	// AcquireScripts counts runs of the acquire script: first attempts,
	// retries by waiting queue heads, and re-entries.
	AcquireScripts uint64
	// Acquired counts first acquisitions, i.e. leases handed out.
	Acquired uint64
	// Wakeups counts release messages that woke a local waiter.
	Wakeups uint64
	// Renewals counts successful watchdog renewals.
	Renewals uint64
	// Handoffs counts final Releases that handed the lock to a goroutine
	// waiting in this Locker (each is also counted in Acquired).
	Handoffs uint64
	// Yields counts final Releases that ended a run of Options.LocalHandoffs
	// hand-offs by releasing to the other processes listening.
	Yields uint64
}

// Locker hands out Redisson-style reentrant locks stored in Redis. It is safe
// for concurrent use; create one per process and Close it on shutdown. It
// does not own the Redis client.
type Locker struct {
	rdb  redis.UniversalClient
	opts Options
	ttl  time.Duration // PEXPIRE of every lock: LeaseTime, else Watchdog
	id   string        // instance UUID, the first half of every owner id
	seq  atomic.Uint64 // second half of the owner id, one per acquisition

	maxHandoffs   int           // Options.LocalHandoffs resolved; 0 = disabled
	ttlArg        any           // millis(ttl), boxed once for script ARGV
	yieldArg      any           // yieldMsg, boxed once
	yieldFallback time.Duration // defaultYieldFallback; tests lengthen it
	yieldMsg      string        // msgYield + id

	acquireScripts, acquired, wakeups, renewals, handoffs, yields atomic.Uint64

	ctx    context.Context // cancelled by Close: stops watchdogs and waiters
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the Locker starts, and renewals in flight

	mu      sync.Mutex
	closed  bool
	leases  map[*Lease]struct{}
	queues  map[string]*queue   // local waiters per key
	ps      *redis.PubSub       // one connection for all channels; nil until needed
	ops     []subOp             // SUBSCRIBE/UNSUBSCRIBE to send, in order
	opsSig  chan struct{}       // wakes the subscriber goroutine
	pending map[string][]*queue // per channel: queues awaiting SUBSCRIBE confirmation, in order
}

// New returns a Locker on rdb. The caller keeps ownership of rdb and must
// Close the Locker before closing the client.
func New(rdb redis.UniversalClient, opts Options) *Locker {
	if opts.Watchdog <= 0 {
		opts.Watchdog = DefaultWatchdog
	}
	opts.LeaseTime = max(opts.LeaseTime, 0)
	ttl := opts.Watchdog
	if opts.LeaseTime > 0 {
		ttl = opts.LeaseTime
	}
	switch {
	case opts.LocalHandoffs == 0:
		opts.LocalHandoffs = DefaultLocalHandoffs
	case opts.LocalHandoffs < 0:
		opts.LocalHandoffs = -1
	}
	id := uuid.NewString()
	ctx, cancel := context.WithCancel(context.Background())
	return &Locker{
		rdb:           rdb,
		opts:          opts,
		ttl:           ttl,
		id:            id,
		maxHandoffs:   max(opts.LocalHandoffs, 0),
		yieldFallback: defaultYieldFallback,
		yieldMsg:      msgYield + id,
		ttlArg:        millis(ttl),
		yieldArg:      msgYield + id,
		ctx:           ctx,
		cancel:        cancel,
		leases:        make(map[*Lease]struct{}),
		queues:        make(map[string]*queue),
		opsSig:        make(chan struct{}, 1),
		pending:       make(map[string][]*queue),
	}
}

// Describe names the backend for logs, metrics and the fence.
func (lk *Locker) Describe() lock.Info { return lock.Info{Name: "redisson", Safe: true} }

// Ping checks that Redis answers, for readiness probes.
func (lk *Locker) Ping(ctx context.Context) error {
	if err := lk.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisson: ping: %w: %w", lock.ErrUnavailable, err)
	}
	return nil
}

// Stats returns the Locker's counters so far.
func (lk *Locker) Stats() Stats {
	return Stats{
		AcquireScripts: lk.acquireScripts.Load(),
		Acquired:       lk.acquired.Load(),
		Wakeups:        lk.wakeups.Load(),
		Renewals:       lk.renewals.Load(),
		Handoffs:       lk.handoffs.Load(),
		Yields:         lk.yields.Load(),
	}
}

// Acquire blocks until the lock named key is held or ctx is done. The
// returned lock.Lease is a *Lease, which adds Reacquire and HoldCount.
//
// A context that ends first yields an error wrapping lock.ErrNotObtained and
// ctx.Err(); a Redis failure yields one wrapping lock.ErrUnavailable, without
// waiting for ctx.
func (lk *Locker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	if lk.ctx.Err() != nil {
		return nil, closedErr(key)
	}
	// Goroutines already queued here go first: a newcomer that tried Redis
	// anyway would only add an attempt that fails while the head waits.
	lk.mu.Lock()
	queued := lk.queues[key] != nil
	lk.mu.Unlock()
	var (
		names *keyNames
		owner string // minted when needed: a handed lease brings its own
	)
	if !queued {
		owner = lk.newOwner()
		names = newKeyNames(key)
		l, _, err := lk.try(ctx, names, owner)
		if err != nil {
			return nil, err
		}
		if l != nil {
			return l, nil
		}
	}
	l, err := lk.wait(ctx, key, names, owner)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// newOwner mints an owner id: "<Locker uuid>:<acquisition sequence>".
func (lk *Locker) newOwner() string {
	var buf [64]byte // uuid, colon, up to 20 digits: one allocation, in string
	b := append(buf[:0], lk.id...)
	b = append(b, ':')
	b = strconv.AppendUint(b, lk.seq.Add(1), 10)
	return string(b)
}

// try runs the acquire script once for a new owner. It returns the lease
// when it got the lock, else the holder's remaining TTL (negative when the
// key has none).
func (lk *Locker) try(ctx context.Context, names *keyNames, owner string) (*Lease, time.Duration, error) {
	key := names.key
	lk.acquireScripts.Add(1)
	sent := time.Now()
	v, err := acquireScript.Run(ctx, lk.rdb, names.keys, lk.ttlArg, owner, "0", "1").Result()
	if err != nil {
		// The script may have run before the reply was lost; nobody would
		// ever release that hold, so give it back now.
		lk.abandon(names, owner)
		if ctx.Err() != nil {
			return nil, 0, notObtained(ctx, key)
		}
		return nil, 0, unavailable("acquire", key, err)
	}
	status, n, err := pair(v)
	if err != nil {
		lk.abandon(names, owner) // whatever the script did, nobody will undo it
		return nil, 0, unavailable("acquire", key, err)
	}
	switch status {
	case acqFirst:
		l, err := lk.newLease(ctx, names, owner, uint64(n), sent, 0)
		return l, 0, err
	case acqBusy:
		return nil, time.Duration(n) * time.Millisecond, nil
	default:
		// The owner id is new, so nothing but this attempt made whatever
		// hold Redis shows; left alone, it would block everyone for a TTL.
		lk.abandon(names, owner)
		return nil, 0, unavailable("acquire", key, fmt.Errorf("unexpected status %d for a new owner", status))
	}
}

// newLease registers a freshly acquired lock and starts keeping it alive.
// streak is the number of local hand-offs that led to it (0 when taken from
// Redis by the acquire script).
func (lk *Locker) newLease(ctx context.Context, names *keyNames, owner string, token uint64, sent time.Time, streak int) (*Lease, error) {
	key := names.key
	l := &Lease{lk: lk, key: key, names: names, owner: owner, token: token, sig: lock.NewSignal(), holds: 1, streak: streak}
	// Lock order is Lease.mu then Locker.mu; l.mu also orders the timer
	// fields set here before the expiry callback can read them.
	l.mu.Lock()
	defer l.mu.Unlock()
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		// Closed while the script ran: hand the lock straight back.
		lk.abandonNow(names, owner)
		return nil, closedErr(key)
	}
	lk.leases[l] = struct{}{}
	l.startLocked(sent)
	lk.mu.Unlock()
	lk.acquired.Add(1)
	return l, nil
}

// forget drops an ended lease from the set Close and ForceUnlock look at.
func (lk *Locker) forget(l *Lease) {
	lk.mu.Lock()
	delete(lk.leases, l)
	lk.mu.Unlock()
}

// abandon drops, in the background, every hold of owner: one that a script
// call with an unknown outcome may have made, or one Redis reported in a
// shape nobody will release. It runs under its own bounded context, not the
// caller's (which may be what ended) nor the Locker's (Close waits for it,
// at most abandonTimeout). Once the Locker is closed it runs in the caller.
func (lk *Locker) abandon(names *keyNames, owner string) {
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		lk.abandonNow(names, owner)
		return
	}
	lk.wg.Go(func() { lk.abandonNow(names, owner) })
	lk.mu.Unlock()
}

// abandonNow is abandon in the calling goroutine.
func (lk *Locker) abandonNow(names *keyNames, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), abandonTimeout)
	defer cancel()
	if err := abandonScript.Run(ctx, lk.rdb, names.keys[:1], owner, names.channel, msgUnlock).Err(); err != nil {
		// The hold, if any, expires after its TTL.
		slog.Debug("redisson: abandoning a hold failed", "key", names.key, "owner", owner, "err", err)
	}
}

// ForceUnlock deletes the lock named key whoever holds it and wakes its
// waiters, like Redisson's forceUnlock. It is an operator's tool, never part
// of the request path. Holders in this Locker lose their lease at once;
// holders elsewhere notice at their next renewal, or at lease expiry when a
// LeaseTime is set. It returns an error wrapping lock.ErrNotHeld when the
// lock was free.
func (lk *Locker) ForceUnlock(ctx context.Context, key string) error {
	n, err := forceUnlockScript.Run(ctx, lk.rdb, []string{key}, channelOf(key), msgForce).Int64()
	if err != nil {
		return unavailable("force-unlock", key, err)
	}
	var victims []*Lease
	lk.mu.Lock()
	for l := range lk.leases {
		if l.key == key {
			victims = append(victims, l)
		}
	}
	lk.mu.Unlock()
	for _, l := range victims {
		l.lose(fmt.Errorf("redisson: %q was force-unlocked: %w", key, lock.ErrLost))
	}
	if n == 0 {
		return fmt.Errorf("redisson: force-unlock %q: %w", key, lock.ErrNotHeld)
	}
	return nil
}

// Close stops the watchdogs, the pub/sub connection and every waiter. Leases
// still held become lost (Done closes with lock.ErrLost wrapping
// lock.ErrClosed) but are not released: they expire by TTL, as if the
// process had died. Close is idempotent and does not close the Redis client.
func (lk *Locker) Close() error {
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		return nil
	}
	lk.closed = true
	leases := make([]*Lease, 0, len(lk.leases))
	for l := range lk.leases {
		leases = append(leases, l)
	}
	ps := lk.ps
	lk.mu.Unlock()

	lk.cancel()
	for _, l := range leases {
		l.lose(fmt.Errorf("redisson: %q: %w: %w", l.key, lock.ErrLost, lock.ErrClosed))
	}
	if ps != nil {
		_ = ps.Close() // ends the dispatcher: go-redis closes its message channel
	}
	lk.wg.Wait()
	return nil
}

func notObtained(ctx context.Context, key string) error {
	return fmt.Errorf("redisson: acquire %q: %w: %w", key, lock.ErrNotObtained, ctx.Err())
}

func unavailable(op, key string, err error) error {
	return fmt.Errorf("redisson: %s %q: %w: %w", op, key, lock.ErrUnavailable, err)
}

func closedErr(key string) error {
	return fmt.Errorf("redisson: acquire %q: %w", key, lock.ErrClosed)
}
