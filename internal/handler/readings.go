package handler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/stock"
)

// readings.go: what /readyz reports from readings too costly for every
// probe (several round trips, other servers): each is taken again at most
// once a period, by the one probe that finds it due, and the other probes
// answer with the last one. None of them makes the replica unready.

// readingEvery is how often /readyz reads the items' halt marks again: a
// probe's pace (seconds), so a halt shows within one or two probes.
const readingEvery = 5 * time.Second

// cached is the last reading of T and when the next is due.
type cached[T any] struct {
	every time.Duration
	mu    sync.Mutex // held by the one probe reading again
	next  time.Time  // guarded by mu
	last  atomic.Pointer[T]
}

// get returns the last reading, after taking a new one with read when it
// is due and no other probe is taking one; nil before any read succeeded.
// A failed read keeps the last: the state is what it was until read
// otherwise, and the dependency's own check says it does not answer.
func (c *cached[T]) get(read func() (T, error)) *T {
	if c.mu.TryLock() {
		if t := now(); !t.Before(c.next) {
			c.next = t.Add(c.every)
			if v, err := read(); err == nil {
				c.last.Store(&v)
			}
		}
		c.mu.Unlock()
	}
	return c.last.Load()
}

// itemsSurveyor is Deps.Items when it can read every item's halt mark at
// once, for /readyz; *stock.Items is one.
type itemsSurveyor interface {
	Survey(ctx context.Context) (stock.ItemsSurvey, error)
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
	s := a.survey.get(func() (stock.ItemsSurvey, error) {
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
	return "halted: " + named(s.Halted, maxNamed) +
		" (their sales answer store_lost until reconciled; GET /items/<id> says why)"
}

// named lists ids, the first n of them by name and the rest counted.
func named(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:n], ", "), len(ids)-n)
}
