package api

// Books are a sale's three numbers and the one invariant every reader
// checks: stock + lucky = initial. A lock that let two holders read the
// same stock writes the same decrement twice while lucky counts both
// sales, so the sum rises above the initial stock by exactly the units
// sold twice; a sale lost by the store makes it fall below.
type Books struct {
	Stock, Lucky, Initial int64
}

// Excess is stock + lucky - initial: positive when oversold, negative
// when sales were lost, 0 when the books balance.
func (b Books) Excess() int64 { return b.Stock + b.Lucky - b.Initial }

// Balanced reports whether stock + lucky = initial.
func (b Books) Balanced() bool { return b.Excess() == 0 }

// Oversold is how many units were sold beyond the initial stock (0 when
// none).
func (b Books) Oversold() int64 { return max(0, b.Excess()) }
