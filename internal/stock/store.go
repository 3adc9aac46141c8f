// Package stock is the inventory of the flash sale: a Store over Redis with
// fenced read/write primitives for the locked mode and a one-script sale for
// the atomic mode, and a Service that runs one sale end to end.
//
// The rule of this package: a reply that never came back does not mean the
// command did not run. Every script that changes the stock is idempotent by
// the identity it carries — the sale's attempt id, as the lease id in the
// fence and as the name of its receipt — and answers a second run with the
// first run's result. The Redis client must not retry on its own (stockd
// sets MaxRetries -1); the Service retries its own calls with the same
// identity until a definite answer or ServiceConfig.ConfirmTimeout, and then
// reports ErrUnconfirmed, never a sale it could not confirm.
//
// The fence (fenced_read.lua, fenced_write.lua) compares identities, not
// only numbers: the write is a compare-and-set on the lease that made the
// read, so two holders with equal tokens cannot both write, and tokens of
// another lock identity are refused. A lock service that lost its state is
// followed again by moving its tokens past the fence (lock.TokenAdvancer) or,
// once the fence has been quiet for a lock TTL, by restarting it.
package stock

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/fenced_read.lua
	fencedReadSrc string
	//go:embed lua/fenced_write.lua
	fencedWriteSrc string
	//go:embed lua/sell_atomic.lua
	sellAtomicSrc string

	fencedRead  = redis.NewScript(fencedReadSrc)
	fencedWrite = redis.NewScript(fencedWriteSrc)
	sellAtomic  = redis.NewScript(sellAtomicSrc)
)

// Script status codes shared by fenced_read.lua and fenced_write.lua.
const (
	statusOK        = 0
	statusFenced    = 1
	statusMixed     = 2
	statusCollision = 3
)

// ReceiptTTL is how long a write's receipt outlives it: far longer than any
// retry of that write (Service.ConfirmTimeout), so a late retry still finds
// it and sells nothing twice.
const ReceiptTTL = 10 * time.Minute

// Keys names the Redis keys of one sale. All must be non-empty; in a Redis
// Cluster they would need a common hash tag, since the scripts touch several.
type Keys struct {
	Stock string // remaining units, an integer
	Lucky string // units sold, an integer
	Fence string // hash {lock, token, lease}: the highest token seen and its reader
	// Receipts prefixes the per-attempt receipt keys that make writes
	// exactly-once; default Fence + ":receipt:".
	Receipts string
	// Initial, if set, receives the stock each Reset starts from, so an
	// auditor can check stock + lucky == initial.
	Initial string
}

// Fence identifies the lease a read or write is made under.
type Fence struct {
	// Lock names the token space: the backend and its lock key (and, where a
	// backend knows it, its cluster), e.g. "redis/stock:lock". Tokens of
	// different locks never compare: the store refuses a lock other than the
	// one its fence recorded.
	Lock  string
	Token uint64 // the lease's fencing token
	// Lease is unique per acquisition (the sale's attempt id). Two leases
	// with one token mean the lock service handed the token out twice; the
	// store refuses both. It also names the write's receipt.
	Lease string
	// Quiet, if positive, lets a read that would be refused as stale or as
	// another lock's restart the fence at its token, once no read at all
	// has been accepted for that long (about one lock TTL): how the sale
	// recovers by itself from a lock service that lost its state. Zero
	// keeps the fence strict forever.
	Quiet time.Duration
}

// Reading is the outcome of an accepted Read.
type Reading struct {
	Stock int64
	// Restarted: the fence had been quiet and this read restarted it at its
	// own token (see Fence.Quiet) — a lock service lost state, or another
	// lock took over.
	Restarted bool
}

// Status is a snapshot of the sale.
type Status struct {
	Stock int64 `json:"stock"`
	Lucky int64 `json:"lucky"`
}

// Store is the stock in Redis. It is safe for concurrent use.
type Store struct {
	rdb  redis.UniversalClient
	keys Keys
}

