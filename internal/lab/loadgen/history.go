package loadgen

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/api"
	"seckill/internal/lab/history"
)

// history.go: a run's answers checked as a history (package history), not
// only summed: the load tool's side of the lab's check.

// The bound of the history check: a run with named buyers and more
// requests in flight at once than HistoryMaxInFlight is not checked
// (Report.History says so).
// Below it the search of a correct history is close to linear, since each
// sold answer names the one stock it left; the run's ctx's deadline, if
// any, bounds a search that is not (unanswered requests, each of which may
// or may not have sold). 500 buyers at once check in milliseconds.
const HistoryMaxInFlight = 2048

// History is a run's history check (Report.History).
type History struct {
	OK       bool   `json:"ok"`
	Unknown  bool   `json:"unknown,omitempty"` // the search ran out of time
	Skipped  string `json:"skipped,omitempty"` // why it was not checked
	Reason   string `json:"reason,omitempty"`  // a violation named without the search
	Ops      int    `json:"ops"`
	InFlight int    `json:"in_flight"`
	CheckMS  int64  `json:"check_ms"`
	Picture  string `json:"picture,omitempty"` // Porcupine's HTML view of a violation
}

// Passed: checked and linearizable, or not checked for a stated reason.
func (h *History) Passed() bool { return h == nil || h.OK || h.Skipped != "" }

// CheckHistory checks responses (Settle first) against the sale's model,
// with the stock read at readAt as its last operation: the named buyers'
// model (history.Buyers) with limit the per-user limit when the run had
// buyers, else the counter. A violation's picture goes to dir as
// name.html when dir is set.
func CheckHistory(ctx context.Context, responses []Response, initial int, st api.Stock, readAt time.Time, buyers bool, limit int, dir, name string) *History {
	if len(responses) == 0 {
		return &History{OK: true}
	}
	calls := make([]history.Call, len(responses))
	for i, r := range responses {
		calls[i] = history.Call{
			Answer: history.Answer{Status: r.Status, Result: r.Result, Left: r.Left, Replayed: r.Outcome == OutcomeReplayed,
				Settled: r.Settled, Cut: r.Cut},
			Sent: r.Sent, Answered: r.Received, Client: i, Note: r.Replica, User: r.User, Key: r.Key, Order: r.Order,
		}
	}
	ops := history.Build(calls, readAt, st.Stock, true)
	h := &History{Ops: len(ops)}
	// A segmented sale's answers carry their segment's stock: the model
	// then checks the sum only.
	m := history.Counter(int64(initial), len(st.Segments) == 0)
	if buyers {
		m = history.Buyers(int64(initial), limit, len(st.Segments) == 0)
	}
	// The counter's search is one pass however many are in flight (its
	// unanswered requests are placed where they were sent); the buyers'
	// model does the same for a buyer's only send and branches on the
	// rest, hence the bound.
	if n := history.InFlight(ops); buyers && n > HistoryMaxInFlight {
		h.InFlight, h.Skipped = n, "more requests in flight than the checker's bound"
		return h
	}
	res, err := history.Check(ctx, m, ops, dir, name)
	h.OK, h.Unknown, h.Reason, h.InFlight, h.CheckMS, h.Picture = res.OK, res.Unknown, res.Reason, res.InFlight, res.Took.Milliseconds(), res.Picture
	if err != nil && h.Reason == "" {
		h.Reason = err.Error()
	}
	return h
}

// Text says the check in one line.
func (h *History) Text() string {
	var s string
	switch {
	case h.Skipped != "":
		return fmt.Sprintf("not checked: %s (%d in flight, bound %d)", h.Skipped, h.InFlight, HistoryMaxInFlight)
	case h.OK:
		s = "linearizable"
	case h.Unknown:
		s = "UNCHECKED: the search ran out of the run's deadline"
	case h.Reason != "":
		s = "NOT LINEARIZABLE: " + h.Reason
	default:
		s = "NOT LINEARIZABLE"
	}
	s += fmt.Sprintf(" (%d ops, %d in flight, %d ms)", h.Ops, h.InFlight, h.CheckMS)
	if h.Picture != "" {
		s += "; picture: " + h.Picture
	}
	return s
}
