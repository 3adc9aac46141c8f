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
	l.cmu.Lock()
	if l.cclosed {
		l.cmu.Unlock()
		return nil, fmt.Errorf("redislock: acquire %q: %w", key, lock.ErrClosed)
	}
	c := l.cohortLocked(key)
	if c.hold == nil && !c.busy && c.head == nil {
		c.busy = true
		l.cmu.Unlock()
		return l.contend(ctx, c)
	}
	// Someone of this process holds the lock or is getting it from Redis:
	// wait for a pass in memory, or for the turn to go to Redis.
	w := waiters.Get().(*waiter)
	c.push(w)
	l.cmu.Unlock()
	select {
	case s := <-w.ch:
		waiters.Put(w)
		if s != nil {
			return s, nil
		}
		return l.contend(ctx, c)
	case <-ctx.Done():
		return nil, l.abandon(c, w, fmt.Errorf("redislock: acquire %q: %w: %w", key, lock.ErrNotObtained, ctx.Err()))
	case <-l.done:
		return nil, l.abandon(c, w, fmt.Errorf("redislock: acquire %q: %w", key, lock.ErrClosed))
	}
}

// abandon takes a local waiter whose Acquire gives up out of the queue. If
// its turn came meanwhile, it passes the turn on: a lease is released in the
// background (the caller must return now), a turn at Redis goes to the next
// waiter. It returns err.
func (l *Locker) abandon(c *cohort, w *waiter, err error) error {
	l.cmu.Lock()
	if w.queued {
		c.remove(w)
		l.cmu.Unlock()
		waiters.Put(w)
		return err
	}
	s := <-w.ch // sent under l.cmu when w left the queue
	waiters.Put(w)
	if s == nil {
		l.handOnBusyLocked(c)
		l.cmu.Unlock()
		return err
	}
	closed := l.cclosed
	l.cmu.Unlock()
	if !closed { // after Close the lease is lost and left to expire
		release := func() {
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			defer cancel()
			if rerr := s.Release(ctx); rerr != nil {
				l.log.Debug("releasing an abandoned pass failed", "key", c.key, "err", rerr)
			}
		}
		if !l.spawn(release) {
			release()
		}
	}
	return err
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

// contend is the Redis side of Acquire, run by the goroutine that has c's
// turn at Redis (c.busy). Whatever the outcome, the turn ends here: with a
// hold, or handed to the next local waiter.
func (l *Locker) contend(ctx context.Context, c *cohort) (lock.Lease, error) {
	s, err := l.contendRedis(ctx, c)
	if err != nil {
		l.cmu.Lock()
		l.handOnBusyLocked(c)
		l.cmu.Unlock()
		return nil, err
	}
	return s, nil
}

// got records a Redis acquisition and returns its first lease. If Close came
// first the lock is left to expire, as Close does with every held lock.
func (l *Locker) got(c *cohort, owner string, token uint64, validUntil time.Time) (*lease, error) {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	if l.cclosed {
		return nil, fmt.Errorf("redislock: acquire %q: %w", c.key, lock.ErrClosed)
	}
	return l.newHoldLocked(c, owner, token, validUntil), nil
}

func (l *Locker) contendRedis(ctx context.Context, c *cohort) (*lease, error) {
	key, k := c.key, c.k
	select {
	case <-l.done: // a turn handed on by a waiter that saw Close
		return nil, fmt.Errorf("redislock: acquire %q: %w", key, lock.ErrClosed)
	default:
	}
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
			return l.got(c, owner, res.token, sent.Add(res.pttl))
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
			return l.got(c, owner, token, time.Now().Add(l.ttl))
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