// NewStore returns a Store over rdb using keys. The caller owns rdb.
func NewStore(rdb redis.UniversalClient, keys Keys) *Store {
	if keys.Receipts == "" {
		keys.Receipts = keys.Fence + ":receipt:"
	}
	return &Store{rdb: rdb, keys: keys}
}

// Ping checks that the stock Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return wrapRedis(ctx, "ping", s.rdb.Ping(ctx).Err())
}

// LoadScripts loads the store's scripts into Redis, so that the first sale
// runs its script at once instead of learning NOSCRIPT and sending it whole.
// Optional: a script missing later (a restarted Redis) is sent again by
// go-redis; tests use it so a fault lands on the script itself.
func (s *Store) LoadScripts(ctx context.Context) error {
	for _, sc := range []*redis.Script{fencedRead, fencedWrite, sellAtomic} {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return wrapRedis(ctx, "load scripts", err)
		}
	}
	return nil
}

// Reset starts a new sale: stock = n, lucky = 0, and the fence is deleted so
// the lock backend's token sequence (or the backend itself) may start over.
// All of it happens in one MULTI/EXEC: no reader sees half a reset.
func (s *Store) Reset(ctx context.Context, n int64) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.keys.Stock, n, 0)
		p.Set(ctx, s.keys.Lucky, 0, 0)
		p.Del(ctx, s.keys.Fence)
		if s.keys.Initial != "" {
			p.Set(ctx, s.keys.Initial, n, 0)
		}
		return nil
	})
	return wrapRedis(ctx, "reset", err)
}

// Status reads stock and lucky in one round trip; missing keys read as 0.
func (s *Store) Status(ctx context.Context) (Status, error) {
	vals, err := s.rdb.MGet(ctx, s.keys.Stock, s.keys.Lucky).Result()
	if err != nil {
		return Status{}, wrapRedis(ctx, "status", err)
	}
	var st Status
	if st.Stock, err = parseInt(vals[0]); err != nil {
		return Status{}, fmt.Errorf("stock: status: %s: %w", s.keys.Stock, err)
	}
	if st.Lucky, err = parseInt(vals[1]); err != nil {
		return Status{}, fmt.Errorf("stock: status: %s: %w", s.keys.Lucky, err)
	}
	return st, nil
}

// Read returns the stock and records f as the fence's current reader, so
// that no earlier reader can write any more. It is refused with a
// *FencedError (wrapping ErrFenced) for a token below the highest seen, or
// equal to it under another lease (a collision: both are then refused), and
// with ErrMixedBackends when the fence belongs to another lock — unless the
// fence has been quiet for f.Quiet, when it restarts at f (Reading.Restarted).
// A second Read of the same lease answers as the first did.
func (s *Store) Read(ctx context.Context, f Fence) (Reading, error) {
	res, err := fencedRead.Run(ctx, s.rdb, []string{s.keys.Stock, s.keys.Fence},
		f.Lock, strconv.FormatUint(f.Token, 10), f.Lease, f.Quiet.Milliseconds()).Slice()
	if err != nil {
		return Reading{}, wrapRedis(ctx, "fenced read", err)
	}
	if len(res) != 4 {
		return Reading{}, fmt.Errorf("stock: fenced read: unexpected reply %v", res)
	}
	code, _ := res[0].(int64)
	stock, _ := res[1].(int64)
	highest, _ := res[2].(string)
	restarted, _ := res[3].(int64)
	if err := fenceStatus(code, f, highest); err != nil {
		return Reading{}, fmt.Errorf("stock: fenced read: %w", err)
	}
	return Reading{Stock: stock, Restarted: restarted == 1}, nil
}

