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

	"seckill/internal/api"
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

// Reset sets the stock to n and the lucky counter to zero.
func Reset(ctx context.Context, client *http.Client, base, token string, n int) error {
	body, _ := json.Marshal(api.Reset{Stock: int64(n)})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/stock/reset", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("loadgen: reset: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-Token", token)
	return do(client, req, nil)
}

// GetInfo reads GET /info from whichever replica nginx picks.
func GetInfo(ctx context.Context, client *http.Client, base string) (api.Info, error) {
	var info api.Info
	err := get(ctx, client, base+"/info", &info)
	return info, err
}

// GetStock reads GET /stock: units left and units sold ("lucky" buyers).
func GetStock(ctx context.Context, client *http.Client, base string) (api.Stock, error) {
	var s api.Stock
	err := get(ctx, client, base+"/stock", &s)
	return s, err
}

func get(ctx context.Context, client *http.Client, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	return do(client, req, into)
}

// do sends req and decodes a 200 answer into into (when non-nil).
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
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%w: %s: %d %s", ErrBadResponse, what, resp.StatusCode, strings.TrimSpace(string(raw)))
	case into == nil:
		return nil
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadResponse, what, err)
	}
	return nil
}

// Settle reads the receipt of every unconfirmed answer in responses and
// marks the ones that did sell (Response.Settled), so the books can be
// checked against what buyers were told.
func Settle(ctx context.Context, client *http.Client, base string, responses []Response) error {
	for i := range responses {
		r := &responses[i]
		if r.Outcome != OutcomeUnconfirmed || r.Attempt == "" {
			continue
		}
		sold, err := ReceiptSold(ctx, client, base, r.Attempt)
		if err != nil {
			return err
		}
		r.Settled = sold
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

// GetLedger reads GET /ledger: the order ledger at one instant.
func GetLedger(ctx context.Context, client *http.Client, base string) (api.Ledger, error) {
	var l api.Ledger
	err := get(ctx, client, base+"/ledger", &l)
	return l, err
}

// ordersPage is how many orders GetOrders asks for at once (stockd's
// maximum).
const ordersPage = 500

// GetOrders reads every order of user from GET /orders?user=, page by
// page, oldest first. It fails with ErrBadResponse when the pages do not
// add up to the total the server reports.
func GetOrders(ctx context.Context, client *http.Client, base, user string) ([]api.Order, error) {
	var all []api.Order
	for {
		q := url.Values{"user": {user}, "offset": {strconv.Itoa(len(all))}, "limit": {strconv.Itoa(ordersPage)}}
		var page api.Orders
		if err := get(ctx, client, base+"/orders?"+q.Encode(), &page); err != nil {
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
