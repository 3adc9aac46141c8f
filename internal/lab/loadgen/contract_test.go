package loadgen_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"seckill/internal/api"
	"seckill/internal/auth"
	"seckill/internal/handler"
	"seckill/internal/lab/loadgen"
	"seckill/internal/stock"
)

type sellerFunc func(context.Context) (stock.Sale, error)

func (f sellerFunc) ReduceFor(ctx context.Context, _ stock.Buyer) (stock.Sale, error) { return f(ctx) }

// saleErrors makes stockd's handler answer each result; a result added to
// package api must be added here, and to the outcome the load tool gives it.
var saleErrors = map[api.Result]error{
	api.Sold:          nil,
	api.SoldOut:       stock.ErrSoldOut,
	api.Fenced:        stock.ErrFenced,
	api.Busy:          stock.ErrBusy,
	api.LockLost:      stock.ErrLockLost,
	api.MixedBackends: stock.ErrMixedBackends,
	api.Unconfirmed:   &stock.UnconfirmedError{Attempt: "a-1", Err: stock.ErrUnavailable},
	api.Error:         errors.New("a bug"),
	api.LimitReached:  stock.ErrLimitReached,
	api.StoreLost:     fmt.Errorf("stock: atomic sell: %w", stock.ErrStoreLost),
	api.NotStarted:    &stock.WindowError{StartsAt: 1, Err: stock.ErrNotStarted},
	api.Ended:         &stock.WindowError{EndsAt: 1, Err: stock.ErrEnded},
	api.ClockSkew:     &stock.ClockSkewError{Skew: time.Minute},
}

// Every result the real handler answers reaches the load tool as the
// outcome it means, with the replica and attempt it carries: the server and
// this client cannot drift apart on a status, a label or a field name.
func TestHandlerResultsRoundTrip(t *testing.T) {
	want := map[api.Result]loadgen.Outcome{
		api.Sold:          loadgen.OutcomeSold,
		api.SoldOut:       loadgen.OutcomeSoldOut,
		api.Fenced:        loadgen.OutcomeFenced,
		api.Busy:          loadgen.OutcomeBusy,
		api.LockLost:      loadgen.OutcomeLockLost,
		api.MixedBackends: loadgen.OutcomeError,
		api.Unconfirmed:   loadgen.OutcomeUnconfirmed,
		api.Error:         loadgen.OutcomeError,
		api.LimitReached:  loadgen.OutcomeLimitReached,
		// A sale that must stop: an error to the books, never a sale.
		api.StoreLost: loadgen.OutcomeError,
		// An item's sale outside its window (Config.Item): counted
		// apart, and held to the window by Report.Window.
		api.NotStarted: loadgen.OutcomeNotStarted,
		api.Ended:      loadgen.OutcomeEnded,
		// Refused at a window's edge while the clocks disagree: nothing
		// sold, and not the buyer's doing; an error to the books.
		api.ClockSkew: loadgen.OutcomeError,
	}
	unavailable := fmt.Errorf("%w: dial tcp: refused", stock.ErrUnavailable) // error, 503 this time
	for _, result := range append(slices.Clone(api.Results), "error/503") {
		t.Run(string(result), func(t *testing.T) {
			err, ok := saleErrors[result]
			if result == "error/503" {
				result, err, ok = api.Error, unavailable, true
			}
			outcome, known := want[result]
			if !ok || !known {
				t.Fatalf("result %q has no error that makes the handler answer it, or no expected outcome: add it to this test", result)
			}
			h := handler.New(handler.Config{Replica: "r-1", AdminToken: "t"}, handler.Deps{
				Seller: sellerFunc(func(context.Context) (stock.Sale, error) {
					return stock.Sale{StockAfter: 4, Token: 9, Attempt: "a-1"}, err
				}),
			})
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			got := loadgen.Fire(t.Context(), loadgen.NewClient(1, 5*time.Second), srv.URL+"/stock/reduce", 1, 1)
			if len(got) != 1 {
				t.Fatalf("got %d responses, want 1", len(got))
			}
			r := got[0]
			if r.Outcome != outcome || r.Replica != "r-1" {
				t.Fatalf("got outcome %v replica %q (status %d, err %v), want outcome %v replica r-1", r.Outcome, r.Replica, r.Status, r.Err, outcome)
			}
			if wantAttempt := result == api.Sold || result == api.Unconfirmed; (r.Attempt == "a-1") != wantAttempt {
				t.Fatalf("got attempt %q, want it carried: %v", r.Attempt, wantAttempt)
			}
		})
	}
}

type buyerSeller struct {
	mu     sync.Mutex
	buyers []stock.Buyer
}

// ReduceFor sells the first send of a key and replays every later one.
func (s *buyerSeller) ReduceFor(_ context.Context, b stock.Buyer) (stock.Sale, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buyers = append(s.buyers, b)
	return stock.Sale{StockAfter: 4, Attempt: "a-1", OrderID: "o-1", Replayed: len(s.buyers) > 1}, nil
}

// The buyer and key the load tool sends (the buyer as a token it signs)
// reach the real handler's Seller as the stock.Buyer they mean, and a sold
// answer's order id and replay flag come back as the load tool's Order and
// OutcomeReplayed.
func TestHandlerBuyersRoundTrip(t *testing.T) {
	seller := &buyerSeller{}
	secret := []byte("0123456789abcdef0123456789abcdef")
	v, err := auth.NewVerifier(auth.JWT{Secret: secret, Issuer: "seckill", Audience: "seckill"})
	if err != nil {
		t.Fatal(err)
	}
	h := handler.New(handler.Config{Replica: "r-1", AdminToken: "t", Ledger: true,
		Buyers: &auth.Identity{Mode: auth.ModeJWT, Verifier: v}}, handler.Deps{Seller: seller})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	p := []loadgen.Purchase{{User: "u7", Key: "run-0", Retry: loadgen.RetryAfter}}
	loadgen.Sign(p, auth.NewMinter(secret, "seckill", "seckill", time.Minute))
	got := loadgen.FireBuyers(t.Context(), loadgen.NewClient(1, 5*time.Second), srv.URL+"/stock/reduce", p, 1, time.Second)
	want := []stock.Buyer{{User: "u7", Key: "run-0"}, {User: "u7", Key: "run-0"}}
	if !slices.Equal(seller.buyers, want) {
		t.Fatalf("the seller got buyers %+v, want %+v", seller.buyers, want)
	}
	if len(got) != 2 {
		t.Fatalf("got %d responses, want 2", len(got))
	}
	slices.SortFunc(got, func(a, b loadgen.Response) int { return a.Sent.Compare(b.Sent) })
	for i, outcome := range []loadgen.Outcome{loadgen.OutcomeSold, loadgen.OutcomeReplayed} {
		r := got[i]
		if r.Outcome != outcome || r.Order != "o-1" || r.User != "u7" || r.Key != "run-0" || r.Resend != (i == 1) {
			t.Fatalf("send %d: got %+v, want outcome %v, order o-1, user u7, key run-0", i, r, outcome)
		}
	}
}
