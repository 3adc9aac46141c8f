// Package history checks the answers of a sale, not only its totals: every
// request is an operation with the time it was sent and the time its
// answer came back, and the whole history must be linearizable against a
// model of the sale (Porcupine, github.com/anishathalye/porcupine, the
// checker etcd's robustness tests run). Sums miss wrong answers whose
// totals balance: two buyers told the same stock-after, a sold_out while a
// unit was left, a refusal that in fact changed the stock.
//
// The model is the anonymous sale on one counter (Counter). A request that
// got no answer (a transport error, the proxy's 502/504) is indeterminate:
// it may sell, at any time after it was sent, or not at all. An
// unconfirmed answer settled by its receipt is known, but not when it took
// effect: it returns when the receipt was read.
package history

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Outcome is what an answer says the request did to the stock.
type Outcome uint8

// Outcomes.
const (
	// Sold took one unit; Op.After is the stock it left, -1 if the answer
	// did not say (or says a segment's, which the sum model cannot use).
	Sold Outcome = iota + 1
	// SoldOut found no unit left.
	SoldOut
	// NoChange is a definite refusal: busy, fenced, lock lost, a limit, a
	// replay of an earlier sale, an error before the write, a receipt
	// that says the sale did not happen.
	NoChange
	// Unknown may have sold one unit or not: no answer came back.
	Unknown
	// Read is a read of the stock (the books at the end): Op.After is what
	// it read.
	Read
	// SoldSometime took one unit at some time before it returned, its
	// stock-after unknown: an unconfirmed sale its receipt says sold.
	SoldSometime
	// Replay is a 200 that repeats the sale of the buyer's key (Op.Order
	// names it, Op.After the stock that sale left, -1 if unsaid);
	// LimitReached refuses a buyer at the per-user limit. The counter
	// model takes both for NoChange; Buyers checks them.
	Replay
	LimitReached
)

func (o Outcome) String() string {
	switch o {
	case Sold:
		return "sold"
	case SoldOut:
		return "sold_out"
	case NoChange:
		return "no change"
	case Unknown:
		return "unknown"
	case Read:
		return "read"
	case SoldSometime:
		return "sold (by its receipt)"
	case Replay:
		return "replay"
	case LimitReached:
		return "limit_reached"
	default:
		return fmt.Sprintf("outcome(%d)", uint8(o))
	}
}

// Never is the Return of an operation whose answer never came: it may take
// effect at any time after its call.
const Never = time.Duration(math.MaxInt64)

// Op is one request as its client saw it.
type Op struct {
	Client  int           // which buyer sent it (for the picture)
	Call    time.Duration // sent, since the history's start (monotonic)
	Return  time.Duration // answered; Never when no answer came
	Outcome Outcome
	After   int64  // see Outcome
	Note    string // replica, attempt: shown in the picture
	// User, Key and Order are a named buyer's (the Buyers model): X-User,
	// Idempotency-Key, and the order id a sold or replay answer named.
	User, Key, Order string
}

// Result is a history's verdict.
type Result struct {
	// OK: some sequential order of the operations explains every answer.
	OK bool
	// Unknown: the checker ran out of time; OK is false.
	Unknown bool
	Ops     int
	// InFlight is the most operations pending at once, the checker's
	// search depth (Unknown ones count until the end).
	InFlight int
	Took     time.Duration
	// Picture is the path of Porcupine's HTML visualization, written on a
	// violation when the check was given a directory.
	Picture string
	// Reason names a violation found without the search (one stock-after
	// answered twice): the search that would prove it is exhaustive, so
	// it only runs for the picture, briefly.
	Reason string
}

// pictureTimeout bounds the search run only to draw a violation already
// found.
const pictureTimeout = 5 * time.Second

// Model is a sale's model for Check.
type Model struct {
	porcupine  porcupine.Model
	initial    int64
	checkAfter bool
	// pinned: the model keeps an unanswered (or receipt-settled) sale as
	// a unit to take later, so Check places it where it was sent; pin
	// says which ops are kept so (nil: every unanswered and receipt-settled
	// one).
	pinned bool
	pin    func(Op) bool
	// wrap makes the model's initial state from the counter's (nil: the
	// counter's is the model's).
	wrap func(counterState) any
	// strip, before the search, clears what no other op can consult:
	// the buyer and key of a buyer's only op, the key of a key's only op.
	strip bool
	// from builds the model from another initial state (Check's budget).
	from func(init any) porcupine.Model
}

