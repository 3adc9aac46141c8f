package handler

import (
	"context"
	"time"

	"seckill/internal/api"
	"seckill/internal/health"
	"seckill/internal/stock/redisstore"
)

// readings.go: what /readyz reports from readings too costly for every
// probe (several round trips, other servers): each is taken again at most
// once a period, by the one probe that finds it due, and the other probes
// answer with the last one (health.Reading). None of them makes the
// replica unready.

// readingEvery is how often /readyz reads the items' halt marks again: a
// probe's pace (seconds), so a change shows within one or two probes.
const readingEvery = 5 * time.Second

// itemsSurveyor is Deps.Items when it can read every item's halt mark at
// once, for /readyz; *redisstore.Items is one.
type itemsSurveyor interface {
	Survey(ctx context.Context) (redisstore.ItemsSurvey, error)
}

// maxNamed bounds the items /readyz names; the others are counted.
const maxNamed = 10

// haltedItems is /readyz's "items": the halted items, named, or "" when
// none is (or none could be read yet). A halted item refuses its own
// sales only, and on every replica alike (the halt is in Redis): making
// the replicas unready for it would take the default sale and every other
// item out of the load balancer and fix nothing, so it is a warning.
func (a *server) haltedItems(ctx context.Context) string {
	sv, ok := a.deps.Items.(itemsSurveyor)
	if !ok {
		return ""
	}
	s := a.survey.Get(now(), func() (redisstore.ItemsSurvey, error) {
		rctx, cancel := context.WithTimeout(ctx, a.cfg.ProbeTimeout)
		defer cancel()
		s, err := sv.Survey(rctx)
		if err != nil {
			if ok, suppressed := a.logs.Allow("items_survey"); ok {
				a.deps.Logger.Warn("could not read the items' halt marks", "err", err, "suppressed", suppressed)
			}
		}
		return s, err
	})
	if s == nil || len(s.Halted) == 0 {
		return ""
	}
	return "halted: " + health.Named(s.Halted, maxNamed) +
		" (their sales answer store_lost until reconciled; GET /items/<id> says why)"
}

// clock is /readyz's "clock" (health.Checker.Clock).
func (a *server) clock(ctx context.Context) string {
	if a.deps.Health == nil {
		return ""
	}
	return a.deps.Health.Clock(ctx)
}

// memory is /readyz's "memory" (health.Checker.Memory): the units left
// are the default sale's, read with the memory, and the items', from
// their last survey (haltedItems reads it first).
func (a *server) memory(ctx context.Context) string {
	if a.deps.Health == nil {
		return ""
	}
	var items int64
	if s := a.survey.Last(); s != nil {
		items = s.Stock
	}
	return a.deps.Health.Memory(ctx, func(ctx context.Context) int64 {
		// A sale that cannot be read (lost, not an integer) needs no
		// room: the other checks say what is wrong with it.
		st, err := a.deps.Inventory.Status(ctx)
		if err != nil {
			return 0
		}
		return st.Stock
	}, items)
}

// durability is GET /info's "durability", absent until the stock Redis
// has answered.
func (a *server) durability() *api.Durability {
	if a.deps.Health == nil {
		return nil
	}
	d := a.deps.Health.Durability()
	if d == nil {
		return nil
	}
	return &api.Durability{AOF: d.AOF, Fsync: d.Fsync, Promise: d.Promise(), RedisVersion: d.Version, WaitAOF: d.WaitAOF,
		Rewind: a.rewind}
}
