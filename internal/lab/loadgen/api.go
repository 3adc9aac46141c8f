package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"seckill/internal/api"
	"seckill/internal/backoff"
)

// Sentinel errors of the admin and read calls; returned errors wrap them.
var (
	// ErrUnauthorized: POST /stock/reset answered 401 (wrong admin token).
	ErrUnauthorized = errors.New("loadgen: unauthorized (admin token)")
	// ErrBadResponse: an unexpected status or an unparseable body.
	ErrBadResponse = errors.New("loadgen: bad response")
	// ErrUnreachable: the cluster could not be reached at all.
	ErrUnreachable = errors.New("loadgen: cluster unreachable")
)

// Reset sets the stock to n and the lucky counter to zero. A 503 is sent
// again, up to resetSends in all: with stock.min_replica_acks it is the
// answer "reset again" (the replicas did not acknowledge the reset in
// time), and a reset writes the same values each time, so a second one is
// safe.
func Reset(ctx context.Context, client *http.Client, base, token string, n int) error {
	body, _ := json.Marshal(api.Reset{Stock: int64(n)})
	return postAdmin(ctx, client, base+"/stock/reset", token, body, nil)
}

// ResetItem starts item it.ID's sale with it's settings: POST /items
// creates it, and when it exists already (409) POST /items/:id/reset
// starts it over (a new epoch, lucky 0, the new window). A 503 is sent
// again as Reset's is. It returns the item as the server then holds it
// (its window, and its clock's "now").
func ResetItem(ctx context.Context, client *http.Client, base, token string, it api.ItemSettings) (api.Item, error) {
	var out api.Item
	body, _ := json.Marshal(it)
	err := postAdmin(ctx, client, base+"/items", token, body, &out)
	var se *statusError
	if !errors.As(err, &se) || se.status != http.StatusConflict {
		return out, err
	}
	id := it.ID
	it.ID = "" // the path names it
	body, _ = json.Marshal(it)
	err = postAdmin(ctx, client, itemURL(base, id)+"/reset", token, body, &out)
	return out, err
}

// GetItem reads GET /items/:id: the item's stock, lucky and window, by
// the stock Redis's clock.
func GetItem(ctx context.Context, client *http.Client, base, id string) (api.Item, error) {
	var it api.Item
	err := get(ctx, client, itemURL(base, id), &it)
	return it, err
}

// itemURL is item id's path under base.
func itemURL(base, id string) string { return base + "/items/" + url.PathEscape(id) }

// postAdmin sends an admin write (a reset) with body, sending it again on
// a 503 (resetSends in all, resetPause doubled between them), and decodes
// the answer into into when non-nil.
func postAdmin(ctx context.Context, client *http.Client, target, token string, body []byte, into any) error {
	return sendAgainOn(ctx, http.StatusServiceUnavailable, resetSends, resetPause, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("loadgen: reset: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Admin-Token", token)
		return do(client, req, into)
	})
}

// sendAgainOn runs send, one request, up to sends times while it fails
// with an answer of status, pausing first between them, doubled after
// each pause up to 8 × first, and returns its last error.
func sendAgainOn(ctx context.Context, status, sends int, first time.Duration, send func() error) error {
	pause := backoff.Backoff{Initial: first, Max: 8 * first}
	for sent := 1; ; sent++ {
		err := send()
		var se *statusError
		if err == nil || sent >= sends || !errors.As(err, &se) || se.status != status {
			return err
		}
		if pause.Wait(ctx) != nil {
			return err
		}
	}
}

// resetSends bounds Reset's sends; resetPause is the pause after the first
// 503, doubled after each one up to 2 s (250 ms, 500 ms, 1 s, 2 s, 2 s, 2 s:
// under 8 s in all). A replica that is still catching up after a restart
// (a full resync on a loaded machine) took longer than the first 2 s: a
// compose row's reset was answered 503 four times.
var (
	resetSends = 7
	resetPause = 250 * time.Millisecond
)

// GetInfo reads GET /info from whichever replica nginx picks.
func GetInfo(ctx context.Context, client *http.Client, base string) (api.Info, error) {
	var info api.Info
	err := get(ctx, client, base+"/info", &info)
	return info, err
}

// ErrStoreLost is GET /stock's 503 store_lost: the sale is not in the
// stock Redis (lost, or never reset), so it has no books to read.
var ErrStoreLost = errors.New("loadgen: the sale is not in the stock Redis (store_lost)")

// GetStock reads GET /stock: units left and units sold ("lucky" buyers);
// ErrStoreLost when the sale is gone.
func GetStock(ctx context.Context, client *http.Client, base string) (api.Stock, error) {
	var s api.Stock
	err := get(ctx, client, base+"/stock", &s)
	var se *statusError
	if errors.As(err, &se) && se.status == http.StatusServiceUnavailable {
		var body api.Sale
		if json.Unmarshal([]byte(se.body), &body) == nil && body.Result == api.StoreLost {
			return s, fmt.Errorf("%w: %v", ErrStoreLost, err)
		}
	}
	return s, err
}

