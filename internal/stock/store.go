// Package stock is the inventory of the flash sale: a Store over Redis with
// fenced read/write primitives for the locked mode and a one-script sale for
// the atomic mode, and a Service that runs one sale end to end.
package stock

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

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
	statusOK     = 0
	statusFenced = 1
	statusMixed  = 2
)

// Keys names the Redis keys of one sale. All must be non-empty; in a Redis
// Cluster they would need a common hash tag, since the scripts touch several.
type Keys struct {
	Stock string // remaining units, an integer
	Lucky string // units sold, an integer
	Fence string // hash {backend, token}: the highest fencing token seen
	// Initial, if set, receives the stock each Reset starts from, so an
	// auditor can check stock + lucky == initial.
	Initial string
}

// Fence identifies the lease a read or write is made under.
type Fence struct {
	Backend string // lock backend name, e.g. "redis"; tokens compare only within one
	Token   uint64 // the lease's fencing token
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
	return &Store{rdb: rdb, keys: keys}
}

// Ping checks that the stock Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return wrapRedis(ctx, "ping", s.rdb.Ping(ctx).Err())
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

// Read returns the stock and records f.Token as the highest token seen, so
// any holder with a lower token can no longer write. A token lower than one
// already seen is rejected with ErrFenced; a token from another backend than
// the recorded one with ErrMixedBackends.
func (s *Store) Read(ctx context.Context, f Fence) (int64, error) {
	res, err := fencedRead.Run(ctx, s.rdb, []string{s.keys.Stock, s.keys.Fence},
		f.Backend, strconv.FormatUint(f.Token, 10)).Int64Slice()
	if err != nil {
		return 0, wrapRedis(ctx, "fenced read", err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("stock: fenced read: unexpected reply %v", res)
	}
	if err := fenceStatus(res[0], f); err != nil {
		return 0, fmt.Errorf("stock: fenced read: %w", err)
	}
	return res[1], nil
}

// Write sets the stock to newStock and counts one sale, only if f.Token is
// still the highest token seen — i.e. no one has read under a newer lease
// since f's own Read. Otherwise nothing is written and ErrFenced (or
// ErrMixedBackends) is returned.
func (s *Store) Write(ctx context.Context, f Fence, newStock int64) error {
	code, err := fencedWrite.Run(ctx, s.rdb, []string{s.keys.Stock, s.keys.Lucky, s.keys.Fence},
		f.Backend, strconv.FormatUint(f.Token, 10), newStock).Int64()
	if err != nil {
		return wrapRedis(ctx, "fenced write", err)
	}
	if err := fenceStatus(code, f); err != nil {
		return fmt.Errorf("stock: fenced write: %w", err)
	}
	return nil
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
// ErrSoldOut. It returns the stock after the sale.
func (s *Store) SellAtomic(ctx context.Context) (int64, error) {
	after, err := sellAtomic.Run(ctx, s.rdb, []string{s.keys.Stock, s.keys.Lucky}).Int64()
	if err != nil {
		return 0, wrapRedis(ctx, "atomic sell", err)
	}
	if after < 0 {
		return 0, ErrSoldOut
	}
	return after, nil
}

func fenceStatus(code int64, f Fence) error {
	switch code {
	case statusOK:
		return nil
	case statusFenced:
		return fmt.Errorf("%w: token %d of %q is not the highest seen", ErrFenced, f.Token, f.Backend)
	case statusMixed:
		return fmt.Errorf("%w: fence belongs to another backend than %q", ErrMixedBackends, f.Backend)
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
