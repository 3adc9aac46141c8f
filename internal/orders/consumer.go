package orders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/backoff"
	"seckill/internal/stock/redisstore"
)

// Timing of the loop. A read blocks at most readBlock so that a cancelled
// Run returns within it (go-redis does not interrupt a blocked read when
// its context ends); an acknowledgement after a commit gets ackTimeout of
// its own, so a Run stopped at that moment still acknowledges what it
// stored.
const (
	readBlock  = time.Second
	ackTimeout = 2 * time.Second
	backoffMin = 50 * time.Millisecond
	backoffMax = 2 * time.Second
)

// Consumer stores the ledger stream's entries in the orders table. Create
// it with New and run it with Run; Lag, Durable and Stats are safe to call
// at any time.
type Consumer struct {
	cfg     Config
	log     *slog.Logger
	stats   counters
	running atomic.Bool
}

// New returns a Consumer for cfg. It only validates: the tables must exist
// (EnsureSchema) and the group is created by Run.
func New(cfg Config) (*Consumer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("stream", cfg.Stream, "group", cfg.Group, "consumer", cfg.Consumer)
	return &Consumer{cfg: cfg, log: log}, nil
}

// Run stores entries until ctx ends, then returns nil. Failures are
// logged, counted and retried with a backoff; it never returns for them.
// A batch interrupted by ctx stays pending in Redis for another consumer.
// It returns within about a second of ctx's end (readBlock) whether Redis
// and MySQL are up or refuse connections; only a Redis that hangs in the
// middle of a blocked read holds it for the client's read timeout of a
// blocking command (go-redis: the block plus 10s): go-redis cancels on a
// context's deadline, not on its cancellation.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer c.running.Store(false)
	l := loop{c: c, own: true, block: readBlock}
	// Jitter keeps replicas that failed together from retrying in step.
	retry := backoff.Backoff{Initial: backoffMin, Max: backoffMax, Jitter: 0.5}
	for ctx.Err() == nil {
		_, err := l.step(ctx)
		l.trim(ctx)
		if err == nil {
			retry.Reset()
			continue
		}
		if ctx.Err() != nil {
			break
		}
		c.stats.errors.Add(1)
		delay := retry.Next()
		c.log.Warn("orders: retrying", "err", err, "in", delay)
		_ = backoff.Sleep(ctx, delay) // an ended ctx ends the loop
	}
	return nil
}

// loop is Run's state; only Run's goroutine touches it.
type loop struct {
	c *Consumer
	// own: read this consumer's own pending entries (id "0") before new
	// ones, for a replica restarted under the same name.
	own bool
	// block is how long a read of new entries waits for them: readBlock
	// for a consumer of its own, -1 (not at all) for one of many that
	// ItemConsumers takes turns with.
	block time.Duration
	// held is the batch being stored: kept across failures and resets
	// until it is stored and acknowledged.
	held []redis.XMessage
	// stored: held is committed, only its XACK is left.
	stored bool
	// nextClaim is when the next XAUTOCLAIM round starts; cursor is where
	// the current round goes on.
	nextClaim time.Time
	cursor    string
	// acked counts the entries acknowledged since the last trim; idle
	// says the last read found nothing; nextTrim is when a trim is due.
	acked    int
	idle     bool
	nextTrim time.Time
}

