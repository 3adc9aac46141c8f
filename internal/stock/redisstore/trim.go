package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// trim.go: trimming the ledger of what a durable copy holds.
//
// Every unit sold leaves a stream entry and an index entry in the stock
// Redis, which refuses to evict: a ledger that only grows ends the sale
// once Redis is full. Once every consumer group of the stream has
// acknowledged an entry (the durable orders acknowledge only what MySQL
// committed), Redis no longer needs it: TrimLedger removes it and its
// index entry, and counts it, so the ledger's order count (LedgerStats)
// still counts every unit sold. The buyers' counts, the per-user set, the
// idempotency records and the receipts stay: the limit, OrdersByUser's
// list and the replays need them.

// ErrNoStream: TrimLedger was given keys without the ledger's stream.
var ErrNoStream = errors.New("stock: no ledger stream")

// TrimLedger removes from the ledger of k (Keys.Orders and the names
// derived from it) the oldest entries that every consumer group of the
// stream has acknowledged, at most limit of them, with their index
// entries, and adds them to the trimmed count (Keys.Trimmed). It returns
// how many went. One script run: the bound is read from the groups in the
// same run, so concurrent calls (every replica's consumer) never trim a
// pending or undelivered entry, nor the next sale's after a Reset; a
// second call finds nothing left to trim. A stream without a group
// is not trimmed.
func TrimLedger(ctx context.Context, rdb redis.Scripter, k Keys, limit int) (int64, error) {
	if k.Orders == "" {
		return 0, ErrNoStream
	}
	if limit < 1 {
		return 0, fmt.Errorf("stock: trim ledger: limit %d below 1", limit)
	}
	k = k.withDefaults()
	res, err := trimScript.Run(ctx, rdb, []string{k.Orders, k.OrderIndex, k.Trimmed}, limit).Slice()
	if err != nil {
		return 0, WrapRedis(ctx, "trim ledger", err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("stock: trim ledger: unexpected reply %v", res)
	}
	n, ok := res[0].(int64)
	if !ok {
		return 0, fmt.Errorf("stock: trim ledger: unexpected reply %v", res)
	}
	return n, nil
}
