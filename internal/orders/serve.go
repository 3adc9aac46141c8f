package orders

import (
	"context"
	"log/slog"
	"time"

	"seckill/internal/backoff"
)

// Timing of Serve's schema step: each attempt is bounded, and failed ones
// back off up to a minute (a MySQL down for long is retried, not
// hammered; sales go on meanwhile, their orders waiting in the stream).
const (
	schemaTimeout  = 5 * time.Second
	schemaRetryMin = time.Second
	schemaRetryMax = time.Minute
)

// Serve is how a service runs the consumer: it creates the tables once
// MySQL answers (EnsureSchema, retried with a backoff), then runs until
// ctx ends (Run). It returns nil when ctx ends, at either step.
func (c *Consumer) Serve(ctx context.Context) error {
	if !ensure(ctx, c.log, func(ctx context.Context) error {
		return ensureSchema(ctx, c.cfg.DB, c.cfg.Table, c.cfg.UniqueBuyer, c.log)
	}) {
		return nil
	}
	c.log.Info("durable orders: storing the ledger in MySQL", "table", c.cfg.Table)
	return c.Run(ctx)
}

// ensure runs schema until it succeeds, each attempt bounded and failed
// ones backed off; false when ctx ended first.
func ensure(ctx context.Context, log *slog.Logger, schema func(context.Context) error) bool {
	retry := backoff.Backoff{Initial: schemaRetryMin, Max: schemaRetryMax}
	for {
		sctx, cancel := context.WithTimeout(ctx, schemaTimeout)
		err := schema(sctx)
		cancel()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		delay := retry.Next()
		log.Warn("durable orders: MySQL not ready; orders wait in the ledger stream", "err", err, "retry_in", delay)
		if backoff.Sleep(ctx, delay) != nil {
			return false
		}
	}
}
