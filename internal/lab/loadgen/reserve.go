package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"seckill/internal/api"
	"seckill/internal/auth"
)

// reserve.go: a sale with reservations (orders.payment_window) as its
// buyers live it, for the demo's reservations row (docs/reservations.md).
// Each buyer tries until it wins, or the sale is sold out with nothing
// pending; a winner pays, except every NeverPay-th buyer, who never does,
// so its unit expires and sells again. At the end every unit should be
// paid, once, and the books exact.

// ReserveConfig is one such sale.
type ReserveConfig struct {
	URL, AdminToken string
	// Minter signs each buyer's token; nil names buyers by X-User (a
	// service that trusts this client as its gateway).
	Minter *auth.Minter
	// Stock is the sale's units (reset first), Buyers how many buyers
	// there are, each its own user; every NeverPay-th buyer wins and
	// never pays (0: all pay).
	Stock, Buyers, NeverPay int
	// Concurrency bounds the buyers in flight; Timeout the whole sale.
	Concurrency int
	Timeout     time.Duration
	// OnNeverPay, when set, is told of each order won by a buyer that
	// will not pay it, as it is answered: a lab cell may pay it itself,
	// at a moment it chooses (Pay). It must not block.
	OnNeverPay func(NeverPaid)
	// OnPaid, when set, is told of each payment answered paid (no refund
	// owed), as it is answered and before its buyer goes on: a lab cell
	// reads the durable copy the answer promised there. It may block
	// for a read; it must be safe for concurrent use.
	OnPaid func(order, paymentID string)
	// Window is the sale's orders.payment_window: with SameClock, each
	// deadline is held to its sale's time plus it (0: not checked).
	Window time.Duration
	// SameClock says that the stock Redis's clock is this process's (one
	// machine, never stepped): each order's deadline and its payment's
	// answer are then held to the times this process sent and heard them
	// (Lifecycles).
	SameClock bool
}

// NeverPaid is an order its buyer will leave unpaid.
type NeverPaid struct {
	Order string
	PayBy int64 // its deadline as answered (unix ms; 0 on a replay)
	Buyer Purchase
}

// ReserveReport is what such a sale ended with.
type ReserveReport struct {
	Stock    int `json:"stock"`
	Buyers   int `json:"buyers"`
	Paid     int `json:"paid"`      // winners whose payment was answered paid
	NeverPay int `json:"never_pay"` // winners that never paid: their units expired
	Refunds  int `json:"refunds"`   // payments answered expired, owed back
	Lost     int `json:"lost"`      // buyers that ended on a sold out with nothing pending
	Errors   int `json:"errors"`    // buyers that ended on an answer no buyer expects
	Retries  int `json:"retries"`   // sends after a sold out with units pending, or busy
	// Resent counts sends repeated after an answer that did not say
	// what happened (a transport error, a 5xx, fenced, unconfirmed): the
	// purchase again with its key, the payment with its id, so the
	// repeat finds what the first did rather than doing it twice.
	Resent    int `json:"resent,omitempty"`
	PaidTwice int `json:"paid_twice"` // units with more than one paid order
	// Backward counts sales whose pay_by came before that of a sale
	// answered before they were sent: a deadline set by a clock that went
	// back (the reservations' clock only moves forward).
	Backward int   `json:"backward"`
	Left     int64 `json:"left"`     // the stock at the end
	Lucky    int64 `json:"lucky"`    // units taken
	Returned int64 `json:"returned"` // units that came back
	// Census is GET /stock/reservations at the end: every order counted
	// by state, and the invariants they break.
	Census *api.Census `json:"census,omitempty"`
	// Lifecycles is each order won checked on its own against what its
	// buyer was told (checkLives).
	Lifecycles Lifecycles `json:"lifecycles"`
	// Consistent: stock + lucky - returned = the initial stock, the
	// census sound, every unit paid exactly once, nothing left, no
	// deadline set backward.
	Consistent bool    `json:"consistent"`
	DurationMS float64 `json:"duration_ms"`
	// PaidAllMS is from the start to the answer of the last payment
	// answered paid: every unit final, before the last losers' waits.
	PaidAllMS float64 `json:"paid_all_ms"`
	Err       string  `json:"error,omitempty"`
}