// step does one unit of work: finish the held batch, or claim idle
// entries, or read new ones, and store what it got. It returns the number
// of entries acknowledged.
func (l *loop) step(ctx context.Context) (int, error) {
	if l.held == nil {
		msgs, err := l.next(ctx)
		if err != nil || len(msgs) == 0 {
			return 0, err
		}
		if msgs = l.known(msgs); len(msgs) == 0 {
			return 0, nil
		}
		l.held, l.stored = msgs, false
	}
	c := l.c
	if !l.stored {
		out, err := c.store(ctx, l.held)
		if err != nil {
			return 0, err
		}
		c.stats.add(out)
		l.stored = true
	}
	ids := make([]string, len(l.held))
	for i, m := range l.held {
		ids[i] = m.ID
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	// XACK without the group (a reset since the read) answers 0, not an
	// error: nothing is left to acknowledge then.
	if err := c.cfg.Redis.XAck(actx, c.cfg.Stream, c.cfg.Group, ids...).Err(); err != nil {
		return 0, fmt.Errorf("orders: ack %d entries: %w", len(ids), err)
	}
	l.held = nil
	l.acked += len(ids)
	return len(ids), nil
}

// known drops from msgs the entries of a newer format than this build
// reads (redisstore.CheckLedgerFormat): they are neither stored as what they
// are not, nor dead-lettered, nor acknowledged. They stay pending in the
// group, where a newer replica's consumer claims them after ClaimIdle, as
// it would a stalled consumer's; the lag counts them meanwhile. They are
// counted (Stats.Newer) and logged, one line per read, every time this
// consumer meets them.
func (l *loop) known(msgs []redis.XMessage) []redis.XMessage {
	out := msgs[:0:0]
	var first error
	for _, m := range msgs {
		format, _ := m.Values["format"].(string)
		if err := redisstore.CheckLedgerFormat(m.ID, format); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		out = append(out, m)
	}
	if n := len(msgs) - len(out); n > 0 {
		l.c.stats.newer.Add(int64(n))
		l.c.log.Error("orders: ledger entries of a newer format left pending for a newer replica", "n", n, "first", first)
	}
	// This consumer's own pending entries are read from the start ("0")
	// until none is left: ones left pending here would be read forever.
	// The claim rounds take them from now on.
	if l.own && len(out) == 0 {
		l.own = false
	}
	return out
}

// Bounds of one trim: entries per script run (a run blocks Redis for
// about a millisecond per thousand), and runs per trim, so that a large
// backlog is trimmed over several trims while the consumer goes on.
const (
	trimLimit = 1000
	trimRuns  = 16
)

// trim removes what the group has acknowledged from the ledger in Redis
// (Config.TrimEvery), if this consumer acknowledged anything since its
// last trim and one is due: TrimEvery after the last, or at once when the
// last read found nothing (the sale has paused or ended: its tail should
// not wait). The trim itself is redisstore.TrimLedger, whose bound comes from
// the group in the same script run: every replica may trim at any time.
// A failed trim is logged and left to the next one: the entries stay, and
// are only stored, never lost.
func (l *loop) trim(ctx context.Context) {
	c := l.c
	every := c.cfg.TrimEvery
	if every <= 0 || l.acked == 0 || ctx.Err() != nil || (!l.idle && time.Now().Before(l.nextTrim)) {
		return
	}
	l.nextTrim = time.Now().Add(every)
	keys := redisstore.Keys{Orders: c.cfg.Stream}
	var total int64
	for range trimRuns {
		n, err := redisstore.TrimLedger(ctx, c.cfg.Redis, keys, trimLimit)
		if err != nil {
			if ctx.Err() == nil {
				c.stats.trimErrors.Add(1)
				c.log.Warn("orders: trimming the stored entries from the ledger failed; retried at the next trim", "err", err)
			}
			return
		}
		total += n
		c.stats.trimmed.Add(n)
		if n < trimLimit {
			l.acked = 0
			break
		}
	}
	if total > 0 {
		c.log.Debug("orders: trimmed stored entries from the ledger", "n", total)
	}
}

// next returns the next entries to store: idle ones claimed from other
// consumers when a claim round is due, else this consumer's own pending
// ones (at start), else new ones, waiting up to l.block for them.
func (l *loop) next(ctx context.Context) ([]redis.XMessage, error) {
	c := l.c
	cfg := c.cfg
	if !time.Now().Before(l.nextClaim) {
		msgs, err := l.claim(ctx)
		if err != nil || len(msgs) > 0 {
			return msgs, err
		}
	}
	id, block := ">", l.block
	if l.own {
		id, block = "0", -1
	}
	res, err := cfg.Redis.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group:    cfg.Group,
		Consumer: cfg.Consumer,
		Streams:  []string{cfg.Stream, id},
		Count:    int64(cfg.Batch),
		Block:    block,
	}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		l.idle = true
		return nil, nil
	case isNoGroup(err):
		return nil, l.createGroup(ctx)
	case err != nil:
		return nil, fmt.Errorf("orders: read: %w", err)
	}
	var msgs []redis.XMessage
	for _, s := range res {
		msgs = append(msgs, s.Messages...)
	}
	if l.own && len(msgs) == 0 {
		l.own = false
	}
	l.idle = len(msgs) == 0
	return msgs, nil
}

// claim takes one page of entries idle for ClaimIdle from any consumer of
// the group (a crashed replica's, or a stalled one's: storing twice is
// harmless). A round pages through the whole pending list, then the next
// starts ClaimIdle/2 later.
func (l *loop) claim(ctx context.Context) ([]redis.XMessage, error) {
	cfg := l.c.cfg
	if l.cursor == "" {
		l.cursor = "0-0"
	}
	msgs, next, err := cfg.Redis.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream:   cfg.Stream,
		Group:    cfg.Group,
		Consumer: cfg.Consumer,
		MinIdle:  cfg.ClaimIdle,
		Start:    l.cursor,
		Count:    int64(cfg.Batch),
	}).Result()
	if isNoGroup(err) {
		return nil, l.createGroup(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("orders: claim: %w", err)
	}
	l.cursor = next
	if next == "0-0" || next == "" {
		l.cursor = ""
		l.nextClaim = time.Now().Add(cfg.ClaimIdle / 2)
	}
	if len(msgs) > 0 {
		l.c.stats.claimed.Add(int64(len(msgs)))
		l.c.log.Info("orders: claimed idle entries", "n", len(msgs), "first", msgs[0].ID)
	}
	return msgs, nil
}

// createGroup makes the group from the stream's first entry (MKSTREAM: the
// stream may not exist yet after a reset). BUSYGROUP means another replica
// made it first, which is as good.
func (l *loop) createGroup(ctx context.Context) error {
	c := l.c
	err := c.cfg.Redis.XGroupCreateMkStream(ctx, c.cfg.Stream, c.cfg.Group, "0").Err()
	if err != nil && !isBusyGroup(err) {
		return fmt.Errorf("orders: create group: %w", err)
	}
	// A new group has no pending entries: nothing of ours to re-read, and
	// the claim cursor belongs to the old one.
	l.own, l.cursor = false, ""
	if err == nil {
		c.stats.groups.Add(1)
		c.log.Info("orders: consumer group created (new stream, or a reset deleted the old one)")
	}
	return nil
}
