package handler

import (
	"sync"
	"time"
)

// now is the clock of the admin back-off; tests replace it.
var now = time.Now

// Admin back-off: a source's first freeFailures wrong tokens cost nothing;
// each one after that shuts the source out for a doubling delay, from
// firstBackoff up to maxBackoff, during which every admin call from it is
// answered 429 without comparing the token. A right token clears the
// source. Guessing a 12+ character token at a few attempts per minute is
// hopeless; an operator who mistypes waits seconds.
const (
	freeFailures = 3
	firstBackoff = time.Second
	maxBackoff   = 30 * time.Second
	// forgetAfter drops a quiet source; maxSources bounds the table.
	forgetAfter = 10 * time.Minute
	maxSources  = 10000
)

type source struct {
	fails int
	until time.Time // refused until then
	last  time.Time
}

// adminGuard keeps the failed admin attempts per source address.
type adminGuard struct {
	mu      sync.Mutex
	sources map[string]*source
}

// blocked reports how long addr must still wait, 0 if not at all.
func (g *adminGuard) blocked(addr string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.sources[addr]; ok {
		if d := s.until.Sub(now()); d > 0 {
			return d
		}
	}
	return 0
}

// failed records a wrong token from addr and returns its failure count.
func (g *adminGuard) failed(addr string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := now()
	if g.sources == nil {
		g.sources = map[string]*source{}
	}
	s, ok := g.sources[addr]
	if !ok {
		if len(g.sources) >= maxSources {
			g.prune(t)
		}
		s = &source{}
		g.sources[addr] = s
	}
	s.fails++
	s.last = t
	if over := s.fails - freeFailures; over > 0 {
		d := firstBackoff << min(over-1, 16)
		s.until = t.Add(min(d, maxBackoff))
	}
	return s.fails
}

// succeeded forgets addr's failures.
func (g *adminGuard) succeeded(addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.sources, addr)
}

// prune drops quiet sources; if every one is recent (a flood of addresses),
// it starts over rather than grow without bound.
func (g *adminGuard) prune(t time.Time) {
	for a, s := range g.sources {
		if t.Sub(s.last) > forgetAfter && !t.Before(s.until) {
			delete(g.sources, a)
		}
	}
	if len(g.sources) >= maxSources {
		clear(g.sources)
	}
}
