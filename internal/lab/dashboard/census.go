package dashboard

import (
	"cmp"
	"context"
	"time"
)

// census.go: a sale with reservations (docs/reservations.md) is judged by
// its census too, beside the books: each order's state against the
// counters, the invariants the lab, the demo and the audit check. It
// reads every order's state, so it is read at most every censusEvery,
// and only when the sale has reservations (its states hash exists).

// censusEvery bounds how often the census is read.
const censusEvery = time.Second

// CensusView is the reservations' census: orders by state, the units
// returned, and the invariants they break.
type CensusView struct {
	Reserved  int64    `json:"reserved"`
	Paid      int64    `json:"paid"`
	Cancelled int64    `json:"cancelled"`
	Expired   int64    `json:"expired"`
	Returned  int64    `json:"returned"`
	OK        bool     `json:"ok"`
	Problems  []string `json:"problems,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// censusDue reports whether the census is due for a read at now, and
// marks it read.
func (a *Aggregator) censusDue(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.store == nil || now.Sub(a.censusAt) < cmp.Or(a.censusEvery, censusEvery) {
		return false
	}
	a.censusAt = now
	return true
}

// readCensus reads the census; nil for a sale without reservations.
func (a *Aggregator) readCensus(ctx context.Context) *CensusView {
	on, err := a.store.Reserving(ctx)
	if err != nil {
		return &CensusView{Error: err.Error()}
	}
	if !on {
		return nil
	}
	c, err := a.store.Census(ctx)
	if err != nil {
		return &CensusView{Error: err.Error()}
	}
	p := c.Problems()
	return &CensusView{Reserved: c.Reserved, Paid: c.Paid, Cancelled: c.Cancelled, Expired: c.Expired, Returned: c.Returned,
		OK: len(p) == 0, Problems: p}
}
