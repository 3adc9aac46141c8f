package redislock

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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

var (
	_ lock.Locker    = (*Locker)(nil)
	_ lock.Closer    = (*Locker)(nil)
	_ lock.Pinger    = (*Locker)(nil)
	_ lock.Describer = (*Locker)(nil)
)

var (
	//go:embed lua/queue.lua
	queueLua string
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/renew.lua
	renewLua string

	acquireScript = redis.NewScript(queueLua + acquireLua)
	releaseScript = redis.NewScript(queueLua + releaseLua)
	renewScript   = redis.NewScript(renewLua)
)

const (
	// DefaultTTL is the lock TTL when Options.TTL is zero.
	DefaultTTL = 10 * time.Second

	// Fallback retries while waiting for a hand-off message: the first after
	// minRetry, doubling up to maxRetry, never later than the holder's TTL.
	minRetry = 50 * time.Millisecond
	maxRetry = 200 * time.Millisecond
	// entryLife is how long a waiter's queue entry stays live after its last
	// acquire call; several fallback retries fit in it, so a live waiter
	// keeps its place even when a retry runs late.
	entryLife = time.Second
	// cleanupTimeout bounds the background call that withdraws a waiter
	// whose Acquire has already returned.
	cleanupTimeout = 2 * time.Second
	// channelPrefix must match grant in queue.lua.
	channelPrefix = "redislock:"
)

// Options configure a Locker. Zero values mean the documented defaults.
type Options struct {
	// TTL is how long a lock outlives a holder that stops renewing it. The
	// watchdog renews every TTL/3. The default is 10s (DefaultTTL).
	TTL time.Duration

	// LocalHandoffs bounds how many times in a row a released lock is passed
	// in memory to another goroutine of this Locker waiting for the same key,
	// before it goes back to Redis's queue (see "Cohort hand-off" in the
	// package doc): cohort.Config.Handoffs (the default, 0, is 8; a negative
	// value disables passing; values above 65535 are capped).
	LocalHandoffs int

	// Logger receives renewal failures and lost leases. The default is
	// slog.Default().
	Logger *slog.Logger
}

// Stats counts a Locker's work since New, so a benchmark can report Redis
// round trips per acquisition.
type Stats struct {
	Acquired      uint64 // leases returned by Acquire, from Redis or passed in memory
	AcquireCalls  uint64 // acquire.lua round trips (first tries and fallback retries)
	Handoffs      uint64 // Redis acquisitions handed to this Locker by another holder's release
	LocalHandoffs uint64 // leases passed in memory from one goroutine of this Locker to another
	Renewals      uint64 // successful watchdog renewals
}

// Locker acquires Redis locks. It is safe for concurrent use. Goroutines of
// one Locker wait in a local FIFO per key (the cohort package), so that only
// one of them talks to Redis at a time, and a held lock is passed among them
// in memory a bounded number of times before it goes back to Redis's queue.
type Locker struct {
	co         *cohort.Locker
	rdb        redis.UniversalClient
	ttl        time.Duration
	passMargin time.Duration // a lock with less validity left is not passed
	log        *slog.Logger
	instance   string // owner prefix and channel suffix, unique per Locker
	seq        atomic.Uint64

	hmu    sync.Mutex        // guards holds' mutable fields and floors
	floors map[string]uint64 // per key: smallest counter a hold may be passed with (AdvanceTokens)

	dog        watchdog.Config // every hold's renewals
	pubsub     *redissub.Conn  // the hand-off channel's connection
	subscribed atomic.Bool     // the hand-off channel is confirmed

	mu       sync.Mutex
	closed   bool
	sub      *redissub.Sub          // the hand-off channel's subscription
	handoffs map[string]chan uint64 // owner -> its hand-off token, while it waits

	done      chan struct{} // closed by Close
	ctx       context.Context
	cancel    context.CancelFunc // cuts short renewals in flight on Close
	closeOnce sync.Once
	g         lock.Group // watchdog renewals, waiter clean-ups

	holds, acquireCalls, handedOver, renewals atomic.Uint64
}