// RunReserve resets the sale to cfg.Stock and runs its buyers.
func RunReserve(ctx context.Context, cfg ReserveConfig) (*ReserveReport, error) {
	if cfg.Stock < 1 || cfg.Buyers < 1 || cfg.Concurrency < 1 || cfg.Timeout <= 0 {
		return nil, fmt.Errorf("loadgen: reserve: stock %d, buyers %d, concurrency %d, timeout %s: each must be positive",
			cfg.Stock, cfg.Buyers, cfg.Concurrency, cfg.Timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	client := &http.Client{Timeout: 10 * time.Second}
	r := &reserveRun{cfg: cfg, client: client, run: RunID(), payBy: &maxInt64{}}
	if _, err := r.send(ctx, http.MethodPost, "/stock/reset", fmt.Sprintf(`{"stock":%d}`, cfg.Stock), Purchase{}, true); err != nil {
		return nil, fmt.Errorf("loadgen: reserve: reset: %w", err)
	}
	start := time.Now()
	rep := &ReserveReport{Stock: cfg.Stock, Buyers: cfg.Buyers}
	var mu sync.Mutex
	var lastPaid time.Time
	paidOrders := []string{}
	var lives []orderLife
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	for i := range cfg.Buyers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out := r.buyer(ctx, i)
			mu.Lock()
			defer mu.Unlock()
			rep.Retries += out.retries
			rep.Resent += out.resent
			rep.Backward += out.backward
			rep.Refunds += out.refunds
			lives = append(lives, out.lives...)
			switch out.end {
			case endPaid:
				rep.Paid++
				paidOrders = append(paidOrders, out.order)
				if out.paidAt.After(lastPaid) {
					lastPaid = out.paidAt
				}
			case endNeverPay:
				rep.NeverPay++
			case endLost:
				rep.Lost++
			default:
				rep.Errors++
				if rep.Err == "" && out.err != nil {
					rep.Err = out.err.Error()
				}
			}
		})
	}
	wg.Wait()
	rep.DurationMS = ms(time.Since(start))
	if !lastPaid.IsZero() {
		rep.PaidAllMS = ms(lastPaid.Sub(start))
	}
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("loadgen: reserve: %w", err)
	}
	// Every order won, read back once: each checked on its own, the paid
	// ones for their unit numbers.
	orders, err := r.checkLives(ctx, lives, &rep.Lifecycles)
	if err != nil {
		return rep, fmt.Errorf("loadgen: reserve: %w", err)
	}
	units := map[int64]int{}
	for _, id := range paidOrders {
		o, ok := orders[id]
		if !ok {
			return rep, fmt.Errorf("loadgen: reserve: order %s: answered paid, not among the orders won", id)
		}
		if units[o.Unit]++; units[o.Unit] == 2 {
			rep.PaidTwice++
		}
	}
	var st api.Stock
	if err := r.get(ctx, "/stock", &st); err != nil {
		return rep, fmt.Errorf("loadgen: reserve: read the books: %w", err)
	}
	rep.Left, rep.Lucky, rep.Returned = st.Stock, st.Lucky, st.Returned
	var census api.Census
	if err := r.get(ctx, "/stock/reservations", &census); err != nil {
		return rep, fmt.Errorf("loadgen: reserve: the census: %w", err)
	}
	rep.Census = &census
	books := api.Books{Stock: st.Stock, Lucky: st.Lucky, Returned: st.Returned, Initial: int64(cfg.Stock)}
	rep.Consistent = books.Balanced() && census.OK && rep.PaidTwice == 0 && rep.Paid == cfg.Stock && st.Stock == 0 && rep.Backward == 0 &&
		rep.Lifecycles.Broken == 0
	return rep, nil
}

// reserveRun is the sale's buyers' shared client.
type reserveRun struct {
	cfg    ReserveConfig
	client *http.Client
	run    string // in every purchase's key: two runs never share one
	// payBy is the latest deadline answered so far: a sale sent after
	// that answer must get one no earlier (Backward).
	payBy *maxInt64
}

