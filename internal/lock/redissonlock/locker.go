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
	"seckill/internal/lock/backend"
	"seckill/internal/lock/cohort"
	"seckill/internal/lock/redissub"
	"seckill/internal/lock/watchdog"
)

const (
	// DefaultWatchdog is Redisson's lockWatchdogTimeout.
	DefaultWatchdog = 30 * time.Second

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
	// minted) instead of releasing it; the Release after the bound lets
	// other processes' waiters go first. The default, 0, is
	// cohort.DefaultHandoffs (8); a negative value disables hand-offs;
	// values above cohort.MaxHandoffs are capped.
	LocalHandoffs int
}

// Stats are cumulative counters of one Locker, cheap enough to read per
// request. They let a benchmark check that a release wakes one waiter per
// process rather than a herd.
type Stats struct {
	// AcquireScripts counts runs of the acquire script: first attempts,
	// retries by the goroutine acquiring for the Locker, and re-entries.
	AcquireScripts uint64
	// Acquired counts leases handed out, by Redis or by hand-off.
	Acquired uint64
	// Wakeups counts release messages that woke a local waiter.
	Wakeups uint64
	// Renewals counts successful watchdog renewals.
	Renewals uint64
	// Handoffs counts final Releases that handed the lock to a goroutine
	// waiting in this Locker (each is also counted in Acquired).
	Handoffs uint64
	// Yields counts final Releases at the end of a run of hand-offs that
	// let other processes listening go first.
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
	seq  atomic.Uint64 // second half of the owner id, one per hold
	co   *cohort.Locker

	ttlArg        any           // millis(ttl), boxed once for script ARGV
	yieldMsg      string        // msgYield + id
	yieldFallback time.Duration // defaultYieldFallback; tests lengthen it

	acquireScripts, acquired, wakeups, renewals, yields atomic.Uint64

	ctx    context.Context // cancelled by Close: stops renewals and fronts
	cancel context.CancelFunc
	g      lock.Group // abandons and renewals in flight

	dog    watchdog.Config // every hold's renewals (LeaseTime 0)
	pubsub *redissub.Conn  // one connection for every lock's channel

	mu     sync.Mutex
	closed bool
	holds  map[*hold]struct{}   // live holds, for ForceUnlock
	keys   map[string]*keyState // keys in use by this Locker's goroutines
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
	id := uuid.NewString()
	ctx, cancel := context.WithCancel(context.Background())
	lk := &Locker{
		rdb:           rdb,
		opts:          opts,
		ttl:           ttl,
		id:            id,
		ttlArg:        millis(ttl),
		yieldMsg:      msgYield + id,
		yieldFallback: defaultYieldFallback,
		ctx:           ctx,
		cancel:        cancel,
		holds:         make(map[*hold]struct{}),
		keys:          make(map[string]*keyState),
	}
	lk.dog = watchdog.Config{TTL: ttl, Ctx: ctx,
		Track:   lk.g.Add,
		Renewed: func() { lk.renewals.Add(1) }}
	lk.pubsub = redissub.New(rdb, redissub.Config{Message: lk.released, Resubscribed: func(ch string) { lk.released(ch, "") }})
	lk.co = cohort.New(server{lk}, cohort.Config{Name: "redissonlock", Handoffs: opts.LocalHandoffs})
	return lk
}

// Describe names the backend for logs, metrics and the fence.
func (lk *Locker) Describe() lock.Info { return lock.Info{Name: backend.Redisson, Safe: true} }

// Ping checks that Redis answers, for readiness probes.
func (lk *Locker) Ping(ctx context.Context) error {
	if err := lk.rdb.Ping(ctx).Err(); err != nil {
		return lock.Unavailable("redissonlock", "ping", err)
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
		Handoffs:       lk.co.Passes(),
		Yields:         lk.yields.Load(),
	}
}

// Acquire blocks until the lock named key is held or ctx is done. The
// returned lock.Lease is a *Lease, which adds Reacquire and HoldCount.
// Goroutines of one Locker get a key in arrival order.
//
// A context that ends first yields an error wrapping lock.ErrNotObtained and
// ctx.Err(); a Redis failure yields one wrapping lock.ErrUnavailable, without
// waiting for ctx; after Close, one wrapping lock.ErrClosed.
func (lk *Locker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	l, err := lk.co.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	ch, _ := cohort.HoldOf(l)
	h := ch.(*hold)
	h.mu.Lock()
	h.ls = l
	h.mu.Unlock()
	lk.acquired.Add(1)
	return &Lease{Lease: l, h: h}, nil
}

// WaitQueued returns once at least n goroutines wait for key behind the one
// holding or acquiring it (locktest.Queuer), or with ctx's error.
func (lk *Locker) WaitQueued(ctx context.Context, key string, n int) error {
	return lk.co.WaitQueued(ctx, key, n)
}

// newOwner mints an owner id: "<Locker uuid>:<hold sequence>".
func (lk *Locker) newOwner() string {
	var buf [64]byte // uuid, colon, up to 20 digits: one allocation, in string
	b := append(buf[:0], lk.id...)
	b = append(b, ':')
	b = strconv.AppendUint(b, lk.seq.Add(1), 10)
	return string(b)
}

func (lk *Locker) isClosed() bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.closed
}

// abandon drops, in the background, every hold of owner: one that a script
// call with an unknown outcome may have made, or one Redis reported in a
// shape nobody will release. It runs under its own bounded context, not the
// caller's (which may be what ended) nor the Locker's (Close waits for it,
// at most abandonTimeout). Once Close is waiting it runs in the caller.
func (lk *Locker) abandon(names *keyNames, owner string) {
	if !lk.g.Go(func() { lk.abandonNow(names, owner) }) {
		lk.abandonNow(names, owner)
	}
}

// abandonNow is abandon in the calling goroutine.
func (lk *Locker) abandonNow(names *keyNames, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), abandonTimeout)
	defer cancel()
	if err := abandonScript.Run(ctx, lk.rdb, names.keys[:1], owner, names.channel, msgUnlock).Err(); err != nil {
		// The hold, if any, expires after its TTL.
		slog.Debug("redissonlock: abandoning a hold failed", "key", names.key, "owner", owner, "err", err)
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
		return lock.Unavailable("redissonlock", fmt.Sprintf("force-unlock %q", key), err)
	}
	var victims []*hold
	lk.mu.Lock()
	for h := range lk.holds {
		if h.names.key == key {
			victims = append(victims, h)
		}
	}
	lk.mu.Unlock()
	for _, h := range victims {
		// The cohort ends the lease on the hold's Done; wait for it, so
		// "at once" holds when ForceUnlock returns.
		if ls := h.lose(fmt.Errorf("redissonlock: %q was force-unlocked: %w", key, lock.ErrLost)); ls != nil {
			select {
			case <-ls.Done():
			case <-ctx.Done():
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("redissonlock: force-unlock %q: %w", key, lock.ErrNotHeld)
	}
	return nil
}

// Close ends every waiter (lock.ErrClosed), the watchdogs and the pub/sub
// connection. Leases still held become lost (Done closes with lock.ErrLost
// wrapping lock.ErrClosed) but are not released: they expire by TTL, as if
// the process had died. Close is idempotent and does not close the Redis
// client.
func (lk *Locker) Close() error {
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		return nil
	}
	lk.closed = true // first: a hold given back from now on is left to expire
	lk.mu.Unlock()

	err := lk.co.Close()
	lk.cancel()
	lk.pubsub.Close()
	lk.g.Close()
	return err
}
