package bench

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/sell.lua
var sellLua string

var sellScript = redis.NewScript(sellLua)

// CriticalSectionRoundTrips is how many Redis round trips a locked sale makes
// while holding the lock: GET stock, then one MULTI/EXEC with SET and INCR.
// The serial bound is 1 / (CriticalSectionRoundTrips × RTT).
const CriticalSectionRoundTrips = 2

// saleKeys are one benchmark row's Redis keys. The hash tag keeps them in one
// slot, as a MULTI/EXEC needs on a cluster.
type saleKeys struct {
	stock, lucky string
}

func keysFor(id string) saleKeys {
	return saleKeys{stock: "{bench:" + id + "}:stock", lucky: "{bench:" + id + "}:lucky"}
}

// reset sets the stock to n and clears the lucky counter.
func (k saleKeys) reset(ctx context.Context, rdb *redis.Client, n int64) error {
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, k.stock, n, 0)
		p.Del(ctx, k.lucky)
		return nil
	})
	if err != nil {
		return fmt.Errorf("reset %s: %w", k.stock, err)
	}
	return nil
}

// read returns stock and lucky.
func (k saleKeys) read(ctx context.Context, rdb *redis.Client) (stock, lucky int64, err error) {
	vals, err := rdb.MGet(ctx, k.stock, k.lucky).Result()
	if err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", k.stock, err)
	}
	parse := func(v any) (int64, error) {
		if v == nil {
			return 0, nil
		}
		var n int64
		_, err := fmt.Sscan(v.(string), &n)
		return n, err
	}
	if stock, err = parse(vals[0]); err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", k.stock, err)
	}
	if lucky, err = parse(vals[1]); err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", k.lucky, err)
	}
	return stock, lucky, nil
}

// sellLocked is the critical section, run while holding the lock: read the
// stock, and if any is left write stock-1 and count the buyer in one
// MULTI/EXEC. It trusts the lock completely (a plain read-modify-write), so
// an oversell or a lost sale shows up in the invariant check. It returns the
// stock left and whether a unit was sold.
func sellLocked(ctx context.Context, rdb *redis.Client, k saleKeys) (left int64, sold bool, err error) {
	n, err := rdb.Get(ctx, k.stock).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("get stock: %w", err)
	}
	if n <= 0 {
		return n, false, nil
	}
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, k.stock, n-1, 0)
		p.Incr(ctx, k.lucky)
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("write stock: %w", err)
	}
	return n - 1, true, nil
}

// sellAtomic is the lock-free sale: one script, one round trip.
func sellAtomic(ctx context.Context, rdb *redis.Client, k saleKeys) (left int64, sold bool, err error) {
	n, err := sellScript.Run(ctx, rdb, []string{k.stock, k.lucky}).Int64()
	if err != nil {
		return 0, false, fmt.Errorf("sell script: %w", err)
	}
	if n < 0 {
		return 0, false, nil
	}
	return n, true, nil
}
