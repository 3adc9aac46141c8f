package stockd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"seckill/internal/health"
	"time"
)

// ErrNoAOF refuses the start with stock.require_aof (exit status 2, as a
// configuration error: the fix is the Redis's configuration, or the key).
var ErrNoAOF = errors.New("refusing a stock Redis without an append-only file")

// aofFix says how to give a Redis an AOF, for the refusal and the warning.
const aofFix = "run CONFIG SET appendonly yes on it and put the lines \"appendonly yes\" and " +
	"\"appendfsync everysec\" (or always) in its redis.conf (on a managed Redis: its AOF or " +
	"durability setting)"

// checkDurability reads what the stock Redis makes of a sale answered
// sold, logs it (WARN when only one Redis's memory holds it), and with
// stock.require_aof refuses a Redis without an AOF. A Redis that cannot be
// reached yet is no reason to refuse (it may come up after us): /readyz
// reads it once it answers. The reading is nil then.
func checkDurability(ctx context.Context, cfg *Config, log *slog.Logger, rdb health.DurabilityReader, acks int) (*health.Durability, error) {
	cctx, cancel := context.WithTimeout(ctx, cfg.Redis.Timeout)
	d, err := health.ReadDurability(cctx, rdb)
	cancel()
	switch {
	case err == nil:
	case unanswered(ctx, err):
		log.Info("stock redis not reachable yet: /readyz reads its persistence once it answers", "err", err)
		return nil, nil
	case cfg.Stock.RequireAOF:
		return nil, fmt.Errorf("%w: stock.require_aof is on and its persistence cannot be read: %w", ErrNoAOF, err)
	default:
		log.Warn("could not read the stock Redis's persistence: GET /info cannot say what a 200 survives", "err", err)
		return nil, nil
	}
	d.ReplicaAcks = acks
	attrs := []any{"promise", d.Promise(), "aof", d.AOF, "fsync", d.Fsync, "waitaof", d.WaitAOF,
		"redis_version", d.Version, "min_replica_acks", acks, "rdb_changes_since_last_save", d.UnsavedChanges}
	if !d.LastSave.IsZero() {
		attrs = append(attrs, "rdb_last_save", d.LastSave.UTC().Format(time.RFC3339))
	}
	switch {
	case !d.AOF && cfg.Stock.RequireAOF:
		return nil, fmt.Errorf("%w: stock.require_aof is on, and %s; %s, or set stock.require_aof: false",
			ErrNoAOF, d.Promise(), aofFix)
	case d.MemoryOnly():
		log.Warn("stock redis durability", append(attrs, "fix", aofFix)...)
	default:
		log.Info("stock redis durability", attrs...)
	}
	return &d, nil
}
