package handler

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/api"
	"seckill/internal/health"
)

// DurabilityCheck is the stock Redis whose persistence GET /info reports
// (health.ReadDurability). It is read at start and again by /readyz at most
// every Every, never by a sale: the configuration can change under a
// running replica (CONFIG SET appendonly, a managed service's parameter
// change, a failover to a node configured otherwise), but not so often that
// a probe's pace misses it for long.
type DurabilityCheck struct {
	Redis health.DurabilityReader
	// ReplicaAcks is stock.min_replica_acks in effect.
	ReplicaAcks int
	// Known is the reading taken at start; nil when the Redis did not
	// answer then.
	Known *health.Durability
	// Every bounds how often /readyz reads it again; default 5s.
	Every time.Duration
}

// durabilityState is the last reading, shared by /info and /readyz.
type durabilityState struct {
	check   *DurabilityCheck
	rewind  string // Deps.Witness's Rewind, fixed at start
	current atomic.Pointer[health.Durability]
	mu      sync.Mutex // held by the one probe reading it again; the others use the last reading
	next    time.Time  // guarded by mu
}

func (s *durabilityState) init(c *DurabilityCheck) {
	if c == nil {
		return
	}
	cc := *c
	if cc.Every <= 0 {
		cc.Every = 5 * time.Second
	}
	s.check = &cc
	if cc.Known != nil {
		known := *cc.Known
		s.current.Store(&known)
		s.next = now().Add(cc.Every)
	}
}

// body is GET /info's "durability", absent until the Redis has answered.
func (s *durabilityState) body() *api.Durability {
	d := s.current.Load()
	if d == nil {
		return nil
	}
	return &api.Durability{AOF: d.AOF, Fsync: d.Fsync, Promise: d.Promise(), RedisVersion: d.Version, WaitAOF: d.WaitAOF,
		Rewind: s.rewind}
}

// durability reads the stock Redis's persistence again when the last
// reading is older than DurabilityCheck.Every, logs a change of what a sale
// promises, and answers /readyz's "redis" state: OK, unless
// Config.RequireAOF and the Redis has no AOF, or none could be read.
func (a *server) durability(ctx context.Context) string {
	s := &a.dur
	if s.check == nil {
		return api.OK
	}
	if s.mu.TryLock() {
		if t := now(); !t.Before(s.next) {
			s.next = t.Add(s.check.Every)
			a.readDurability(ctx)
		}
		s.mu.Unlock()
	}
	if !a.cfg.RequireAOF {
		return api.OK
	}
	switch d := s.current.Load(); {
	case d == nil:
		return "durability unknown: stock.require_aof needs the Redis to report its AOF (INFO persistence)"
	case !d.AOF:
		return "no AOF: stock.require_aof refuses a Redis that keeps sales in memory only (appendonly no)"
	}
	return api.OK
}

// readDurability takes a new reading. One that fails keeps the last: the
// Redis's configuration is what it was until read otherwise.
func (a *server) readDurability(ctx context.Context) {
	s := &a.dur
	rctx, cancel := context.WithTimeout(ctx, a.cfg.ProbeTimeout)
	d, err := health.ReadDurability(rctx, s.check.Redis)
	cancel()
	if err != nil {
		if ok, suppressed := a.logs.Allow("durability"); ok {
			a.deps.Logger.Warn("could not read the stock Redis's persistence", "err", err, "suppressed", suppressed)
		}
		return
	}
	d.ReplicaAcks = s.check.ReplicaAcks
	prev := s.current.Swap(&d)
	if prev != nil && prev.Promise() == d.Promise() {
		return
	}
	level := slog.LevelInfo
	if d.MemoryOnly() {
		level = slog.LevelWarn
	}
	attrs := []any{"promise", d.Promise(), "aof", d.AOF, "fsync", d.Fsync, "redis_version", d.Version}
	if prev == nil { // not reachable at start: this is the first reading
		a.deps.Logger.Log(ctx, level, "stock redis durability", attrs...)
		return
	}
	a.deps.Logger.Log(ctx, level, "stock redis durability changed", append(attrs, "was", prev.Promise())...)
}