// Counter is the model of the anonymous sale on one stock: a sold answer
// takes one unit and, when it says, leaves exactly one less than there
// was; sold_out only at 0; a refusal changes nothing; an unknown answer
// may have taken a unit; a read sees the stock. checkAfter off (a
// segmented sale's answers carry their segment's stock) keeps the rest.
//
// An unanswered request may take its unit at any time after it was sent,
// which a search that places it at every instant pays for with every
// other request in flight: a kill that leaves dozens unanswered made a
// 2,881-request history run out of its minute, and proving a violation
// with them takes longer still. So the model places such a request where
// it was sent (Check pins it there) and keeps it as a unit that may still
// be taken (counterState.maybe), which any later step may take; an
// unconfirmed sale its receipt says sold is one that must be taken by the
// final read (sure). Only the steps that see the stock take any: a sold
// answer naming its stock-after takes exactly as many as make it true, as
// do sold_out and the read; the rest need none. Which request took a unit
// does not matter to a counter, so this explains exactly the same
// histories, in one pass.
func Counter(initial int64, checkAfter bool) Model {
	step := func(state, _, output any) []any {
		s, op := state.(counterState), output.(Op)
		switch op.Outcome {
		case Sold:
			return asAny(s.sell(op, checkAfter))
		case SoldOut:
			return asAny(s.take(s.stock, false))
		case NoChange, Replay, LimitReached:
			return []any{s}
		case Unknown:
			s.maybe++
			return []any{s}
		case SoldSometime:
			s.sure++
			return []any{s}
		case Read:
			return asAny(s.take(s.stock-op.After, true))
		}
		return nil
	}
	m := newModel(initial, checkAfter, counterState{stock: initial, budget: math.MaxInt64}, step,
		func(a, b any) bool { return a.(counterState) == b.(counterState) },
		func(s any) uint64 { return s.(counterState).hash() },
		func(s any) string {
			c := s.(counterState)
			if c.maybe == 0 && c.sure == 0 {
				return fmt.Sprintf("stock %d", c.stock)
			}
			return fmt.Sprintf("stock %d, %d sales still to take a unit, %d that may", c.stock, c.sure, c.maybe)
		})
	m.pinned = true
	return m
}

// counterState is the stock, and the sales placed where they were sent
// whose unit is still to be taken: sure ones (settled sold) and maybe ones
// (unanswered).
type counterState struct {
	stock, maybe, sure, budget int64
	// named are the stock-afters answered sold (shared by every state of
	// a check; nil: none known). The unit that left one of them was that
	// answer's, so no placed sale may take it.
	named *map[int64]bool
}

// sell is a sale answered now: one unit, leaving op.After when checkAfter
// and the answer says (the placed sales taking the units between).
func (s counterState) sell(op Op, checkAfter bool) []counterState {
	if checkAfter && op.After >= 0 {
		var out []counterState
		for _, n := range s.take(s.stock-1-op.After, false) {
			if n.stock > 0 {
				n.stock--
				out = append(out, n)
			}
		}
		return out
	}
	if s.stock > 0 {
		s.stock--
		return []counterState{s}
	}
	return nil
}

func (s counterState) hash() uint64 {
	return uint64(s.stock)*1_000_003 + uint64(s.maybe)*1_009 + uint64(s.sure)*31 + uint64(s.budget)
}

// take has n of the placed sales take their unit now, in every split
// between sure and maybe ones; all the sure ones when final. The maybe
// ones may take no more units than the budget: how many the books say
// unanswered requests sold (Check).
func (s counterState) take(n int64, final bool) []counterState {
	if n < 0 || n > s.stock || n > s.maybe+s.sure {
		return nil
	}
	if s.named != nil {
		for i := int64(1); i <= n; i++ {
			if (*s.named)[s.stock-i] {
				return nil
			}
		}
	}
	var out []counterState
	for k := min(n, s.sure); k >= 0 && n-k <= s.maybe && n-k <= s.budget; k-- {
		if final && s.sure-k > 0 {
			break
		}
		out = append(out, counterState{stock: s.stock - n, maybe: s.maybe - (n - k), sure: s.sure - k, budget: s.budget - (n - k), named: s.named})
	}
	return out
}

func asAny(states []counterState) []any {
	out := make([]any, len(states))
	for i, s := range states {
		out[i] = s
	}
	return out
}

// newModel is a Model from its nondeterministic step: a set of states
// stands for what an unanswered request leaves undecided.
func newModel(initial int64, checkAfter bool, init any, step func(state, input, output any) []any,
	equal func(a, b any) bool, hash func(any) uint64, describe func(any) string) Model {
	build := func(init any) porcupine.Model {
		return buildModel(init, step, equal, hash, describe)
	}
	return Model{porcupine: build(init), initial: initial, checkAfter: checkAfter, from: build}
}

