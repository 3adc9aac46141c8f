package redislock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"seckill/internal/backoff"
	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
)

// Acquire blocks until this Locker holds key, or ctx is done (the error wraps
// lock.ErrNotObtained and ctx.Err()), or Redis fails (lock.ErrUnavailable),
// or the Locker is closed (lock.ErrClosed).
func (l *Locker) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	return l.co.Acquire(ctx, key)
}

// server is the Locker's Redis side, as the cohort sees it.
type server struct{ l *Locker }

// Acquire takes key's lock in Redis for the front goroutine of its cohort.
func (s server) Acquire(ctx context.Context, key string) (cohort.Hold, error) {
	l := s.l
	if err := l.subscribe(ctx); err != nil {
		return nil, err
	}
	h, err := l.contendRedis(ctx, key)
	if err != nil {
		return nil, err // not a typed nil *hold
	}
	return h, nil
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

// got records a Redis acquisition as a hold and starts its watchdog. If
// Close came first the lock is left to expire, as Close does with every
// held lock.
func (l *Locker) got(key string, k keys, owner string, token uint64, validUntil time.Time) (*hold, error) {
	if l.isClosed() {
		return nil, lock.ErrClosed
	}
	l.holds.Add(1)
	h := &hold{l: l, key: key, k: k, owner: owner, base: token, Signal: lock.NewSignal()}
	l.hmu.Lock() // before the watchdog can report a loss
	h.dog = l.dog.Start(validUntil, l.renew(h), l.watchLost(h))
	l.hmu.Unlock()
	return h, nil
}

// contendRedis queues owner for key in Redis until it holds the lock: an
// acquire.lua call, then a hand-off message (or, as a fallback, a retry).
func (l *Locker) contendRedis(ctx context.Context, key string) (*hold, error) {
	k := keysFor(key)
	select {
	case <-l.done:
		return nil, lock.ErrClosed
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
	retry := backoff.Backoff{Initial: minRetry, Max: maxRetry}
	for {
		sent := time.Now()
		res, err := l.runAcquire(ctx, k, owner)
		if err != nil {
			// The script may have run before the reply was lost: withdraw,
			// which also frees the lock if it was taken for us.
			l.withdraw(k, owner)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
		}
		if res.held {
			if res.handed {
				l.handedOver.Add(1)
			}
			return l.got(key, k, owner, res.token, sent.Add(res.pttl))
		}

		wait := retry.Next()
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
			return l.got(key, k, owner, token, time.Now().Add(l.ttl))
		case <-timer.C:
		case <-ctx.Done():
			l.withdraw(k, owner)
			return nil, ctx.Err()
		case <-l.done:
			l.withdraw(k, owner)
			return nil, lock.ErrClosed
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
	if !l.g.Go(run) {
		run() // closing: Close is not waiting for spawned work any more
	}
}
