package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"seckill/internal/api"
)

// verify.go: the verdict of a sale by named buyers — what the answers
// said, held against the ledger, the per-user lists and the durable copy.

// ErrNoLedger: a buyer-aware run needs stockd's order ledger
// (stock.ledger), and GET /info says it is off.
var ErrNoLedger = errors.New("loadgen: the ledger is off (stock.ledger); buyers cannot be verified")

// Check is one line of the buyers' verdict.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Buyers is the buyer-aware part of a Report: the purchases, how they were
// answered, and the checks against the ledger.
type Buyers struct {
	Users        int     `json:"users"`
	RetryRate    float64 `json:"retry_rate"`
	PerUserLimit int     `json:"per_user_limit"` // from GET /info; 0: unlimited
	Purchases    int     `json:"purchases"`
	// Resent counts the purchases sent twice, by RetryKind name; Cut the
	// first sends the client gave up on (RetryTimeout).
	Resent map[string]int `json:"resent"`
	Cut    int            `json:"cut"`

	// Answers, one per send: Sold excludes Replayed.
	Sold         int `json:"sold"`
	Replayed     int `json:"replayed"`
	SoldOut      int `json:"sold_out"`
	LimitReached int `json:"limit_reached"`
	Errors       int `json:"errors"` // anything else, cut sends excepted

	// Orders is the distinct order ids the answers carried (sold, replayed,
	// unconfirmed and settled sold); BuyersWithOrders the distinct buyers
	// among them.
	Orders           int `json:"orders"`
	BuyersWithOrders int `json:"buyers_with_orders"`
	// Ledger is GET /ledger after the sale (and after the drain, when the
	// orders are durable).
	Ledger api.Ledger `json:"ledger"`
	// Duplicates counts idempotency keys with more than one order, and
	// OverLimit the buyers with more orders than the limit.
	Duplicates int `json:"duplicates"`
	OverLimit  int `json:"over_limit"`

	Checks []Check `json:"checks"`
}