// maxInt64 is the highest value stored in it.
type maxInt64 struct {
	mu sync.Mutex
	v  int64
}

func (m *maxInt64) load() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.v
}

func (m *maxInt64) raise(v int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.v = max(m.v, v)
}

// resendAfter is the pause before a send is repeated after an answer
// that did not say what happened: a replica restarting, a fault ending.
const resendAfter = 100 * time.Millisecond

type reserveEnd int

const (
	endError reserveEnd = iota
	endPaid
	endNeverPay
	endLost
)

// buyerOutcome is how one buyer's sale ended.
type buyerOutcome struct {
	end                      reserveEnd
	order                    string // the paid order
	paidAt                   time.Time
	retries, refunds, resent int
	backward                 int
	lives                    []orderLife // every order it won
	err                      error
}

// unknown reports whether answer a (or the error sending it) leaves
// what the send did unknown, or undone but repeatable: the same
// purchase (its key) or payment (its id) is sent again.
func unknown(a reserveAnswer, err error) bool {
	if err != nil {
		return true // a transport error, or nginx's page for a dead replica
	}
	switch a.body.Result {
	case api.Fenced, api.LockLost, api.Unconfirmed:
		return true
	}
	return a.code >= 500 && a.body.Result != api.Busy
}

// pause waits d, false when ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// buyer is buyer i's sale: buy until it wins or nothing can come back,
// then pay (unless it never pays). A send whose outcome is unknown is
// sent again as it was: the purchase with its key (a replay answers the
// sale it made, if any), the payment with its id.
func (r *reserveRun) buyer(ctx context.Context, i int) (out buyerOutcome) {
	p := Purchase{User: fmt.Sprintf("r%d", i+1)}
	if r.cfg.Minter != nil {
		p.Token = r.cfg.Minter.Token(p.User)
	}
	neverPays := r.cfg.NeverPay > 0 && i%r.cfg.NeverPay == 0
	tries := 0
	var firstSent time.Time // the key's first send
	newKey := func() {
		tries++
		p.Key = fmt.Sprintf("%s-%s-%d", r.run, p.User, tries)
		firstSent = time.Time{}
	}
	newKey()
	for {
		floor := r.payBy.load()
		if firstSent.IsZero() {
			firstSent = time.Now()
		}
		a, err := r.send(ctx, http.MethodPost, "/stock/reduce", "", p, false)
		answered := time.Now()
		if a.code == http.StatusOK && err == nil && a.body.PayBy != nil && *a.body.PayBy > 0 {
			// A replay carries none: its deadline was the first send's.
			if *a.body.PayBy < floor {
				out.backward++
			}
			r.payBy.raise(*a.body.PayBy)
		}
		switch {
		case ctx.Err() != nil:
			out.err = ctx.Err()
			return out
		case unknown(a, err):
			out.resent++
			if !pause(ctx, resendAfter) {
				out.err = fmt.Errorf("sale: %w (last: %d %s %v)", ctx.Err(), a.code, a.body.Result, err)
				return out
			}
		case a.code == http.StatusOK && neverPays:
			out.lives = append(out.lives, newLife(a, firstSent, answered, true))
			if r.cfg.OnNeverPay != nil {
				np := NeverPaid{Order: a.body.Order, Buyer: p}
				if a.body.PayBy != nil {
					np.PayBy = *a.body.PayBy
				}
				r.cfg.OnNeverPay(np)
			}
			out.end = endNeverPay
			return out
		case a.code == http.StatusOK:
			life := newLife(a, firstSent, answered, false)
			life.paySent = time.Now()
			pid := "pay-" + p.Key
			end, err := r.pay(ctx, p, a.body.Order, pid, &out)
			if err != nil {
				out.err = err
				return out
			}
			if end.State == "paid" && !end.Refund && r.cfg.OnPaid != nil {
				r.cfg.OnPaid(a.body.Order, pid)
			}
			life.payAnswered, life.end = time.Now(), end
			out.lives = append(out.lives, life)
			if end.State == "paid" && !end.Refund {
				out.end, out.order, out.paidAt = endPaid, a.body.Order, life.payAnswered
				return out
			}
			// Too late: owed back. This buyer tries again, with a new
			// key: the old one names the order that lapsed.
			out.refunds++
			newKey()
		case a.body.Result == api.SoldOut && (a.body.Pending == nil || *a.body.Pending == 0):
			out.end = endLost
			return out
		case a.body.Result == api.SoldOut || a.body.Result == api.Busy:
			out.retries++
			wait := time.Second
			if s, err := strconv.Atoi(a.retryAfter); err == nil && s > 0 {
				wait = time.Duration(s) * time.Second
			}
			if !pause(ctx, wait) { // the service's Retry-After: when a unit may be back
				out.err = ctx.Err()
				return out
			}
		default:
			out.err = fmt.Errorf("sale: %d %s", a.code, a.body.Result)
			return out
		}
	}
}

