package lab

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"seckill/internal/api"
	"seckill/internal/auth"
	"seckill/internal/backoff"
	"seckill/internal/lab/loadgen"
	"seckill/internal/stockd"
)

// buyers.go: the buyers' cells. Their load is named buyers
// (loadgen.Plan: users, keys, a fifth of the purchases re-sent), the
// replicas keep an order ledger with a per-user limit of 1 and store it in
// MariaDB, and the books hold the answers against the ledger, the
// per-buyer lists and MySQL with loadgen.Verify, the verdict of
// `seckill run --users`: 0 oversold, 0 lost orders, 0 duplicated.

// BuyerInitial is the stock of the buyers' cells: fewer units than buyers,
// so the sale sells out and some buyers go without.
const BuyerInitial = 100

// The buyers' load: 120 buyers make 144 purchases (24 of them a second
// purchase, which the limit refuses), a fifth re-sent with the same key.
const (
	buyerUsers     = 120
	buyerPurchases = 144
	buyerRetryRate = 0.2
	// buyerCut is how long the first send of a RetryTimeout purchase is
	// waited for: about one queued sale, so some are cut mid-flight.
	buyerCut = 150 * time.Millisecond
	// buyerDrain bounds the wait for MySQL to hold every order.
	buyerDrain = 20 * time.Second
)

// buyerEnv is the stockd configuration the buyers' cells add: the ledger,
// one unit per buyer, durable orders, and a claim idle short enough that a
// dead consumer's orders move within the cell.
// buyerLimit is the buyers' cells' per-user limit.
const buyerLimit = 1

func buyerEnv(c *stockd.Config) {
	c.Stock.Ledger, c.Stock.PerUserLimit = true, buyerLimit
	c.Orders.Durable, c.Orders.ClaimIdle = true, time.Second
}

// buyerScenarios are the scenarios run with named buyers, on redis: three
// of their own and the pause (a fenced sale must leave no order).
var buyerScenarios = []string{"pause", "consumerkill", "mysqldown", "replayrace"}

// buyersOnly reports whether scenario s exists only with named buyers.
func buyersOnly(s string) bool { return scenarios[s].buyers }

// buyerPlan hands out the purchases of a buyers' cell and remembers which
// are settled: answered with a verdict, not an unknown outcome.
type buyerPlan struct {
	run  string
	mint *auth.Minter // the cluster's: every purchase carries its buyer's token

	mu        sync.Mutex
	purchases []loadgen.Purchase
	n, next   int // the load takes the first n; extra ones come after
	settled   map[int]bool
	// unknown: a send of the purchase had an unknown outcome (it may
	// have sold), so only a verdict that read its key's record settles it.
	unknown map[int]bool
}

func newBuyerPlan(mint *auth.Minter) *buyerPlan {
	run := loadgen.RunID()
	rng := mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	ps := loadgen.Plan(buyerPurchases, buyerUsers, buyerRetryRate, run, rng)
	loadgen.Sign(ps, mint)
	return &buyerPlan{run: run, mint: mint, purchases: ps, n: len(ps), settled: map[int]bool{}, unknown: map[int]bool{}}
}

// take returns the load's next purchase, false once all are taken.
func (b *buyerPlan) take() (int, loadgen.Purchase, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next >= b.n {
		return 0, loadgen.Purchase{}, false
	}
	b.next++
	return b.next - 1, b.purchases[b.next-1], true
}

// extra adds a purchase by a buyer of its own ("<prefix><n>"), sent once.
func (b *buyerPlan) extra(prefix string) (int, loadgen.Purchase) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := len(b.purchases)
	p := loadgen.Purchase{User: fmt.Sprintf("%s%d", prefix, i), Key: fmt.Sprintf("%s-%s%d", b.run, prefix, i)}
	p.Token = b.mint.Token(p.User)
	b.purchases = append(b.purchases, p)
	return i, p
}

// answer records r, an answer to a send of purchase i, and reports
// whether the purchase is settled now. A send without a verdict (settled)
// may have sold; after one, busy, fenced and lock_lost settle nothing:
// they say this send did not sell, and nothing of the earlier one, whose
// write may still land (a later send fenced while the earlier one's sale
// went through left an order no answer told). Only a verdict the sale's
// script gave after reading the key's record settles it then: sold (a
// replay of the earlier sale, or its own) or sold_out and limit_reached
// (the key has no sale).
func (b *buyerPlan) answer(i int, r response) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !settled(r):
		b.unknown[i] = true
		return false
	case b.unknown[i] && r.Result != api.Sold && r.Result != api.SoldOut && r.Result != api.LimitReached:
		return false
	}
	b.settled[i] = true
	return true
}