// Write sets the stock to newStock and counts one sale, only if f is still
// the fence's current reader — i.e. no one has read since f's own Read.
// Otherwise nothing is written and a *FencedError (or ErrMixedBackends) is
// returned. It is exactly-once per lease: a second Write of the same lease
// (a retry whose first reply was lost) finds the first one's receipt and
// returns nil without selling again.
func (s *Store) Write(ctx context.Context, f Fence, newStock int64) error {
	code, err := fencedWrite.Run(ctx, s.rdb,
		[]string{s.keys.Stock, s.keys.Lucky, s.keys.Fence, s.keys.Receipts + f.Lease},
		f.Lock, strconv.FormatUint(f.Token, 10), f.Lease, newStock, ReceiptTTL.Milliseconds()).Int64()
	if err != nil {
		return wrapRedis(ctx, "fenced write", err)
	}
	if err := fenceStatus(code, f, ""); err != nil {
		return fmt.Errorf("stock: fenced write: %w", err)
	}
	return nil
}

// Receipt reports whether the write or atomic sale of attempt id took
// effect, and the stock it left: how a sale answered "unconfirmed" is
// settled afterwards. Receipts live ReceiptTTL.
func (s *Store) Receipt(ctx context.Context, id string) (stockAfter int64, sold bool, err error) {
	v, err := s.rdb.Get(ctx, s.keys.Receipts+id).Result()
	if err == redis.Nil {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, wrapRedis(ctx, "receipt", err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("stock: receipt %s: %w", id, err)
	}
	return n, true, nil
}

// ReadUnfenced is a plain GET, for backends without usable tokens (and for
// fencing switched off): it is what the articles do, and how they oversell.
func (s *Store) ReadUnfenced(ctx context.Context) (int64, error) {
	v, err := s.rdb.Get(ctx, s.keys.Stock).Result()
	if err == redis.Nil {
		return 0, nil
	}
	if err != nil {
		return 0, wrapRedis(ctx, "read", err)
	}
	return parseInt(v)
}

// WriteUnfenced sets the stock and counts one sale in one MULTI/EXEC, with no
// check of who is writing.
func (s *Store) WriteUnfenced(ctx context.Context, newStock int64) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.keys.Stock, newStock, 0)
		p.Incr(ctx, s.keys.Lucky)
		return nil
	})
	return wrapRedis(ctx, "write", err)
}

// SellAtomic sells one unit in a single Lua script without any lock: it
// decrements the stock if positive and counts the sale, or returns
// ErrSoldOut. It returns the stock after the sale. It is exactly-once per
// attempt id: a second call with the same id returns the first one's result
// and sells nothing.
func (s *Store) SellAtomic(ctx context.Context, id string) (int64, error) {
	after, err := sellAtomic.Run(ctx, s.rdb, []string{s.keys.Stock, s.keys.Lucky, s.keys.Receipts + id},
		ReceiptTTL.Milliseconds()).Int64()
	if err != nil {
		return 0, wrapRedis(ctx, "atomic sell", err)
	}
	if after < 0 {
		return 0, ErrSoldOut
	}
	return after, nil
}

// fenceStatus turns a script status into an error; highest is the fence's
// token as the script reported it (read only).
func fenceStatus(code int64, f Fence, highest string) error {
	switch code {
	case statusOK:
		return nil
	case statusFenced, statusCollision:
		fe := &FencedError{Lock: f.Lock, Token: f.Token, Collision: code == statusCollision}
		fe.Highest, _ = strconv.ParseUint(highest, 10, 64)
		return fe
	case statusMixed:
		return fmt.Errorf("%w: the fence was recorded by another lock than %q (backend, lock key or lock cluster differ)",
			ErrMixedBackends, f.Lock)
	default:
		return fmt.Errorf("unexpected script status %d", code)
	}
}

// parseInt reads an MGET/GET value: nil (missing key) is 0.
func parseInt(v any) (int64, error) {
	switch v := v.(type) {
	case nil:
		return 0, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	default:
		return 0, fmt.Errorf("unexpected value type %T", v)
	}
}
