package lab

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"seckill/internal/api"
	"seckill/internal/handler"
	"seckill/internal/stock"
)

type sellerFunc func(context.Context) (stock.Sale, error)

func (f sellerFunc) ReduceFor(ctx context.Context, _ stock.Buyer) (stock.Sale, error) { return f(ctx) }

// Every result the real handler answers is read back by the lab's buyers
// with its label, replica and attempt, and counted in the right column of
// the books.
func TestHandlerResultsReachTheBooks(t *testing.T) {
	cases := map[api.Result]struct {
		err  error
		book func(Result) int
	}{
		api.Sold: {nil, func(r Result) int { return r.Sold }},
		// sold_out is counted in no column.
		api.SoldOut:       {stock.ErrSoldOut, func(r Result) int { return 1 - r.Sold - r.Fenced - r.LockLost - r.Busy - r.Unconfirmed - r.Errors }},
		api.Fenced:        {stock.ErrFenced, func(r Result) int { return r.Fenced }},
		api.Busy:          {stock.ErrBusy, func(r Result) int { return r.Busy }},
		api.LockLost:      {stock.ErrLockLost, func(r Result) int { return r.LockLost }},
		api.MixedBackends: {stock.ErrMixedBackends, func(r Result) int { return r.Errors }},
		api.Unconfirmed:   {&stock.UnconfirmedError{Attempt: "a-1", Err: stock.ErrUnavailable}, func(r Result) int { return r.Unconfirmed }},
		api.Error:         {errors.New("a bug"), func(r Result) int { return r.Errors }},
		// The lab's buyers are anonymous and send no key: either answer
		// would be a server's mistake, so an error.
		api.LimitReached: {stock.ErrLimitReached, func(r Result) int { return r.Errors }},
		api.StoreLost:    {stock.ErrStoreLost, func(r Result) int { return r.Errors }},
		// Only an item's sale has a window; the lab sells the default one.
		api.NotStarted: {&stock.WindowError{StartsAt: 1, Err: stock.ErrNotStarted}, func(r Result) int { return r.Errors }},
		api.Ended:      {&stock.WindowError{EndsAt: 1, Err: stock.ErrEnded}, func(r Result) int { return r.Errors }},
		api.ClockSkew:  {&stock.ClockSkewError{Skew: 1}, func(r Result) int { return r.Errors }},
	}
	for _, result := range api.Results {
		t.Run(string(result), func(t *testing.T) {
			tc, ok := cases[result]
			if !ok {
				t.Fatalf("result %q has no case: add the error that makes the handler answer it and the column that counts it", result)
			}
			h := handler.New(handler.Config{Replica: "r-1", AdminToken: "t"}, handler.Deps{
				Seller: sellerFunc(func(context.Context) (stock.Sale, error) {
					return stock.Sale{StockAfter: 4, Token: 9, Attempt: "a-1"}, tc.err
				}),
			})
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			l := &load{client: &http.Client{}}
			a := l.do(t.Context(), srv.URL+"/stock/reduce")
			if a.Result != result || a.Replica != "r-1" || !result.Matches(a.Status) {
				t.Fatalf("got %+v, want result %q from r-1 with its status", a, result)
			}
			if wantAttempt := result == api.Sold || result == api.Unconfirmed; (a.Attempt == "a-1") != wantAttempt {
				t.Fatalf("got attempt %q, want it carried: %v", a.Attempt, wantAttempt)
			}
			var books Result
			books.tally(a)
			if got := tc.book(books); got != 1 {
				t.Fatalf("got books %+v, want the answer counted once in its column", books)
			}
		})
	}
}