// OK reports whether every check passed.
func (b *Buyers) OK() bool {
	for _, c := range b.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// Failed is the first failed check's name, or "".
func (b *Buyers) Failed() string {
	for _, c := range b.Checks {
		if !c.OK {
			return c.Name
		}
	}
	return ""
}

// VerifyConfig is what Verify needs besides the answers.
type VerifyConfig struct {
	// Info is GET /info: the per-user limit and whether orders are durable.
	Info api.Info
	// Drain bounds the wait for the durable orders to catch up (ledger lag
	// 0). The default is 30s.
	Drain time.Duration
	// Poll is the interval of that wait. The default is 200ms.
	Poll time.Duration
	// AdminToken reads the ledger and every buyer's orders.
	AdminToken string
}

// Verify checks the answers of a buyer-aware sale (FireBuyers) against the
// cluster at base: the ledger, every answered buyer's orders, and, when
// orders are durable, MySQL's count once the consumers have drained. A
// failed check is a false Check; an error means the cluster could not be
// read (wrapping ErrUnreachable or ErrBadResponse).
func Verify(ctx context.Context, client *http.Client, base string, cfg VerifyConfig, responses []Response) (*Buyers, error) {
	if cfg.Drain <= 0 {
		cfg.Drain = 30 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 200 * time.Millisecond
	}
	limit := cfg.Info.PerUserLimit
	b := &Buyers{PerUserLimit: limit, Resent: map[string]int{}}

	orders := map[string]bool{}            // every order id answered
	byUser := map[string]map[string]bool{} // user -> order ids answered
	sales := map[string]map[string]bool{}  // scoped key -> order ids of first-hand sales
	replays := map[string][]string{}       // scoped key -> order ids of replayed answers
	limited := map[string]bool{}           // users answered limit_reached
	keyUser := map[string]string{}         // purchase (scoped key) -> its user
	purchases := map[int]RetryKind{}       // purchase -> how it was sent
	add := func(m map[string]map[string]bool, k, v string) {
		if m[k] == nil {
			m[k] = map[string]bool{}
		}
		m[k][v] = true
	}
	for _, r := range responses {
		purchases[r.Purchase] = r.Retry
		keyUser[scoped(r.User, r.Key)] = r.User
		order := r.Order
		switch {
		case r.Cut:
			b.Cut++
			continue
		case r.Outcome == OutcomeSold:
			b.Sold++
		case r.Outcome == OutcomeReplayed:
			b.Replayed++
			replays[scoped(r.User, r.Key)] = append(replays[scoped(r.User, r.Key)], order)
		case r.Outcome == OutcomeUnconfirmed && r.Settled:
			order = r.Attempt // an order's id is its sale's attempt id
		case r.Outcome == OutcomeUnconfirmed, r.Outcome == OutcomeSoldOut:
			b.SoldOut += btoi(r.Outcome == OutcomeSoldOut)
			continue
		case r.Outcome == OutcomeLimitReached:
			b.LimitReached++
			limited[r.User] = true
			continue
		default:
			b.Errors++
			continue
		}
		if order == "" {
			// A sale without an order id: the ledger missed it. Count it
			// under a name no order has, so the counts disagree.
			order = fmt.Sprintf("(no order id #%d)", len(orders))
		}
		orders[order] = true
		add(byUser, r.User, order)
		if r.Outcome != OutcomeReplayed && r.Key != "" {
			add(sales, scoped(r.User, r.Key), order)
		}
	}
	b.Purchases = len(purchases)
	for _, k := range purchases {
		if k != RetryNone {
			b.Resent[k.String()]++
		}
	}
	b.Orders, b.BuyersWithOrders = len(orders), len(byUser)

	// The durable copy first: the ledger is then read once, drained.
	ledger, drained, err := drain(ctx, client, base, cfg)
	if err != nil {
		return nil, err
	}
	b.Ledger = ledger

	// Every buyer with an order or a limit_reached answer, as the ledger
	// lists them.
	listed, err := ordersOf(ctx, client, base, cfg.AdminToken, slices.Sorted(maps.Keys(union(byUser, limited))))
	if err != nil {
		return nil, err
	}

	b.check("orders == lucky == ledger", b.Orders == int(ledger.Lucky) && ledger.Lucky == ledger.Orders,
		"%d answered, lucky %d, ledger %d", b.Orders, ledger.Lucky, ledger.Orders)

	// The ledger's own lists, per buyer, hold exactly the answered orders.
	var missing, extra int
	ledgerKeys := map[string]map[string]bool{} // scoped key -> order ids in the ledger
	ledgerOrder := map[string]api.Order{}
	for user, list := range listed {
		got := map[string]bool{}
		for _, o := range list {
			got[o.ID] = true
			ledgerOrder[o.ID] = o
			if o.Key != "" {
				add(ledgerKeys, scoped(o.User, o.Key), o.ID)
			}
			if !byUser[user][o.ID] {
				extra++
			}
		}
		for id := range byUser[user] {
			if !got[id] {
				missing++
			}
		}
	}
	b.check("ledger lists == answers, per buyer", missing == 0 && extra == 0 && ledger.Buyers == int64(len(byUser)),
		"%d buyers answered, ledger %d; %d answered orders not listed, %d listed not answered", len(byUser), ledger.Buyers, missing, extra)

	if limit > 0 {
		worst := ""
		for user, list := range listed {
			if n := max(len(list), len(byUser[user])); n > limit {
				b.OverLimit++
				worst = fmt.Sprintf("; e.g. %s with %d", user, n)
			}
		}
		b.check("no buyer over the limit", b.OverLimit == 0, "limit %d, %d buyers over%s", limit, b.OverLimit, worst)
	}
	falseLimit := 0
	for user := range limited {
		if limit == 0 || len(listed[user]) < limit {
			falseLimit++
		}
	}
	b.check("limit_reached only at the limit", falseLimit == 0,
		"%d limit_reached answers, %d buyers told so below the limit %d", b.LimitReached, falseLimit, limit)

	for key, ids := range sales {
		if len(ids) > 1 || len(ledgerKeys[key]) > 1 {
			b.Duplicates++
		}
	}
	for key, ids := range ledgerKeys {
		if _, answered := sales[key]; len(ids) > 1 && !answered { // the others are counted above
			b.Duplicates++
		}
	}
	b.check("one order per idempotency key", b.Duplicates == 0, "%d keys with two or more orders", b.Duplicates)

	wrong := 0
	for key, ids := range replays {
		for _, id := range ids {
			o, ok := ledgerOrder[id]
			original := ok && scoped(o.User, o.Key) == key && o.User == keyUser[key]
			for first := range sales[key] {
				original = original && first == id
			}
			if !original {
				wrong++
			}
		}
	}
	b.check("replays answer the original order", wrong == 0, "%d replayed answers, %d with another order id", b.Replayed, wrong)

	if cfg.Info.Durable {
		durable := int64(-1)
		if ledger.Durable != nil {
			durable = *ledger.Durable
		}
		lag := "unknown"
		if ledger.Lag != nil {
			lag = fmt.Sprint(*ledger.Lag)
		}
		b.check("MySQL rows == ledger orders (drained)", drained && durable == ledger.Orders,
			"rows %d, ledger %d, lag %s after at most %v", durable, ledger.Orders, lag, cfg.Drain)
	}
	return b, nil
}

func (b *Buyers) check(name string, ok bool, format string, args ...any) {
	b.Checks = append(b.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
}

// drain reads the ledger; when orders are durable it polls until the lag
// is 0 (drained true) or cfg.Drain passes (drained false, the last read
// returned).
func drain(ctx context.Context, client *http.Client, base string, cfg VerifyConfig) (api.Ledger, bool, error) {
	l, err := GetLedger(ctx, client, base, cfg.AdminToken)
	if err != nil || !cfg.Info.Durable {
		return l, err == nil, err
	}
	deadline := time.NewTimer(cfg.Drain)
	defer deadline.Stop()
	tick := time.NewTicker(cfg.Poll)
	defer tick.Stop()
	for l.Lag == nil || *l.Lag != 0 {
		select {
		case <-ctx.Done():
			return l, false, ctx.Err()
		case <-deadline.C:
			return l, false, nil
		case <-tick.C:
		}
		if l, err = GetLedger(ctx, client, base, cfg.AdminToken); err != nil {
			return l, false, err
		}
	}
	return l, true, nil
}

// ordersOf reads every listed user's orders, a few users at a time.
func ordersOf(ctx context.Context, client *http.Client, base, adminToken string, users []string) (map[string][]api.Order, error) {
	out := make(map[string][]api.Order, len(users))
	var mu sync.Mutex
	var errs []error
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(8, len(users)) {
		wg.Go(func() {
			for user := range work {
				list, err := GetOrders(ctx, client, base, adminToken, user)
				mu.Lock()
				out[user] = list
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	for _, u := range users {
		work <- u
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return out, nil
}

func union[V any](a map[string]map[string]bool, b map[string]V) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// WriteText prints the buyers' answers and the checks as a table.
func (b *Buyers) WriteText(w io.Writer) error {
	var s strings.Builder
	fmt.Fprintf(&s, "buyers: %d purchases by %d buyers, limit %s, %d re-sent (timeout %d, after %d, race %d), %d first sends cut\n",
		b.Purchases, b.Users, limitText(b.PerUserLimit), sum(b.Resent), b.Resent["timeout"], b.Resent["after"], b.Resent["race"], b.Cut)
	fmt.Fprintf(&s, "  answers: sold %d  replayed %d  sold out %d  limit reached %d  errors %d\n",
		b.Sold, b.Replayed, b.SoldOut, b.LimitReached, b.Errors)
	fmt.Fprintf(&s, "  orders %d answered, %d in the ledger, lucky %d; buyers %d answered, %d in the ledger; duplicates %d",
		b.Orders, b.Ledger.Orders, b.Ledger.Lucky, b.BuyersWithOrders, b.Ledger.Buyers, b.Duplicates)
	if b.Ledger.Durable != nil {
		fmt.Fprintf(&s, "; MySQL %d", *b.Ledger.Durable)
		if b.Ledger.Lag != nil {
			fmt.Fprintf(&s, " (lag %d)", *b.Ledger.Lag)
		}
	}
	s.WriteString("\n")
	tw := tabwriter.NewWriter(&s, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  check\tresult\tdetail")
	for _, c := range b.Checks {
		res := "ok"
		if !c.OK {
			res = "FAILED"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Name, res, c.Detail)
	}
	_ = tw.Flush()
	_, err := io.WriteString(w, s.String())
	return err
}

func limitText(n int) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// scoped is an idempotency key as the service scopes it: its buyer's own,
// so two buyers' same key are two purchases. Neither holds a space.
func scoped(user, key string) string { return user + " " + key }