// New returns a Locker on rdb. It does not talk to Redis until the first
// Acquire. Close it to stop its subscription and watchdogs; rdb stays open
// and belongs to the caller.
func New(rdb redis.UniversalClient, opts Options) *Locker {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Locker{
		ctx:        ctx,
		cancel:     cancel,
		rdb:        rdb,
		ttl:        opts.TTL,
		passMargin: opts.TTL / 3,
		log:        opts.Logger.With("lock", "redis"),
		instance:   uuid.NewString(),
		floors:     make(map[string]uint64),
		handoffs:   make(map[string]chan uint64),
		done:       make(chan struct{}),
	}
	l.dog = watchdog.Config{TTL: l.ttl, Retry: renewRetry, Ctx: ctx, Log: l.log,
		Track:   l.g.Add,
		Renewed: func() { l.renewals.Add(1) }}
	l.pubsub = redissub.New(rdb, redissub.Config{Message: l.handedOff, Log: l.log})
	l.co = cohort.New(server{l}, cohort.Config{Name: "redislock", Handoffs: opts.LocalHandoffs,
		CleanupTimeout: cleanupTimeout, Log: l.log})
	return l
}

// Describe reports the backend as "redis", safe.
func (l *Locker) Describe() lock.Info { return lock.Info{Name: backend.Redis, Safe: true} }

// Ping checks that Redis answers.
func (l *Locker) Ping(ctx context.Context) error {
	if err := l.rdb.Ping(ctx).Err(); err != nil {
		return lock.Unavailable("redislock", "ping", err)
	}
	return nil
}

// Stats returns the counters so far.
func (l *Locker) Stats() Stats {
	passes := l.co.Passes()
	return Stats{
		Acquired:      l.holds.Load() + passes,
		AcquireCalls:  l.acquireCalls.Load(),
		Handoffs:      l.handedOver.Load(),
		LocalHandoffs: passes,
		Renewals:      l.renewals.Load(),
	}
}

// Close stops the subscription and the watchdogs, and waits for them. Leases
// still held are not released: their Done closes with an error wrapping
// lock.ErrLost and lock.ErrClosed, and Redis expires them after their TTL,
// exactly as if the process had died. Close is idempotent.
func (l *Locker) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		close(l.done)
		l.mu.Unlock()
		l.cancel()
		l.pubsub.Close()
		// Ends waiters and leases; the holds' Release leaves them to expire.
		_ = l.co.Close()
		l.g.Close()
	})
	return nil
}

func (l *Locker) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// subscribe opens the Locker's hand-off channel once, and waits for Redis to
// confirm it, so that no hand-off to this process can be published unheard.
// A failed subscription is asked again by the next call.
func (l *Locker) subscribe(ctx context.Context) error {
	if l.subscribed.Load() {
		return nil
	}
	l.mu.Lock()
	if l.sub == nil || l.sub.Err() != nil {
		l.sub = l.pubsub.Subscribe(channelPrefix + l.instance)
	}
	sub := l.sub
	l.mu.Unlock()
	select {
	case <-sub.Ready():
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", lock.ErrNotObtained, ctx.Err())
	case <-l.done:
		return lock.ErrClosed
	}
	if err := sub.Err(); err != nil {
		if l.isClosed() {
			return lock.ErrClosed
		}
		return fmt.Errorf("subscribe: %w: %w", lock.ErrUnavailable, err)
	}
	l.subscribed.Store(true)
	return nil
}

// handedOff delivers a hand-off message to the waiter it names. A message
// for an owner that no longer waits is dropped: that waiter either found the
// hand-off by its own retry or withdrew with release.lua, which passed the
// lock on.
func (l *Locker) handedOff(_, payload string) {
	owner, tok, ok := strings.Cut(payload, " ")
	if !ok {
		return
	}
	token, err := strconv.ParseUint(tok, 10, 64)
	if err != nil {
		l.log.Warn("malformed hand-off message", "payload", payload)
		return
	}
	l.mu.Lock()
	ch := l.handoffs[owner]
	l.mu.Unlock()
	if ch != nil {
		select {
		case ch <- token:
		default:
		}
	}
}

// keys are the Redis keys of one lock, in the order the scripts expect.
type keys []string

func keysFor(key string) keys {
	base := "{" + key + "}"
	return keys{base, base + ":fence", base + ":q", base + ":qe"}
}

// RedisKeys lists the Redis keys of the lock named key (the lock, its
// fencing counter, its queue), for a caller that keeps other keys in the
// same Redis and must keep them off these.
func RedisKeys(key string) []string { return keysFor(key) }

// WaitQueued returns once at least n goroutines of this Locker wait locally
// for key behind the one holding it or acquiring it from the server, or
// with ctx's error. It is for tests and tools that must know a waiter has
// queued (locktest.Queuer).
func (l *Locker) WaitQueued(ctx context.Context, key string, n int) error {
	return l.co.WaitQueued(ctx, key, n)
}
