package flawedlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"seckill/internal/failpoint"
	"seckill/internal/lock"
)

// trySetNX is the Jedis article's attempt: SETNX, then EXPIRE as a second
// command. Anything that stops it between the two (a crash, a failed or
// timed-out EXPIRE, the failpoint) leaves a lock without a TTL.
func trySetNX(ctx context.Context, l *Locker, k, owner string) (bool, error) {
	// The literal SETNX command, not SET NX: the two-command shape is the
	// point.
	n, err := l.rdb.Do(ctx, "SETNX", k, owner).Int()
	if err != nil {
		return false, fmt.Errorf("SETNX: %w", err)
	}
	if n == 0 {
		if l.opts.RepairMissingTTL {
			return false, repairTTL(ctx, l, k)
		}
		return false, nil
	}
	if err := failpoint.Eval(ctx, FailpointAfterSetNX); err != nil {
		return false, fmt.Errorf("between SETNX and EXPIRE: %w", err)
	}
	if err := l.rdb.PExpire(ctx, k, l.opts.TTL).Err(); err != nil {
		return false, fmt.Errorf("EXPIRE after SETNX, the lock has no TTL: %w", err)
	}
	return true, nil
}

// repairTTL is the Jedis article's "if (conn.ttl(lockKey) == -1)
// conn.expire(lockKey, lockExpire)": a waiter gives a TTL-less lock one. It
// races with a live holder's own EXPIRE, harmlessly: both set the same TTL.
func repairTTL(ctx context.Context, l *Locker, k string) error {
	ttl, err := l.rdb.PTTL(ctx, k).Result()
	if err != nil {
		return fmt.Errorf("PTTL: %w", err)
	}
	if ttl != -1 { // -1: exists without a TTL (go-redis passes -1 and -2 through raw)
		return nil
	}
	if err := l.rdb.PExpire(ctx, k, l.opts.TTL).Err(); err != nil {
		return fmt.Errorf("EXPIRE a lock found without a TTL: %w", err)
	}
	return nil
}

// trySetNXPX is hm-dianping's attempt, atomic and correct on its own:
// SET key owner NX PX ttl.
func trySetNXPX(ctx context.Context, l *Locker, k, owner string) (bool, error) {
	ok, err := l.rdb.SetNX(ctx, k, owner, l.opts.TTL).Result()
	if err != nil {
		return false, fmt.Errorf("SET NX PX: %w", err)
	}
	return ok, nil
}

// releaseWatch is the Jedis article's release: WATCH, GET, compare, then
// MULTI/DEL/EXEC, retried when EXEC aborts because the key changed. This
// part is sound: EXEC fails if the key changed after the GET.
func releaseWatch(ctx context.Context, l *Locker, k, owner string) error {
	for {
		err := l.rdb.Watch(ctx, func(tx *redis.Tx) error {
			v, err := tx.Get(ctx, k).Result()
			switch {
			case errors.Is(err, redis.Nil):
				return fmt.Errorf("%w: gone", lock.ErrNotHeld)
			case err != nil:
				return fmt.Errorf("GET: %w", err)
			case v != owner:
				return fmt.Errorf("%w: owned by another", lock.ErrNotHeld)
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Del(ctx, k)
				return nil
			})
			return err
		}, k)
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
		// EXEC aborted: the key changed under WATCH. Look again, as the
		// article's `continue` does, unless the caller has given up.
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("WATCH/EXEC retry: %w", ctxErr)
		}
	}
}

// releaseNoCheck is hm-dianping v1: DEL, whoever's lock it is now.
func releaseNoCheck(ctx context.Context, l *Locker, k, _ string) error {
	if err := failpoint.Eval(ctx, FailpointNoCheckBeforeDel); err != nil {
		return err
	}
	n, err := l.rdb.Del(ctx, k).Result()
	if err != nil {
		return fmt.Errorf("DEL: %w", err)
	}
	if n == 0 {
		// Expired and not retaken. When it was retaken, DEL returns 1 and
		// this release looks like any other: the flaw.
		return fmt.Errorf("%w: gone", lock.ErrNotHeld)
	}
	return nil
}

// releaseCheckDel is hm-dianping v2: GET, compare, then DEL as a separate
// command. The lock can change hands between the two.
func releaseCheckDel(ctx context.Context, l *Locker, k, owner string) error {
	v, err := l.rdb.Get(ctx, k).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return fmt.Errorf("%w: gone", lock.ErrNotHeld)
	case err != nil:
		return fmt.Errorf("GET: %w", err)
	case v != owner:
		return fmt.Errorf("%w: owned by another", lock.ErrNotHeld)
	}
	if err := failpoint.Eval(ctx, FailpointCheckDelBeforeDel); err != nil {
		return err
	}
	n, err := l.rdb.Del(ctx, k).Result()
	if err != nil {
		return fmt.Errorf("DEL: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: expired between GET and DEL", lock.ErrNotHeld)
	}
	return nil
}