func buildModel(init any, step func(state, input, output any) []any,
	equal func(a, b any) bool, hash func(any) uint64, describe func(any) string) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init:  func() []any { return []any{init} },
		Step:  step,
		Equal: equal,
		Hash:  hash,
		DescribeOperation: func(_, output any) string {
			op := output.(Op)
			d := op.Outcome.String()
			if (op.Outcome == Sold && op.After >= 0) || op.Outcome == Read {
				d += fmt.Sprintf(" %d", op.After)
			}
			for _, p := range []string{op.User, op.Key, op.Note} {
				if p != "" {
					d += " " + p
				}
			}
			return d
		},
		DescribeState: describe,
	}
	return nm.ToModel()
}

// Check runs model over ops. The search is CPU-bound and cannot be
// interrupted, so ctx's deadline, if it has one, is its bound (Unknown past
// it): a check is a must-happen wait that ends at its verdict, and takes no
// budget of its own; a fixed minute ran out on a loaded machine's correct
// history. With dir set, a violation's picture is written there as
// name.html.
func Check(ctx context.Context, m Model, ops []Op, dir, name string) (Result, error) {
	var timeout time.Duration // porcupine's 0: no bound
	if d, ok := ctx.Deadline(); ok {
		if timeout = time.Until(d); timeout <= 0 {
			return Result{Ops: len(ops), Unknown: true}, ctx.Err()
		}
	}
	ops = resolveKeyed(ops)
	if m.strip {
		ops = strip(ops)
	}
	model := m.porcupine
	named, reason := m.named(ops)
	if m.pinned {
		pin := m.pin
		if pin == nil {
			pin = func(op Op) bool { return op.Outcome == Unknown || op.Outcome == SoldSometime }
		}
		ops = slices.Clone(ops)
		for i, op := range ops {
			if pin(op) {
				ops[i].Return = op.Call + 1
			}
		}
		// The books bound how many units the unanswered took: every other
		// unit gone was answered for. Without that bound the search may
		// try any answered sale as one that some unanswered ones' units
		// explain, and a kill's dozens of them made it run out of its
		// minute on a history with none sold.
		init := counterState{stock: m.initial, budget: math.MaxInt64}
		if b, ok := unansweredBudget(m.initial, ops); ok {
			init.budget = b
			if b < 0 {
				reason = cmp.Or(fmt.Sprintf("%d more units answered sold than left the stock", -b), reason)
			}
		}
		if named != nil {
			init.named = &named
		}
		if m.wrap != nil {
			model = m.from(m.wrap(init))
		} else {
			model = m.from(init)
		}
	}
	pops := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		ret := op.Return
		if op.Return == Never {
			ret = Never - 1
		}
		pops[i] = porcupine.Operation{ClientId: op.Client, Input: op.Outcome, Call: int64(op.Call), Output: op, Return: int64(ret)}
	}
	res := Result{Ops: len(ops), InFlight: InFlight(ops)}
	start := time.Now()
	if res.Reason = reason; res.Reason != "" && (timeout == 0 || timeout > pictureTimeout) {
		timeout = pictureTimeout
	}
	verdict, info := porcupine.CheckOperationsVerbose(model, pops, timeout)
	res.Took = time.Since(start)
	switch {
	case res.Reason != "" && verdict != porcupine.Illegal:
		return res, nil // no picture in time; the reason stands
	case verdict == porcupine.Ok:
		res.OK = true
		return res, nil
	case verdict == porcupine.Unknown:
		res.Unknown = true
		return res, nil
	}
	if dir == "" {
		return res, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	res.Picture = filepath.Join(dir, name+".html")
	if err := porcupine.VisualizePath(model, info, res.Picture); err != nil {
		return res, fmt.Errorf("history: write the picture: %w", err)
	}
	return res, nil
}

