package orders

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock/redisstore"
)

// Defaults of Config's optional fields.
const (
	DefaultGroup     = "orders"
	DefaultTable     = "orders"
	DefaultClaimIdle = 5 * time.Second
	DefaultBatch     = 100
	// MaxBatch bounds one multi-row INSERT (9 placeholders a row).
	MaxBatch = 1000
)

// ErrConfig is wrapped by New's errors; the message names the field.
var ErrConfig = errors.New("orders: bad config")

// ErrRunning is returned by Run while another Run of the same Consumer is
// under way: two loops would share one in-memory batch.
var ErrRunning = errors.New("orders: consumer already running")

// Config of a Consumer.
type Config struct {
	// Redis holds the stream. Required.
	Redis redis.UniversalClient
	// Stream is the ledger stream's key (stock's Keys.Orders). Required.
	Stream string
	// Group is the consumer group every replica shares. The default is
	// "orders".
	Group string
	// Consumer is this replica's name in the group, unique per replica (a
	// restarted replica that keeps its name stores its own pending entries
	// first). Required.
	Consumer string
	// DB is the MySQL or MariaDB pool (go-sql-driver/mysql). Required. Its
	// DSN must not set clientFoundRows: duplicates are told from inserts by
	// the affected-row count.
	DB *sql.DB
	// ReadDB, if set, is the pool Orders reads with (GET /orders of
	// trimmed orders): apart from DB, so that reads any buyer can send
	// never hold the connections the consumer stores with. The default is
	// DB.
	ReadDB *sql.DB
	// Table is the orders table (EnsureSchema creates it); the dead-letter
	// table is Table + "_dead". A plain identifier of at most 59
	// characters. The default is "orders".
	Table string
	// Item, if set, is the item whose ledger Stream is (redisstore.ItemKeys):
	// Table is then an items' table (EnsureItemsSchema), whose rows and
	// dead letters carry the item. Items are run by an ItemConsumers.
	Item string
	// UniqueBuyer says the per-user limit is 1: EnsureSchema must have been
	// called with the same value. It makes the consumer report a refused
	// (sale, user) as a conflict.
	UniqueBuyer bool
	// ClaimIdle is how long an entry stays pending before any consumer
	// re-claims it (XAUTOCLAIM): longer than a batch takes to store. The
	// default is 5s.
	ClaimIdle time.Duration
	// Batch is the number of entries per read and per transaction. The
	// default is 100, the maximum MaxBatch.
	Batch int
	// TrimEvery, if positive, makes the consumer remove from Redis the
	// ledger entries every group of the stream has acknowledged, with
	// their order index entries (redisstore.TrimLedger on the keys stock
	// derives from Stream): after its own acknowledgements, at most once
	// per TrimEvery, and once more as soon as it finds nothing to read.
	// Zero keeps them (the stream grows with every unit sold).
	TrimEvery time.Duration
	// Logger receives outages, resets, malformed entries and conflicts. The
	// default is slog.Default().
	Logger *slog.Logger
}

// identifier is what Table may be: no quoting games, and room for "_dead"
// within MySQL's 64 characters.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,58}$`)

// withDefaults validates cfg and fills in its defaults.
func (cfg Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	if cfg.Group == "" {
		cfg.Group = DefaultGroup
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if cfg.ClaimIdle == 0 {
		cfg.ClaimIdle = DefaultClaimIdle
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReadDB == nil {
		cfg.ReadDB = cfg.DB
	}
	switch {
	case cfg.Redis == nil:
		return bad("Redis is nil")
	case cfg.Stream == "":
		return bad("Stream is empty")
	case cfg.Consumer == "":
		return bad("Consumer is empty")
	case cfg.DB == nil:
		return bad("DB is nil")
	case !identifier.MatchString(cfg.Table):
		return bad("Table %q is not a plain identifier of at most 59 characters", cfg.Table)
	case cfg.ClaimIdle < time.Millisecond:
		return bad("ClaimIdle %v is below 1ms", cfg.ClaimIdle)
	case cfg.Batch < 0 || cfg.Batch > MaxBatch:
		return bad("Batch %d is outside 1..%d", cfg.Batch, MaxBatch)
	case cfg.Item != "" && cfg.UniqueBuyer:
		return bad("UniqueBuyer with Item %q: an item's per-user limit is its own, not the table's", cfg.Item)
	case len(cfg.Item) > redisstore.MaxItemIDLen:
		return bad("Item %q is longer than %d", cfg.Item, redisstore.MaxItemIDLen)
	case cfg.TrimEvery < 0:
		return bad("TrimEvery %v is negative", cfg.TrimEvery)
	}
	return cfg, nil
}
