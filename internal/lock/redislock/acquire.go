package redislock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"seckill/internal/lock"
)

// Acquire blocks until this Locker holds key, or ctx is done (the error wraps
// lock.ErrNotObtained and ctx.Err()), or Redis fails (lock.ErrUnavailable),
// or the Locker is closed (lock.ErrClosed).
func (l *Locker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	select {
	case <-l.done:
		return nil, fmt.Errorf("redislock: acquire %q: %w", key, lock.ErrClosed)
	default:
	}
	if err := l.subscribe(ctx); err != nil {
		return nil, fmt.Errorf("redislock: acquire %q: %w", key, err)
	}
	// Only the front of the local queue goes to Redis; it leaves the queue as
	// soon as it holds the lock (or gives up), so the next local waiter can
	// take its place in Redis's queue while the lock is still held.
	gate, err := l.gate.Acquire(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("redislock: acquire %q: %w", key, err)
	}
	defer gate.Release(context.Background()) //nolint:errcheck // a local gate cannot fail to open
	return l.contend(ctx, key)
}

// acquireResult is acquire.lua's answer.
type acquireResult struct {
	held   bool
	handed bool // a release gave it to us before this call
	token  uint64
	pttl   time.Duration // the holder's remaining TTL; negative when unknown
}

func (l *Locker) runAcquire(ctx context.Context, k keys, owner string) (acquireResult, error) {
	l.acquireCalls.Add(1)
	vals, err := acquireScript.Run(ctx, l.rdb, k, owner, l.ttl.Milliseconds(), entryLife.Milliseconds()).Int64Slice()
	if err != nil {
		return acquireResult{}, err
	}
	if len(vals) == 3 && (vals[0] == 1 || vals[0] == 2) {
		return acquireResult{held: true, handed: vals[0] == 2, token: uint64(vals[1]), pttl: time.Duration(vals[2]) * time.Millisecond}, nil
	}
	if len(vals) == 2 && vals[0] == 0 {
		return acquireResult{pttl: time.Duration(vals[1]) * time.Millisecond}, nil
	}
	return acquireResult{}, fmt.Errorf("acquire script returned %v", vals)
}

// contend is the Redis side of Acquire, run by one goroutine per key at a
// time in this process.
func (l *Locker) contend(ctx context.Context, key string) (lock.Lease, error) {
	k := keysFor(key)
	owner := l.instance + ":" + strconv.FormatUint(l.seq.Add(1), 36)
	handoff := make(chan uint64, 1)
	l.mu.Lock()
	l.handoffs[owner] = handoff
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.handoffs, owner)
		l.mu.Unlock()
	}()

	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	backoff := minRetry
	for {
		sent := time.Now()
		res, err := l.runAcquire(ctx, k, owner)
		if err != nil {
			// The script may have run before the reply was lost: withdraw,
			// which also frees the lock if it was taken for us.
			l.withdraw(k, owner)
			if ctx.Err() != nil {
				return nil, fmt.Errorf("redislock: acquire %q: %w: %w", key, lock.ErrNotObtained, ctx.Err())
			}
			return nil, fmt.Errorf("redislock: acquire %q: %w: %w", key, lock.ErrUnavailable, err)
		}
		if res.held {
			if res.handed {
				l.handedOver.Add(1)
			}
			return l.newLease(key, k, owner, res.token, sent.Add(res.pttl)), nil
		}

		wait := backoff
		if res.pttl > 0 && res.pttl+time.Millisecond < wait {
			wait = res.pttl + time.Millisecond // the holder may have died: look again as it expires
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case token := <-handoff:
			l.handedOver.Add(1)
			return l.newLease(key, k, owner, token, time.Now().Add(l.ttl)), nil
		case <-timer.C:
			backoff = min(2*backoff, maxRetry)
		case <-ctx.Done():
			l.withdraw(k, owner)
			return nil, fmt.Errorf("redislock: acquire %q: %w: %w", key, lock.ErrNotObtained, ctx.Err())
		case <-l.done:
			l.withdraw(k, owner)
			return nil, fmt.Errorf("redislock: acquire %q: %w", key, lock.ErrClosed)
		}
	}
}

// withdraw takes a waiter that gave up out of Redis's queue, and passes on
// the lock if a release handed it over meanwhile, so that no one waits for
// its TTL. It runs in the background because the caller's Acquire must
// return when its ctx says so, not when Redis answers.
func (l *Locker) withdraw(k keys, owner string) {
	run := func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := releaseScript.Run(ctx, l.rdb, k, owner).Err(); err != nil {
			// The queue entry lapses by itself after entryLife.
			l.log.Debug("withdrawing waiter failed", "key", k[0], "err", err)
		}
	}
	if !l.spawn(run) {
		run() // closing: Close is not waiting for spawned work any more
	}
}
