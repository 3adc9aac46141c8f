package api

import (
	"fmt"
	"sync"
)

// Books are a sale's numbers and the invariants every reader checks:
// stock + lucky = initial, and no stock below zero. A lock that let two
// holders read the same stock writes the same decrement twice while lucky
// counts both sales, so the sum rises above the initial stock by exactly
// the units sold twice; a sale lost by the store makes it fall below.
//
// Problems is the one judge of them, for the leader's audit (the default
// sale and every item) and the dashboard; the lab and the load tool, which
// allow for sales in doubt, build on Excess. An invariant added to a
// sale's books is added here.
type Books struct {
	Stock, Lucky, Initial int64
	// Returned is the units reservations gave back to the stock
	// (docs/reservations.md): lucky counts units taken, so the books are
	// stock + lucky - returned = initial; 0 for a sale without them, whose
	// books are the articles' stock + lucky = initial.
	Returned int64
	// Segments, when the stock is split over more than one key, is each
	// segment's stock (Stock their sum): a segment below zero sold a unit
	// it did not have, even when another's surplus hides it in the sum.
	Segments []int64
}

// Excess is stock + lucky - returned - initial: positive when oversold,
// negative when sales were lost, 0 when the books balance.
func (b Books) Excess() int64 { return b.Stock + b.Lucky - b.Returned - b.Initial }

// Balanced reports whether stock + lucky - returned = initial.
func (b Books) Balanced() bool { return b.Excess() == 0 }

// Oversold is how many units were sold beyond the initial stock (0 when
// none).
func (b Books) Oversold() int64 { return max(0, b.Excess()) }

// Problems are the invariants b breaks, each worded for an operator; none
// when the books are sound.
func (b Books) Problems() []string {
	var bad []string
	if len(b.Segments) > 1 {
		for i, n := range b.Segments {
			if n < 0 {
				bad = append(bad, fmt.Sprintf("segment %d is negative: %d", i, n))
			}
		}
	}
	if b.Stock < 0 {
		bad = append(bad, fmt.Sprintf("stock is negative: %d", b.Stock))
	}
	switch {
	case b.Balanced():
	case b.Returned != 0:
		bad = append(bad, fmt.Sprintf("stock+lucky-returned = %d+%d-%d = %d, want initial %d (%s)",
			b.Stock, b.Lucky, b.Returned, b.Stock+b.Lucky-b.Returned, b.Initial, b.excessText()))
	default:
		bad = append(bad, fmt.Sprintf("stock+lucky = %d+%d = %d, want initial %d (%s)",
			b.Stock, b.Lucky, b.Stock+b.Lucky, b.Initial, b.excessText()))
	}
	return bad
}

func (b Books) excessText() string {
	if x := b.Excess(); x < 0 {
		return fmt.Sprintf("%d units lost", -x)
	}
	return fmt.Sprintf("oversold by %d", b.Excess())
}

// LedgerProblem is what is wrong with a ledger of orders orders for a
// sale that counted lucky units sold: "" when they agree.
func LedgerProblem(orders, lucky int64) string {
	if orders == lucky {
		return ""
	}
	return fmt.Sprintf("ledger orders = %d, want lucky %d (%+d units sold without an order)", orders, lucky, lucky-orders)
}

// InitialLearner stands in for a sale's initial stock when no key holds
// it (a sale reset by hand, or by a build from before the key): with
// nothing sold the stock is the initial stock by definition; otherwise
// the first value seen stands. The audit and the dashboard learn it
// alike. The zero value is ready; it is safe for concurrent use.
type InitialLearner struct {
	mu      sync.Mutex
	learned int64
	have    bool
}

// Learn returns the initial stock to judge books of stock and lucky by.
func (l *InitialLearner) Learn(stock, lucky int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lucky == 0 || !l.have {
		l.learned, l.have = stock+lucky, true
	}
	return l.learned
}