// InFlight is the most operations pending at any one time: what the
// search grows with.
func InFlight(ops []Op) int {
	type edge struct {
		at    time.Duration
		delta int
	}
	edges := make([]edge, 0, 2*len(ops))
	for _, op := range ops {
		edges = append(edges, edge{op.Call, +1})
		if op.Return != Never {
			edges = append(edges, edge{op.Return, -1})
		}
	}
	// Returns before calls at one instant: they were not both pending.
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// named is the stock-afters sold answers name (nil for a model that does
// not check them), and what no sequential order can explain among them,
// found without a search: two sales that left the same stock, or a
// stock-after outside 0..initial-1.
func (m Model) named(ops []Op) (map[int64]bool, string) {
	if !m.checkAfter {
		return nil, ""
	}
	named := make(map[int64]bool, len(ops))
	reason := ""
	for _, op := range ops {
		if op.Outcome != Sold || op.After < 0 {
			continue
		}
		switch {
		case reason != "":
		case op.After >= m.initial:
			reason = fmt.Sprintf("a sale left %d of a stock of %d", op.After, m.initial)
		case named[op.After]:
			reason = fmt.Sprintf("two sales both left %d: one unit sold twice", op.After)
		}
		named[op.After] = true
	}
	return named, reason
}

// resolveKeyed settles what an unanswered send did from the answers to
// the other sends of its purchase (the same buyer and Idempotency-Key):
// a key sells at most once. If one of them sold, that was the key's sale,
// and the unanswered one sold nothing (had it run first, the other would
// have been its replay). If one was answered sold_out or limit_reached,
// the key never sold: before that answer it would have been a replay,
// and after it neither the stock nor the buyer's count goes back.
// Otherwise, if one replayed the key's sale, that sale was the unanswered
// send's, when it is the only one: it took effect before the replay was
// answered and left the stock the replay names. Each of these is what
// every order the model accepts says, so the verdict is the same.
//
// Each unanswered send doubles what the search must consider (sold or
// not), and a sale with no stock-after may go anywhere in its window,
// each wrong place a dead end: a client that re-sends its cut purchases
// left a dozen of each, and a 261-op history ran out of its minute.
func resolveKeyed(ops []Op) []Op {
	groups := map[purchase][]int{}
	for i, op := range ops {
		if op.Key != "" {
			p := purchase{op.User, op.Key}
			groups[p] = append(groups[p], i)
		}
	}
	out := slices.Clone(ops)
	for _, idx := range groups {
		var unknown []int
		sold, refused, replayAt, replayOrder, replayAfter := false, false, Never, "", int64(-1)
		for _, i := range idx {
			switch out[i].Outcome {
			case Unknown:
				unknown = append(unknown, i)
			case Sold:
				sold = true
			case SoldOut, LimitReached:
				refused = true
			case Replay:
				if out[i].Return < replayAt {
					replayAt, replayOrder, replayAfter = out[i].Return, out[i].Order, out[i].After
				}
			}
		}
		switch {
		case len(unknown) == 0:
		case sold, refused:
			for _, i := range unknown {
				out[i].Outcome = NoChange
			}
		case replayAt != Never && len(unknown) == 1:
			i := unknown[0]
			out[i].Outcome, out[i].After, out[i].Order = Sold, replayAfter, replayOrder
			out[i].Return = min(out[i].Return, replayAt)
		}
	}
	return out
}

// strip clears what no other operation can consult, so that states which
// differ only there are one: the buyer and key of an operation that is
// its buyer's only one, the key of one that is its key's only one. A
// model asks a buyer's count and a key's sale only of that buyer's and
// that key's other operations, and none comes before this one, so the
// answers it may give are the same. An unanswered send so stripped is a
// plain unit that may have gone, which the buyers' model then places
// where it was sent, as the counter does.
func strip(ops []Op) []Op {
	users, keys := map[string]int{}, map[purchase]int{}
	for _, op := range ops {
		if op.User != "" {
			users[op.User]++
		}
		if op.Key != "" {
			keys[purchase{op.User, op.Key}]++
		}
	}
	out := slices.Clone(ops)
	for i, op := range out {
		switch {
		case op.User != "" && users[op.User] == 1:
			out[i].User, out[i].Key, out[i].Note = "", "", joinNote(op.Note, op.User, op.Key)
		case op.Key != "" && keys[purchase{op.User, op.Key}] == 1:
			out[i].Key, out[i].Note = "", joinNote(op.Note, op.Key)
		}
	}
	return out
}

// joinNote keeps what strip cleared in the picture's label.
func joinNote(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

// unansweredBudget is how many units the unanswered requests took, by the
// books: the units gone by the final read, less those answered sold (a
// sale by its receipt included). false without a read.
func unansweredBudget(initial int64, ops []Op) (int64, bool) {
	var sold int64
	read, ok := int64(0), false
	for _, op := range ops {
		switch op.Outcome {
		case Sold, SoldSometime:
			sold++
		case Read:
			read, ok = op.After, true
		}
	}
	return initial - read - sold, ok
}

// purchase is one buyer's idempotency key: what a replay repeats. A key
// is its buyer's own (the ledger scopes it so), so two buyers' same key
// are two purchases.
type purchase struct{ user, key string }