// Pay pays order as buyer p with paymentID through the service at url,
// and returns what the order ended as. A send whose outcome is unknown
// (a transport error, a 5xx) is sent again with the same payment id,
// which pays once.
func Pay(ctx context.Context, url string, p Purchase, order, paymentID string) (api.OrderEnd, error) {
	r := &reserveRun{cfg: ReserveConfig{URL: url}, client: &http.Client{Timeout: 10 * time.Second}}
	defer r.client.CloseIdleConnections()
	return r.pay(ctx, p, order, paymentID, &buyerOutcome{})
}

// pay pays order id as buyer p with paymentID (the buyer's key's, so a
// payment sent again after a lost answer pays once).
func (r *reserveRun) pay(ctx context.Context, p Purchase, id, paymentID string, out *buyerOutcome) (api.OrderEnd, error) {
	body, err := json.Marshal(map[string]string{"payment_id": paymentID})
	if err != nil {
		return api.OrderEnd{}, err
	}
	for {
		a, err := r.send(ctx, http.MethodPost, "/orders/"+id+"/pay", string(body), p, false)
		switch {
		case ctx.Err() != nil:
			return api.OrderEnd{}, fmt.Errorf("pay %s: %w", id, ctx.Err())
		case unknown(a, err):
			out.resent++
			if !pause(ctx, resendAfter) {
				return api.OrderEnd{}, fmt.Errorf("pay %s: %w (last: %d %v)", id, ctx.Err(), a.code, err)
			}
		case a.code != http.StatusOK:
			return api.OrderEnd{}, fmt.Errorf("pay %s: %d %s", id, a.code, a.end.State)
		default:
			return a.end, nil
		}
	}
}

// reserveAnswer is one answer, read as a sale's or an order end's.
type reserveAnswer struct {
	code       int
	retryAfter string
	body       api.Sale
	end        api.OrderEnd
}

// send sends method path with body as buyer p (or the admin), and reads
// the answer.
func (r *reserveRun) send(ctx context.Context, method, path, body string, p Purchase, admin bool) (reserveAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(r.cfg.URL, "/")+path, strings.NewReader(body))
	if err != nil {
		return reserveAnswer{}, err
	}
	if admin {
		req.Header.Set("X-Admin-Token", r.cfg.AdminToken)
	} else {
		SetBuyer(req, p)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return reserveAnswer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reserveAnswer{}, err
	}
	a := reserveAnswer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if err := errors.Join(json.Unmarshal(raw, &a.body), json.Unmarshal(raw, &a.end)); err != nil {
		return a, fmt.Errorf("%s %s: %d, not JSON: %w", method, path, resp.StatusCode, err)
	}
	if admin && resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return a, nil
}

// get reads path with the admin token into v. A read is sent again
// after an answer that did not come from stockd (a transport error, a
// 5xx): a replica restarting, a fault not yet over.
func (r *reserveRun) get(ctx context.Context, path string, v any) error {
	for {
		retry, err := r.getOnce(ctx, path, v)
		if !retry {
			return err
		}
		if !pause(ctx, resendAfter) {
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		}
	}
}

func (r *reserveRun) getOnce(ctx context.Context, path string, v any) (retry bool, _ error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(r.cfg.URL, "/")+path, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("X-Admin-Token", r.cfg.AdminToken)
	resp, err := r.client.Do(req)
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode >= 500, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return false, json.NewDecoder(resp.Body).Decode(v)
}
