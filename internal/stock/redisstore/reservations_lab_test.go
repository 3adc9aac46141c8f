//go:build lab

package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"seckill/internal/failpoint"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// returnsKey marks the one sale whose section a test's return lands in:
// failpoints are the process's, and only that sale's context carries it.
type returnsKey struct{}

// returnAt arms stock.FailpointAfterRead to cancel the next of orders,
// one per section read of a sale whose context is marked, and says how
// many it cancelled.
func returnAt(t *testing.T, s *redisstore.Store, orders ...string) func() int {
	t.Helper()
	var mu sync.Mutex
	next := 0
	failpoint.EnableFunc(stock.FailpointAfterRead, func(ctx context.Context) error {
		if ctx.Value(returnsKey{}) == nil {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if next < len(orders) {
			if _, err := s.Cancel(ctx, orders[next]); err != nil {
				t.Errorf("cancel %s: %v", orders[next], err)
			}
			next++
		}
		return nil
	})
	t.Cleanup(func() { failpoint.Disable(stock.FailpointAfterRead) })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return next
	}
}

// A unit returned while a locked section holds the lock, between its read
// and its write, is neither lost (the write would overwrite it) nor a
// failed sale: the write is refused, the section reads again under the
// same lease and sells with the unit back. Returns that keep landing are
// bounded: the section's last refusal answers fenced, nothing sold.
func TestSectionReadsAgainAfterAReturn(t *testing.T) {
	for _, m := range ledgerModes[:3] {
		if m.name == "atomic" {
			continue // one script: a return cannot land inside it
		}
		t.Run(m.name, func(t *testing.T) {
			var readsAgain atomic.Int64
			s, _, svc := reservedSale(t, 4, m, func(c *stock.ServiceConfig) {
				c.OnEvent = func(e stock.Event) {
					if e == stock.EventReadAfterReturn {
						readsAgain.Add(1)
					}
				}
			})
			var orders []string
			for range 3 {
				orders = append(orders, sellOne(t, svc).OrderID)
			}
			ctx := context.WithValue(t.Context(), returnsKey{}, true)

			cancelled := returnAt(t, s, orders[0])
			sale, err := svc.ReduceFor(ctx, stock.Buyer{})
			if err != nil || cancelled() != 1 {
				t.Fatalf("sale with a return after its read: %+v, %v (%d returned); want sold", sale, err, cancelled())
			}
			if sale.StockAfter != 1 {
				t.Fatalf("stock after: %d; want 1 (2 read again, less this sale)", sale.StockAfter)
			}
			wantBooks(t, s, 4, 1, 1)

			cancelled = returnAt(t, s, orders[1], orders[2], sale.OrderID)
			_, err = svc.ReduceFor(ctx, stock.Buyer{})
			var fe *stock.FencedError
			if !errors.As(err, &fe) || !fe.Returned || cancelled() != 3 {
				t.Fatalf("sale with a return after each of its reads: %v (%d returned); want fenced, returned, after 3 reads", err, cancelled())
			}
			wantBooks(t, s, 4, 4, 4)
			// Counted, so that the lab can tell a cell ran the race: once
			// for the first sale, twice for the second (its third refusal
			// answers).
			if n := readsAgain.Load(); n != 3 {
				t.Fatalf("%s counted %d times; want 3", stock.EventReadAfterReturn, n)
			}

			failpoint.Disable(stock.FailpointAfterRead)
			if sale, err := svc.ReduceFor(ctx, stock.Buyer{}); err != nil || sale.StockAfter != 3 {
				t.Fatalf("the next sale: %+v, %v; want sold, 3 left", sale, err)
			}
		})
	}
}