// unsettled lists the purchases sent (by the load or as extras) whose
// every send had an unknown outcome.
func (b *buyerPlan) unsettled(sent map[int]bool) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for i := range sent {
		if !b.settled[i] {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

func (b *buyerPlan) purchase(i int) loadgen.Purchase {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.purchases[i]
}

// settled reports whether r is a verdict: the sale happened (sold,
// replayed) or did not (every other result stockd answers as itself).
// A transport error, nginx's 502/504, "error" and "unconfirmed" are not:
// the sale may have happened, and only the key's replay will say.
func settled(r response) bool {
	switch r.Result {
	case api.Sold, api.SoldOut, api.Fenced, api.Busy, api.LockLost, api.LimitReached:
		return r.Result.Matches(r.Status)
	}
	return false
}

// namedBuyer takes purchases until the plan is done, the sale sold out or
// the load stops.
func (l *load) namedBuyer() {
	for !l.stopping() {
		i, p, ok := l.plan.take()
		if !ok {
			return
		}
		if r := l.purchase(i, p); r.Result == api.SoldOut {
			return
		}
	}
}

func (l *load) stopping() bool {
	select {
	case <-l.quit:
		return true
	default:
		return false
	}
}

// purchase sends p once, or twice as its RetryKind says; each send that
// gets no verdict is sent again with the same key (resolve).
func (l *load) purchase(i int, p loadgen.Purchase) response {
	ctx := context.Background()
	switch p.Retry {
	case loadgen.RetryTimeout:
		short, cancel := context.WithTimeout(ctx, buyerCut)
		first := l.send(short, l.url, p)
		first.Cut = first.Status == 0 && errors.Is(short.Err(), context.DeadlineExceeded)
		cancel()
		l.record(l.stamp(first, i, p, false))
		l.plan.answer(i, first)
		return l.resolve(ctx, l.url, i, p, true)
	case loadgen.RetryAfter:
		if r := l.resolve(ctx, l.url, i, p, false); l.stopping() {
			return r
		}
		return l.resolve(ctx, l.url, i, p, true)
	case loadgen.RetryRace:
		var a, b response
		var wg sync.WaitGroup
		wg.Go(func() { a = l.resolve(ctx, l.url, i, p, false) })
		wg.Go(func() { b = l.resolve(ctx, l.url, i, p, true) })
		wg.Wait()
		if b.Result == api.SoldOut {
			return b
		}
		return a
	default:
		return l.resolve(ctx, l.url, i, p, false)
	}
}

// resolve sends purchase i to url until it gets a verdict, pausing after
// each unknown outcome, or until the load stops (settle finishes it then).
func (l *load) resolve(ctx context.Context, url string, i int, p loadgen.Purchase, resend bool) response {
	for {
		r := l.record(l.stamp(l.send(ctx, url, p), i, p, resend))
		if l.plan.answer(i, r) {
			return r
		}
		resend = true
		t := time.NewTimer(errorPause)
		select {
		case <-t.C:
		case <-l.quit:
			t.Stop()
			return r
		case <-ctx.Done():
			t.Stop()
			return r
		}
	}
}

// sendAt is one send of purchase i to url, recorded.
func (l *load) sendAt(ctx context.Context, url string, i int, p loadgen.Purchase, resend bool) response {
	r := l.record(l.stamp(l.send(ctx, url, p), i, p, resend))
	l.plan.answer(i, r)
	return r
}

func (l *load) stamp(r response, i int, p loadgen.Purchase, resend bool) response {
	r.Purchase, r.User, r.Key, r.Retry, r.Resend = i, p.User, p.Key, p.Retry, resend
	return r
}

// settle re-sends, after the load stopped, every purchase still without a
// verdict, with its key, until each gets one or ctx ends; it returns every
// answer. A replica killed mid-sale, or a write left unconfirmed, leaves
// such purchases: the replay answers the order they left, if any.
func (l *load) settle(ctx context.Context) []response {
	l.mu.Lock()
	sent := map[int]bool{}
	for _, r := range l.resps {
		if r.User != "" {
			sent[r.Purchase] = true
		}
	}
	l.mu.Unlock()
	for _, i := range l.plan.unsettled(sent) {
		p := l.plan.purchase(i)
		poll := backoff.Backoff{Initial: 20 * time.Millisecond, Max: 500 * time.Millisecond}
		for ctx.Err() == nil {
			r := l.record(l.stamp(l.send(ctx, l.url, p), i, p, true))
			if l.plan.answer(i, r) {
				break
			}
			_ = poll.Wait(ctx) // an ended ctx ends the loop
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]response(nil), l.resps...)
}

// outcome is the answer as loadgen counts it: its verdict shares
// loadgen.Verify, so the lab and `seckill run --users` judge alike.
func (r response) outcome() loadgen.Outcome {
	if !r.Result.Matches(r.Status) {
		return loadgen.OutcomeError
	}
	switch r.Result {
	case api.Sold:
		if r.Replayed {
			return loadgen.OutcomeReplayed
		}
		return loadgen.OutcomeSold
	case api.SoldOut:
		return loadgen.OutcomeSoldOut
	case api.Busy:
		return loadgen.OutcomeBusy
	case api.Fenced:
		return loadgen.OutcomeFenced
	case api.LockLost:
		return loadgen.OutcomeLockLost
	case api.Unconfirmed:
		return loadgen.OutcomeUnconfirmed
	case api.LimitReached:
		return loadgen.OutcomeLimitReached
	}
	return loadgen.OutcomeError
}

// answer converts a named buyer's answer for loadgen.Verify.
func (r response) answer() loadgen.Response {
	out := loadgen.Response{
		Outcome: r.outcome(), Status: r.Status, Replica: r.Replica, Attempt: r.Attempt, Settled: r.Settled,
		Sent: r.Sent, Received: r.At, Purchase: r.Purchase, User: r.User, Key: r.Key, Order: r.Order,
		Retry: r.Retry, Resend: r.Resend, Cut: r.Cut,
	}
	if r.Error != "" {
		out.Err = errors.New(r.Error)
	}
	return out
}

// buyerBooks is books for the buyers' cells: besides stock + lucky ==
// initial, the answers must match the ledger (loadgen.Verify), and no
// buyer may hold an order no answer named: a fenced sale, or one whose
// answer was lost and never replayed, must leave none.
func (x *run) buyerBooks(ctx context.Context, client *http.Client, st api.Stock, resps []response) error {
	v, err := judgeBuyers(ctx, client, x.c.URL(), x.c.AdminToken(), resps)
	if err != nil {
		return err
	}
	r := x.res
	r.Orders = v.Buyers
	r.Consistent = api.Books{Stock: st.Stock, Lucky: st.Lucky, Initial: int64(r.Initial)}.Balanced() && st.Lucky == int64(v.Orders)
	x.problems = append(x.problems, v.problems...)
	x.notef("orders %d, ledger %d, MySQL %s; %d buyers, %d replayed, %d limit_reached, %d re-sent (%d after no verdict)",
		v.Orders, v.Ledger.Orders, durableText(v.Ledger), v.BuyersWithOrders, v.Replayed, v.LimitReached, v.resent, v.unknown)
	return nil
}

// buyerVerdict is judgeBuyers' answer.
type buyerVerdict struct {
	*loadgen.Buyers
	problems []string
	resent   int // sends after a purchase's first
	unknown  int // sends without a verdict (502, unconfirmed, ...), not cut on purpose
}

// judgeBuyers holds the named buyers' answers in resps against the
// cluster at base: loadgen.Verify's checks (orders == lucky == ledger,
// per-buyer lists == answers, the limit, one order per key, replays name
// the original, MySQL rows == orders once drained) and the orders of
// every buyer whom no answer gave one (there must be none). Each failed
// check is a problem; the error is non-nil only when base could not be read.
func judgeBuyers(ctx context.Context, client *http.Client, base, adminToken string, resps []response) (buyerVerdict, error) {
	info, err := loadgen.GetInfo(ctx, client, base)
	if err != nil {
		return buyerVerdict{}, fmt.Errorf("read /info: %w", err)
	}
	if !info.Ledger {
		return buyerVerdict{}, loadgen.ErrNoLedger
	}
	var v buyerVerdict
	if !info.Durable {
		v.problems = append(v.problems, "orders.durable is off: MySQL was not checked")
	}
	var answers []loadgen.Response
	users := map[string]bool{} // every named buyer who sent something
	ordered := map[string]bool{}
	for _, r := range resps {
		if r.User == "" {
			continue
		}
		a := r.answer()
		answers = append(answers, a)
		users[r.User] = true
		if a.Outcome == loadgen.OutcomeSold || a.Outcome == loadgen.OutcomeReplayed || (a.Outcome == loadgen.OutcomeUnconfirmed && a.Settled) {
			ordered[r.User] = true
		}
		if r.Resend {
			v.resent++
		}
		if !settled(r) && !r.Cut {
			v.unknown++
		}
	}
	vctx, cancel := context.WithTimeout(ctx, buyerDrain+15*time.Second)
	defer cancel()
	b, err := loadgen.Verify(vctx, client, base, loadgen.VerifyConfig{Info: info, Drain: buyerDrain, AdminToken: adminToken}, answers)
	if err != nil {
		return buyerVerdict{}, fmt.Errorf("verify the buyers: %w", err)
	}
	b.Users, b.RetryRate = len(users), buyerRetryRate
	v.Buyers = b
	for _, c := range b.Checks {
		if !c.OK {
			v.problems = append(v.problems, c.Name+": "+c.Detail)
		}
	}
	var silent []string
	for _, u := range slices.Sorted(func(yield func(string) bool) {
		for u := range users {
			if !ordered[u] && !yield(u) {
				return
			}
		}
	}) {
		list, err := loadgen.GetOrders(vctx, client, base, adminToken, u)
		if err != nil {
			return buyerVerdict{}, fmt.Errorf("orders of %s: %w", u, err)
		}
		for _, o := range list {
			silent = append(silent, u+":"+o.ID)
		}
	}
	if len(silent) > 0 {
		v.problems = append(v.problems, fmt.Sprintf("%d order(s) of buyers no answer gave one (a fenced or lost sale left an order): %v",
			len(silent), silent[:min(len(silent), 5)]))
	}
	return v, nil
}

func durableText(l api.Ledger) string {
	if l.Durable == nil {
		return "-"
	}
	return fmt.Sprint(*l.Durable)
}
