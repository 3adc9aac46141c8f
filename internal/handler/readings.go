package handler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/health"
	"seckill/internal/stock"
)

// readings.go: what /readyz reports from readings too costly for every
// probe (several round trips, other servers): each is taken again at most
// once a period, by the one probe that finds it due, and the other probes
// answer with the last one. None of them makes the replica unready.

// readingEvery is how often /readyz reads the items' halt marks and the
// stock Redis's memory again: a probe's pace (seconds), so a change shows
// within one or two probes.
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

// ClockCheck is the clocks of the stock Redis's primary, its replicas and
// this process (health.ClockCheck), which /readyz reads again at most every
// Every and reports in "clock" when one is off by more than MaxSkew: after
// a failover the promoted replica's clock decides every item's window.
type ClockCheck struct {
	Clocks interface {
		ReadClocks(ctx context.Context) (health.Clocks, error)
		ReadProcess(ctx context.Context) (health.ClockSkew, error)
	}
	// MaxSkew is stock.max_clock_skew.
	MaxSkew time.Duration
	// Known is the reading taken at start, logged there; nil when the
	// primary did not answer then.
	Known *health.Clocks
	// Every bounds how often /readyz reads them again; default 30 s:
	// clocks drift by milliseconds a day, and a reading dials every
	// replica.
	Every time.Duration
	// FreshEvery bounds how often it reads this process's clock against
	// the primary's, which is what a step of either shows in and what
	// items' windows are checked by; default 1 s (one round trip).
	FreshEvery time.Duration
}

// clockState is the last reading of the clocks, and what /readyz last
// said of it (a change is logged).
type clockState struct {
	check *ClockCheck
	cached[health.Clocks]
	process cached[health.ClockSkew]
	said    atomic.Pointer[string]
}

func (s *clockState) init(c *ClockCheck) {
	if c == nil {
		return
	}
	cc := *c
	if cc.Every <= 0 {
		cc.Every = 30 * time.Second
	}
	if cc.FreshEvery <= 0 {
		cc.FreshEvery = time.Second
	}
	s.check, s.every, s.process.every = &cc, cc.Every, cc.FreshEvery
	if cc.Known != nil {
		known := *cc.Known
		s.last.Store(&known)
		s.next = now().Add(cc.Every)
		said := clockProblems(known, cc.MaxSkew)
		s.said.Store(&said)
	}
}

// clockProblems is /readyz's "clock" for reading c: "" when every clock
// is within bound.
func clockProblems(c health.Clocks, bound time.Duration) string {
	p := c.Problems(bound)
	if len(p) == 0 {
		return ""
	}
	return fmt.Sprintf("off the stock Redis primary's clock by more than %s (stock.max_clock_skew), or unread: %s; "+
		"after a failover items' windows move by a replica's skew", bound, named(p, maxNamed))
}

// clocks is /readyz's "clock", logging a change of it: a warning, never a
// 503 (the primary's clock decides now, and a replica's host is no reason
// to stop selling).
func (a *server) clocks(ctx context.Context) string {
	s := &a.clock
	if s.check == nil {
		return ""
	}
	c := s.get(func() (health.Clocks, error) {
		rctx, cancel := context.WithTimeout(ctx, a.cfg.ProbeTimeout)
		defer cancel()
		return s.check.Clocks.ReadClocks(rctx)
	})
	if c == nil {
		return ""
	}
	// This process's clock against the primary's, read fresh: a step of
	// either shows within FreshEvery, not at the next full reading.
	if p := s.process.get(func() (health.ClockSkew, error) {
		rctx, cancel := context.WithTimeout(ctx, a.cfg.ProbeTimeout)
		defer cancel()
		return s.check.Clocks.ReadProcess(rctx)
	}); p != nil {
		fresh := *c
		fresh.Process = *p
		c = &fresh
	}
	says := clockProblems(*c, s.check.MaxSkew)
	if prev := s.said.Swap(&says); prev == nil || *prev != says {
		switch {
		case says != "":
			a.deps.Logger.Warn("clock skew", "clocks", says)
		case prev != nil:
			a.deps.Logger.Info("clock skew within stock.max_clock_skew again", "max_clock_skew", s.check.MaxSkew)
		}
	}
	return says
}

// memoryReading is the stock Redis's memory and the default sale's units
// left, read together.
type memoryReading struct {
	mem  health.Memory
	left int64
}

// memory is /readyz's "memory": "" unless the stock Redis has a maxmemory
// and less room below it than the units left (the default sale's and the
// items') need at health.BytesPerUnit each. A warning: the Redis refuses
// sales only once it is full, on every replica alike, and the fix is its
// maxmemory, not this replica.
func (a *server) memory(ctx context.Context) string {
	rdb := a.deps.Memory
	if rdb == nil {
		return ""
	}
	m := a.mem.get(func() (memoryReading, error) {
		rctx, cancel := context.WithTimeout(ctx, a.cfg.ProbeTimeout)
		defer cancel()
		mem, err := health.ReadMemory(rctx, rdb)
		if err != nil || mem.Max == 0 {
			return memoryReading{mem: mem}, err
		}
		// A sale that cannot be read (lost, not an integer) needs no
		// room: the other checks say what is wrong with it.
		st, err := a.deps.Inventory.Status(rctx)
		if err != nil {
			st.Stock = 0
		}
		return memoryReading{mem: mem, left: max(st.Stock, 0)}, nil
	})
	if m == nil || m.mem.Max == 0 {
		return ""
	}
	left := m.left
	if s := a.survey.last.Load(); s != nil {
		left += s.Stock
	}
	need := left * health.BytesPerUnit
	room := m.mem.Headroom()
	if left == 0 || room >= need {
		return ""
	}
	return fmt.Sprintf("maxmemory %s, used_memory %s: %s of room, below the %s that the %d units left need at %d B each; "+
		"at maxmemory the Redis refuses every sale: raise maxmemory", mib(m.mem.Max), mib(m.mem.Used), mib(max(room, 0)),
		mib(need), left, health.BytesPerUnit)
}

// mib says n bytes in MiB, to a tenth.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
