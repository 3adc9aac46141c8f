package flawedlock

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/backend"
)

var (
	_ lock.Locker    = (*Locker)(nil)
	_ lock.Pinger    = (*Locker)(nil)
	_ lock.Describer = (*Locker)(nil)
)

// Failpoint names, evaluated at the point where each backend breaks.
const (
	// FailpointAfterSetNX is between setnx's SETNX and its EXPIRE.
	FailpointAfterSetNX = "setnx/afterSetNX"
	// FailpointNoCheckBeforeDel is before redis-nocheck's unchecked DEL.
	FailpointNoCheckBeforeDel = "nocheck/beforeDel"
	// FailpointCheckDelBeforeDel is between redis-checkdel's GET and DEL.
	FailpointCheckDelBeforeDel = "checkdel/beforeDel"
)

// Backend names, as Describe reports them and stockd configures them.
const (
	NameSetNX    = backend.SetNX
	NameNoCheck  = backend.RedisNoCheck
	NameCheckDel = backend.RedisCheckDel
)

const (
	// DefaultTTL is the lock TTL when Options.TTL is zero.
	DefaultTTL = 10 * time.Second
	// DefaultRetry is the sleep between attempts when Options.Retry is zero:
	// the Jedis article's Thread.sleep(10).
	DefaultRetry = 10 * time.Millisecond
)

// Options configure a flawed Locker. Zero values mean the documented
// defaults.
type Options struct {
	// TTL is the lock's expiry. It is never renewed. The default is 10s
	// (DefaultTTL).
	TTL time.Duration

	// Retry is the sleep between acquisition attempts. The default is 10ms
	// (DefaultRetry).
	Retry time.Duration

	// RepairMissingTTL (setnx only) makes a waiter that finds the lock
	// without a TTL give it one, as the Jedis article's loop does. It
	// lets the lock of a holder that crashed between SETNX and EXPIRE
	// expire after all, once someone waits for it. The default, false, is
	// the flaw as it is usually told: such a lock never expires.
	RepairMissingTTL bool
}

// variant is what differs between the three backends: one acquisition
// attempt, and the release.
type variant struct {
	name    string
	try     func(ctx context.Context, l *Locker, k, owner string) (bool, error)
	release func(ctx context.Context, l *Locker, k, owner string) error
}

// Locker is one of the flawed locks; which one depends on its constructor.
// It is safe for concurrent use; every goroutine polls Redis on its own, as
// every thread does in the articles.
type Locker struct {
	rdb      redis.UniversalClient
	opts     Options
	v        variant
	instance string // owner prefix, unique per Locker, like the articles' UUID
	seq      atomic.Uint64
}

func newLocker(rdb redis.UniversalClient, opts Options, v variant) *Locker {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Retry <= 0 {
		opts.Retry = DefaultRetry
	}
	return &Locker{rdb: rdb, opts: opts, v: v, instance: uuid.NewString()}
}

// NewSetNX returns the "setnx" lock: SETNX then EXPIRE, released by
// WATCH/GET/MULTI/DEL/EXEC. UNSAFE: see the package doc.
func NewSetNX(rdb redis.UniversalClient, opts Options) *Locker {
	return newLocker(rdb, opts, variant{name: NameSetNX, try: trySetNX, release: releaseWatch})
}

// NewNoCheck returns the "redis-nocheck" lock: SET NX PX, released by a
// DEL that does not check the owner. UNSAFE: see the package doc.
func NewNoCheck(rdb redis.UniversalClient, opts Options) *Locker {
	return newLocker(rdb, opts, variant{name: NameNoCheck, try: trySetNXPX, release: releaseNoCheck})
}

// NewCheckDel returns the "redis-checkdel" lock: SET NX PX, released by GET,
// compare, then DEL as a separate command. UNSAFE: see the package doc.
func NewCheckDel(rdb redis.UniversalClient, opts Options) *Locker {
	return newLocker(rdb, opts, variant{name: NameCheckDel, try: trySetNXPX, release: releaseCheckDel})
}

// Describe reports the backend's name, and that it is not safe.
func (l *Locker) Describe() lock.Info { return lock.Info{Name: l.v.name, Safe: false} }

// Ping checks that Redis answers.
func (l *Locker) Ping(ctx context.Context) error {
	if err := l.rdb.Ping(ctx).Err(); err != nil {
		return lock.Unavailable("flawedlock "+l.v.name, "ping", err)
	}
	return nil
}

// RedisKey is the Redis key holding the lock named key, for tests and fault
// scripts that inspect it (TTL, owner) or tamper with it.
func (l *Locker) RedisKey(key string) string { return RedisKeys(l.v.name, key)[0] }

func (l *Locker) tokenKey(key string) string { return RedisKeys(l.v.name, key)[1] }

// RedisKeys lists the Redis keys of the lock named key of the variant
// named name (NameSetNX, ...): the lock, then its token counter.
func RedisKeys(name, key string) []string {
	return []string{name + ":lock:" + key, name + ":token:" + key}
}

// Acquire retries an attempt every Options.Retry until it succeeds or ctx is
// done (lock.ErrNotObtained wrapping ctx.Err()). A Redis error, or an error
// from a failpoint, ends it with lock.ErrUnavailable; whatever the attempt
// had done so far stays done (a SETNX without its EXPIRE, say), since that
// is the failure being reproduced.
func (l *Locker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	k := l.RedisKey(key)
	owner := l.instance + ":" + strconv.FormatUint(l.seq.Add(1), 36)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, l.notObtained(key, err)
		}
		ok, err := l.v.try(ctx, l, k, owner)
		if err != nil {
			return nil, l.acquireErr(ctx, key, "attempt", err)
		}
		if ok {
			// The token is taken after the lock, so that of two acquisitions
			// one after the other the later one has the larger token. If INCR
			// fails the lock stays held until its TTL: nothing here releases.
			tok, err := l.rdb.Incr(ctx, l.tokenKey(key)).Uint64()
			if err != nil {
				return nil, l.acquireErr(ctx, key, "token", err)
			}
			return &lease{l: l, key: key, k: k, owner: owner, token: tok, sig: lock.NewSignal()}, nil
		}
		// The articles' sleep-and-retry, kept on purpose (package doc).
		if timer == nil {
			timer = time.NewTimer(l.opts.Retry)
		} else {
			timer.Reset(l.opts.Retry)
		}
		select {
		case <-ctx.Done():
			return nil, l.notObtained(key, ctx.Err())
		case <-timer.C:
		}
	}
}

func (l *Locker) notObtained(key string, ctxErr error) error {
	return fmt.Errorf("flawedlock %s: acquire %q: %w: %w", l.v.name, key, lock.ErrNotObtained, ctxErr)
}

// acquireErr wraps a Redis or failpoint error met while acquiring. A call
// cut short because the caller's context ended is a wait that ran out of
// time, not an outage.
func (l *Locker) acquireErr(ctx context.Context, key, step string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("flawedlock %s: acquire %q: %s: %w: %w (%v)", l.v.name, key, step, lock.ErrNotObtained, ctxErr, err)
	}
	return lock.Unavailable("flawedlock "+l.v.name, fmt.Sprintf("acquire %q: %s", key, step), err)
}