func get(ctx context.Context, client *http.Client, url string, into any) error {
	return getAs(ctx, client, url, "", into)
}

// getAs is get with the admin token (when not empty): the ledger and
// other buyers' orders are the operator's to read.
//
// A 502 is read again (getSends in all): stockd never answers one, so it
// is nginx's own, no replica reached. nginx marks a replica down for 10 s
// on a failed try (a 503 of a read counts, as it retries reads on 503), and
// answers 502 once every replica is marked; it then marks them all live
// again, so the next read gets through. A read changes nothing: sending it
// again is safe where a sale's is not.
func getAs(ctx context.Context, client *http.Client, url, adminToken string, into any) error {
	return sendAgainOn(ctx, http.StatusBadGateway, getSends, getPause, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("loadgen: %w", err)
		}
		if adminToken != "" {
			req.Header.Set("X-Admin-Token", adminToken)
		}
		return do(client, req, into)
	})
}

// getSends bounds a read's sends on 502; getPause is the pause after the
// first, doubled after each (100, 200, 400 ms).
var (
	getSends = 4
	getPause = 100 * time.Millisecond
)

// do sends req and decodes a 200 answer (201: POST /items) into into
// (when non-nil).
func do(client *http.Client, req *http.Request, into any) error {
	what := req.Method + " " + req.URL.Path
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, what, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, what, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%w: %s", ErrUnauthorized, what)
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated:
		return &statusError{what: what, status: resp.StatusCode, body: strings.TrimSpace(string(raw))}
	case into == nil:
		return nil
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadResponse, what, err)
	}
	return nil
}

// statusError is an answer with a status other than 200 (and 401): an
// ErrBadResponse whose status a caller may act on.
type statusError struct {
	what   string
	status int
	body   string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%v: %s: %d %s", ErrBadResponse, e.what, e.status, e.body)
}

func (e *statusError) Unwrap() error { return ErrBadResponse }

// Settle reads the receipt of every unconfirmed answer in responses and
// marks the ones that did sell (Response.Settled), so the books can be
// checked against what buyers were told.
func Settle(ctx context.Context, client *http.Client, base string, responses []Response) error {
	return settle(ctx, client, base+"/stock/receipts/", responses)
}

// settle is Settle with the receipts under receipts (the default sale's,
// or an item's "/items/:id/receipts/").
func settle(ctx context.Context, client *http.Client, receipts string, responses []Response) error {
	for i := range responses {
		r := &responses[i]
		if r.Outcome != OutcomeUnconfirmed || r.Attempt == "" {
			continue
		}
		var rb api.Receipt
		if err := get(ctx, client, receipts+url.PathEscape(r.Attempt), &rb); err != nil {
			return err
		}
		r.Settled = rb.Sold
	}
	return nil
}

// ReceiptSold reads GET /stock/receipts/:attempt: whether that sale attempt
// took effect.
func ReceiptSold(ctx context.Context, client *http.Client, base, attempt string) (bool, error) {
	var rb api.Receipt
	err := get(ctx, client, base+"/stock/receipts/"+url.PathEscape(attempt), &rb)
	return rb.Sold, err
}

// GetLedger reads GET /ledger, as the admin: the order ledger at one
// instant.
func GetLedger(ctx context.Context, client *http.Client, base, adminToken string) (api.Ledger, error) {
	var l api.Ledger
	err := getAs(ctx, client, base+"/ledger", adminToken, &l)
	return l, err
}

// ordersPage is how many orders GetOrders asks for at once (stockd's
// maximum).
const ordersPage = 500

// GetOrders reads every order of user from GET /orders?user=, as the
// admin, page by page, oldest first. It fails with ErrBadResponse when the
// pages do not add up to the total the server reports.
func GetOrders(ctx context.Context, client *http.Client, base, adminToken, user string) ([]api.Order, error) {
	var all []api.Order
	for {
		q := url.Values{"user": {user}, "offset": {strconv.Itoa(len(all))}, "limit": {strconv.Itoa(ordersPage)}}
		var page api.Orders
		if err := getAs(ctx, client, base+"/orders?"+q.Encode(), adminToken, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Orders...)
		switch {
		case int64(len(all)) == page.Total:
			return all, nil
		case len(page.Orders) == 0 || int64(len(all)) > page.Total:
			return nil, fmt.Errorf("%w: GET /orders?user=%s: %d orders read, total %d", ErrBadResponse, user, len(all), page.Total)
		}
	}
}
