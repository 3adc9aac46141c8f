package lab

import (
	"fmt"
	"strings"
	"time"

	"seckill/internal/api"
	"seckill/internal/lab/history"
)

// linear.go: every cell's answers checked as a history (package history),
// not only summed. A correct backend's cell must be linearizable against
// the counter model; a control's or a flawed lock's must not be (its
// oversell shows in the answers, not only in the books).

// Linear is a cell's history check.
type Linear struct {
	OK       bool  `json:"ok"`
	Unknown  bool  `json:"unknown,omitempty"` // the check ran out of time
	Ops      int   `json:"ops"`
	InFlight int   `json:"in_flight"`
	CheckMS  int64 `json:"check_ms"`
	// Picture is Porcupine's HTML view of a violation (SECKILL_HISTORY_DIR,
	// else the cluster's directory).
	Picture string `json:"picture,omitempty"`
}

// checksHistory reports whether a cell's answers are held to the model:
// not where a failover may lose acknowledged sales by design (acks 0),
// nor the crash cell, which sells nothing. Where the store's data is lost
// on purpose, only what was done in the store before the loss is
// (beforeLoss; the answers after it are judged by checkStoreLoss, and the
// books went with it).
func checksHistory(e Expect) bool {
	return e == ExpectSafe || e == ExpectOversell || e == ExpectWrong || e == ExpectHalt
}

// checkHistory builds the cell's history from its answers and the books
// read at readAt, and checks it.
func (x *run) checkHistory(resps []response, readAt time.Time) {
	if !checksHistory(x.res.Expect) || returnsUnits(x.cell.Scenario) {
		return
	}
	var lost time.Time // the store's loss: only what was sent before it
	if x.res.Expect == ExpectHalt {
		if x.res.Store == nil {
			return // the judge says so
		}
		back := x.res.Store.back
		lost = back.Add(-time.Duration(x.res.Store.DownMS) * time.Millisecond)
		resps = beforeLoss(resps, lost, back)
	}
	if len(resps) == 0 {
		return
	}
	clients := map[string]int{}
	calls := make([]history.Call, len(resps))
	for i, r := range resps {
		c, ok := clients[r.Replica]
		if !ok {
			c = len(clients)
			clients[r.Replica] = c
		}
		calls[i] = history.Call{Answer: x.answer(r), Sent: r.Sent, Answered: r.At, Client: c,
			Note: r.Replica, User: r.User, Key: r.Key, Order: r.Order}
		if o, _ := history.Classify(calls[i].Answer); r.Replica == "" || o == history.Unknown {
			calls[i].Note = describe(r)
		}
	}
	ops := history.Build(calls, readAt, x.res.Stock, lost.IsZero())

	dir := historyDir(x.c.Dir())
	name := strings.ReplaceAll(x.cell.String(), "/", "-")
	model := history.Counter(int64(x.res.Initial), !x.segmented())
	if x.cell.Buyers {
		model = history.Buyers(int64(x.res.Initial), buyerLimit, !x.segmented())
	}
	res, err := history.Check(x.ctx, model, ops, dir, name)
	l := &Linear{OK: res.OK, Unknown: res.Unknown, Ops: res.Ops, InFlight: res.InFlight, CheckMS: res.Took.Milliseconds(), Picture: res.Picture}
	x.res.History = l
	bad := func(format string, args ...any) { x.historyWhy = append(x.historyWhy, fmt.Sprintf(format, args...)) }
	switch {
	case err != nil:
		bad("history check: %v", err)
	case res.Unknown:
		bad("history check ran out of the run's deadline with %d ops, %d in flight", res.Ops, res.InFlight)
	case (x.res.Expect == ExpectSafe || x.res.Expect == ExpectHalt) && !res.OK:
		bad("the answers are not linearizable (picture: %s)", res.Picture)
	case x.res.Expect == ExpectOversell && res.OK:
		bad("the answers are linearizable: the history check cannot see the oversell")
	case x.res.Expect == ExpectWrong && res.OK:
		bad("the answers are linearizable: the history check missed the false sold_out answers")
	}
	x.notef("history %d ops, %d in flight, ok %v, checked in %dms", res.Ops, res.InFlight, res.OK, l.CheckMS)
}

// beforeLoss are the answers of a cell whose store lost its data between
// lost and back that the history can hold to the store before the loss:
// the requests sent before it, and the sales answered before the store
// came back, whenever they were sent. A sale answered then was made in the
// store before its loss: the replicas sell on while they are being
// stopped around it, and a combined batch sells to its later arrivals
// after its earlier ones. Dropping such a sale leaves its unit a gap in
// the kept answers' stock-after, which no order of them explains.
func beforeLoss(resps []response, lost, back time.Time) []response {
	var kept []response
	for _, r := range resps {
		if r.Sent.Before(lost) || (r.Result == api.Sold && r.At.Before(back)) {
			kept = append(kept, r)
		}
	}
	return kept
}

// segmented: the sale's answers carry their segment's stock, not the sum.
func (x *run) segmented() bool { return strings.HasPrefix(x.cell.Sale, "segments") }

// answer is what the history check knows of an answer.
func (x *run) answer(r response) history.Answer {
	return history.Answer{
		Status: r.Status, Result: r.Result, Left: r.Left, Replayed: r.Replayed, Settled: r.Settled, Cut: r.Cut,
		// A failover may apply a write whose answer was an error (the
		// books allow it: failoverConsistent).
		ErrorsMayApply: IsFailover(x.cell.Scenario),
	}
}

// runFalseSoldOut asks every replica directly until it has sold twice:
// its first answers are the failpoint's false sold_out (the buyers through
// nginx stop at theirs), the rest real sales after them.
func runFalseSoldOut(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	soldOut, sold := 0, 0
	for i := range x.c.Replicas() {
		url := x.c.ReplicaURL(i) + "/stock/reduce"
		for n, mine := 0, 0; n < 30 && mine < 2; n++ {
			switch r := x.load.reduceAt(ctx, url); {
			case r.sold():
				mine++
				sold++
			case r.Result == api.SoldOut:
				soldOut++
			}
		}
	}
	if sold < 2*x.c.Replicas() || soldOut == 0 {
		return fmt.Errorf("asked every replica: %d sold_out and %d sold answers, want some of the first and 2 a replica of the second", soldOut, sold)
	}
	x.notef("%d false sold_out answers from the replicas directly, then %d sales", soldOut, sold)
	return nil
}
