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
}

// ReserveReport is what such a sale ended with.
type ReserveReport struct {
	Stock     int   `json:"stock"`
	Buyers    int   `json:"buyers"`
	Paid      int   `json:"paid"`       // winners whose payment was answered paid
	NeverPay  int   `json:"never_pay"`  // winners that never paid: their units expired
	Refunds   int   `json:"refunds"`    // payments answered expired, owed back
	Lost      int   `json:"lost"`       // buyers that ended on a sold out with nothing pending
	Errors    int   `json:"errors"`     // buyers that ended on an answer no buyer expects
	Retries   int   `json:"retries"`    // sends after a sold out with units pending, or busy
	PaidTwice int   `json:"paid_twice"` // units with more than one paid order
	Left      int64 `json:"left"`       // the stock at the end
	Lucky     int64 `json:"lucky"`      // units taken
	Returned  int64 `json:"returned"`   // units that came back
	// Consistent: stock + lucky - returned = the initial stock, every unit
	// paid exactly once, nothing left.
	Consistent bool    `json:"consistent"`
	DurationMS float64 `json:"duration_ms"`
	Err        string  `json:"error,omitempty"`
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
	r := &reserveRun{cfg: cfg, client: client}
	if _, err := r.send(ctx, http.MethodPost, "/stock/reset", fmt.Sprintf(`{"stock":%d}`, cfg.Stock), Purchase{}, true); err != nil {
		return nil, fmt.Errorf("loadgen: reserve: reset: %w", err)
	}
	start := time.Now()
	rep := &ReserveReport{Stock: cfg.Stock, Buyers: cfg.Buyers}
	var mu sync.Mutex
	paidOrders := []string{}
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
			rep.Refunds += out.refunds
			switch out.end {
			case endPaid:
				rep.Paid++
				paidOrders = append(paidOrders, out.order)
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
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("loadgen: reserve: %w", err)
	}
	units := map[int64]int{}
	for _, id := range paidOrders {
		var o api.Order
		if err := r.get(ctx, "/orders/"+id, &o); err != nil {
			return rep, fmt.Errorf("loadgen: reserve: order %s: %w", id, err)
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
	books := api.Books{Stock: st.Stock, Lucky: st.Lucky, Returned: st.Returned, Initial: int64(cfg.Stock)}
	rep.Consistent = books.Balanced() && rep.PaidTwice == 0 && rep.Paid == cfg.Stock && st.Stock == 0
	return rep, nil
}

// reserveRun is the sale's buyers' shared client.
type reserveRun struct {
	cfg    ReserveConfig
	client *http.Client
}

type reserveEnd int

const (
	endError reserveEnd = iota
	endPaid
	endNeverPay
	endLost
)

// buyerOutcome is how one buyer's sale ended.
type buyerOutcome struct {
	end              reserveEnd
	order            string // the paid order
	retries, refunds int
	err              error
}

// buyer is buyer i's sale: buy until it wins or nothing can come back,
// then pay (unless it never pays).
func (r *reserveRun) buyer(ctx context.Context, i int) (out buyerOutcome) {
	p := Purchase{User: fmt.Sprintf("r%d", i+1)}
	if r.cfg.Minter != nil {
		p.Token = r.cfg.Minter.Token(p.User)
	}
	neverPays := r.cfg.NeverPay > 0 && i%r.cfg.NeverPay == 0
	for {
		a, err := r.send(ctx, http.MethodPost, "/stock/reduce", "", p, false)
		switch {
		case err != nil:
			out.err = err
			return out
		case a.code == http.StatusOK && neverPays:
			out.end = endNeverPay
			return out
		case a.code == http.StatusOK:
			pay, err := r.send(ctx, http.MethodPost, "/orders/"+a.body.Order+"/pay", `{"payment_id":"pay-`+p.User+`"}`, p, false)
			if err != nil || pay.code != http.StatusOK {
				out.err = fmt.Errorf("pay %s: %d %v", a.body.Order, pay.code, err)
				return out
			}
			if pay.end.State == "paid" && !pay.end.Refund {
				out.end, out.order = endPaid, a.body.Order
				return out
			}
			out.refunds++ // too late: owed back; this buyer tries again
		case a.body.Result == api.SoldOut && (a.body.Pending == nil || *a.body.Pending == 0):
			out.end = endLost
			return out
		case a.body.Result == api.SoldOut || a.body.Result == api.Busy:
			out.retries++
			wait := time.Second
			if s, err := strconv.Atoi(a.retryAfter); err == nil && s > 0 {
				wait = time.Duration(s) * time.Second
			}
			select {
			case <-ctx.Done():
				out.err = ctx.Err()
				return out
			case <-time.After(wait): // the service's Retry-After: when a unit may be back
			}
		default:
			out.err = fmt.Errorf("sale: %d %s", a.code, a.body.Result)
			return out
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

// get reads path with the admin token into v.
func (r *reserveRun) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(r.cfg.URL, "/")+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Admin-Token", r.cfg.AdminToken)
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
