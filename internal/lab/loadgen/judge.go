package loadgen

import (
	"errors"
	"fmt"
	"strings"

	"seckill/internal/api"
)

// judge.go: one run's row in a table of runs under faults (compose-test):
// the Report held against the books read from the store itself, not from
// the run, plus the conditions the row names (Wants). What a lost answer
// or a history the search gave up on means is decided here, once.

// ErrWant: a condition Judge does not know.
var ErrWant = errors.New("loadgen: unknown condition")

// Wants a row may hold its run to, beyond the books. A "sold-by=NAME"
// want asks that replica NAME sold at least one unit.
const (
	WantExact   = "exact"    // the run's own verdict held (its exit status 0)
	WantSoldOut = "sold-out" // the store's stock is 0
	WantAllSold = "all-sold" // every unit was told sold (sold = initial)
	WantNoLost  = "no-lost"  // no sale went untold (sold = lucky)
	WantRouted  = "routed"   // errors under 15% of the requests, and sales
	WantSoldBy  = "sold-by="
)

// Judged is one row: whether it passed, the units told sold (the distinct
// orders with named buyers: a replayed answer tells one twice), errors,
// requests per second and what was noticed, in order.
type Judged struct {
	Pass   bool
	Sold   int
	Errors int
	RPS    int
	Notes  []string
}

// Row is what a run is judged with besides its Report.
type Row struct {
	// Books are the sale's numbers read from the store after the run.
	Books api.Books
	// Exit is the run's exit status: 0, 3 for a verdict that failed,
	// anything else for a run that did not finish.
	Exit int
	// Pause notes the lock answers (busy, fenced) even when there are
	// none: the scenario is about them.
	Pause bool
	// Wants are conditions on the run (WantExact...).
	Wants []string
	// Checks are conditions the caller judged itself, each "LABEL: ok"
	// (noted) or "LABEL: NO" (failed).
	Checks []string
}

// Judge holds r against the row. Oversold units, a history proven not
// linearizable, unbalanced books or more units told than the store counts
// fail it, and so does a want or check that does not hold. A sale the
// store counts but no buyer was told of (lucky > sold) is noted as lost,
// not failed: a replica killed after selling never answers.
func Judge(r *Report, row Row) (Judged, error) {
	books, exit := row.Books, row.Exit
	j := Judged{Pass: true, Sold: r.Sold, Errors: r.Errors, RPS: int(r.RPS)}
	fail := func(format string, a ...any) {
		j.Pass = false
		j.Notes = append(j.Notes, fmt.Sprintf(format, a...))
	}
	note := func(format string, a ...any) { j.Notes = append(j.Notes, fmt.Sprintf(format, a...)) }
	if r.Buyers != nil {
		// A first send cut by the client that sold is told by its replay,
		// so the units told are the distinct orders, not the sold answers.
		note("orders told %d (%d sold, %d replayed, %d cut)", r.Buyers.Orders, r.Sold, r.Replayed, r.Cut)
		j.Sold = r.Buyers.Orders
	}
	if r.Oversold != 0 {
		fail("seckill: oversold=%d", r.Oversold)
	}
	// A search that ran out of time proved nothing either way: said, not
	// failed (the books still are held below).
	if h := r.History; !h.Passed() {
		if h.Unknown {
			note("history unchecked: the search ran out of time (%d ops, %d ms)", h.Ops, h.CheckMS)
		} else {
			fail("history NOT LINEARIZABLE (%d ops%s)", h.Ops, prefixed(": ", h.Reason))
		}
	}
	switch {
	case !books.Balanced():
		fail("stock+lucky!=initial (%d+%d, initial %d)", books.Stock, books.Lucky, books.Initial)
	case int64(j.Sold) > books.Lucky:
		fail("sold>lucky (oversell)")
	case int64(j.Sold) < books.Lucky:
		note("lost=%d (sold, unanswered)", books.Lucky-int64(j.Sold))
	}
	if exit != 0 && exit != 3 {
		bound := ""
		if r.TimedOut {
			bound = " (firing bound hit)"
		}
		note("seckill rc=%d%s", exit, bound)
	}
	if r.Busy+r.Fenced > 0 || row.Pause {
		note("busy=%d fenced=%d lock_lost=%d", r.Busy, r.Fenced, r.LockLost)
	}
	var held []string
	for _, w := range row.Wants {
		ok, err := r.holds(w, books, j.Sold, exit)
		switch {
		case err != nil:
			return Judged{}, err
		case ok:
			held = append(held, w)
		default:
			fail("%s: NO", w)
		}
	}
	if len(held) > 0 {
		note("%s: ok", strings.Join(held, ", "))
	}
	for _, c := range row.Checks {
		switch {
		case strings.HasSuffix(c, ": ok"):
			note("%s", c)
		case strings.HasSuffix(c, ": NO"):
			fail("%s", c)
		default:
			return Judged{}, fmt.Errorf("%w: check %q ends neither in \": ok\" nor in \": NO\"", ErrWant, c)
		}
	}
	return j, nil
}

// holds reports whether want holds for the run.
func (r *Report) holds(want string, books api.Books, sold, exit int) (bool, error) {
	switch {
	case want == WantExact:
		return exit == 0, nil
	case want == WantSoldOut:
		return books.Stock == 0, nil
	case want == WantAllSold:
		return int64(sold) == books.Initial, nil
	case want == WantNoLost:
		return int64(sold) == books.Lucky, nil
	case want == WantRouted:
		return r.Errors*100 < r.Requests*15 && sold > 0, nil
	case strings.HasPrefix(want, WantSoldBy) && len(want) > len(WantSoldBy):
		return r.Replicas[want[len(WantSoldBy):]] > 0, nil
	}
	return false, fmt.Errorf("%w %q (want %s, %s, %s, %s, %s or %sNAME)", ErrWant, want,
		WantExact, WantSoldOut, WantAllSold, WantNoLost, WantRouted, WantSoldBy)
}

// prefixed is s after p, or "" when s is.
func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

// Line is the row as compose-test reads it: PASS or FAIL, sold, errors,
// rps and the notes, tab-separated, on one line.
func (j Judged) Line() string {
	res := "FAIL"
	if j.Pass {
		res = "PASS"
	}
	notes := strings.NewReplacer("\t", " ", "\n", " ").Replace(strings.Join(j.Notes, "; "))
	return fmt.Sprintf("%s\t%d\t%d\t%d\t%s", res, j.Sold, j.Errors, j.RPS, notes)
}
