package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// The reservations' tests move the clock by its high-water mark: it is
// trusted only forward (lifeclock.lua), so setting it ahead is time
// passing for every deadline, with no sleep.
const window = time.Hour

// reservedSale is a sale of n units with a payment window, and a
// service of mode m selling it.
func reservedSale(t *testing.T, n int64, m ledgerMode, edits ...func(*stock.ServiceConfig)) (*redisstore.Store, *redis.Client, *stock.Service) {
	t.Helper()
	s, rdb := ledgerStore(t, n, 1)
	s = s.WithReservations()
	if err := s.Reset(t.Context(), n); err != nil { // a sale of its kind (format 2)
		t.Fatal(err)
	}
	return s, rdb, m.service(s, func(c *stock.ServiceConfig) {
		c.PaymentWindow = window
		for _, e := range edits {
			e(c)
		}
	})
}

// reservationModes are the ledger modes a sale with reservations sells
// in: one segment (a segmented store refuses them,
// TestReservationsNeedOneSegment).
func reservationModes() []ledgerMode {
	var ms []ledgerMode
	for _, m := range ledgerModes {
		if m.segments == 1 {
			ms = append(ms, m)
		}
	}
	return ms
}

// jumpClock moves the reservations' clock to at (unix ms).
func jumpClock(t *testing.T, rdb *redis.Client, at int64) {
	t.Helper()
	k := ledgerKeys(1).Derive(true)
	if err := rdb.Set(t.Context(), k.LifeNow, at, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// wantBooks checks stock + lucky - returned = initial with the given
// stock and returns.
func wantBooks(t *testing.T, s *redisstore.Store, initial, stockLeft, returned int64) {
	t.Helper()
	b, err := s.Books(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Returned(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if b.Returned != r {
		t.Fatalf("Books read %d returned, Returned %d", b.Returned, r)
	}
	if b.Stock != stockLeft || r != returned || b.Stock+b.Lucky-r != initial {
		t.Fatalf("books: stock %d lucky %d returned %d (stock+lucky-returned %d); want stock %d, returned %d, = %d",
			b.Stock, b.Lucky, r, b.Stock+b.Lucky-r, stockLeft, returned, initial)
	}
	// Wherever the books are checked, the orders' states are too.
	c, err := s.Census(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Problems(); len(p) > 0 || c.Initial != initial || c.Returned != returned {
		t.Fatalf("census %+v: %v; want none, initial %d, returned %d", c, p, initial, returned)
	}
}

// The census names each invariant a broken store breaks: a unit returned
// twice, a payment id that paid two orders, a unit taken without an
// order, a state no script writes.
func TestCensusNamesEachBrokenInvariant(t *testing.T) {
	ctx := t.Context()
	s, rdb, svc := reservedSale(t, 4, ledgerModes[0])
	a, b, c := sellOne(t, svc), sellOne(t, svc), sellOne(t, svc)
	if _, err := s.Pay(ctx, a.OrderID, "pay-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, b.OrderID); err != nil {
		t.Fatal(err)
	}
	got, err := s.Census(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := redisstore.Census{Reserved: 1, Paid: 1, Cancelled: 1, Stock: 2, Lucky: 3, Returned: 1, Initial: 4}
	if got.Reserved != want.Reserved || got.Paid != want.Paid || got.Cancelled != want.Cancelled || got.Expired != 0 ||
		got.Stock != want.Stock || got.Lucky != want.Lucky || got.Returned != want.Returned || got.Initial != want.Initial {
		t.Fatalf("census %+v; want %+v", got, want)
	}
	if p := got.Problems(); len(p) > 0 {
		t.Fatalf("a sound sale: %v", p)
	}
	k := ledgerKeys(1).Derive(true)
	breaks := []struct {
		name string
		do   func() error
		want string
	}{
		{"a unit returned twice", func() error { return rdb.Incr(ctx, k.Stock).Err() }, "not the initial"},
		{"a return without an order", func() error { return rdb.Incr(ctx, k.Returned).Err() }, "units returned"},
		{"a payment id naming another order", func() error { return rdb.HSet(ctx, k.Payments, "pay-a", c.OrderID).Err() }, "names another order"},
		{"a unit taken without an order", func() error { return rdb.Incr(ctx, k.Lucky).Err() }, "units taken"},
		{"a state no script writes", func() error { return rdb.HSet(ctx, k.States, c.OrderID, "refunded").Err() }, "no known state"},
	}
	for _, br := range breaks {
		if err := br.do(); err != nil {
			t.Fatal(err)
		}
		got, err := s.Census(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p := strings.Join(got.Problems(), "; "); !strings.Contains(p, br.want) {
			t.Errorf("after %s: problems %q; want one saying %q", br.name, p, br.want)
		}
	}
}

// units reads every order's unit number, and fails on one given twice.
func units(t *testing.T, rdb *redis.Client) map[string]string {
	t.Helper()
	entries, err := rdb.XRange(t.Context(), ordersKey, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	byUnit := map[string]string{}
	for _, e := range entries {
		u, id := fmt.Sprint(e.Values["unit"]), fmt.Sprint(e.Values["id"])
		if other, ok := byUnit[u]; ok {
			t.Fatalf("unit %s sold to orders %s and %s", u, other, id)
		}
		byUnit[u] = id
	}
	return byUnit
}

func sellOne(t *testing.T, svc *stock.Service) stock.Sale {
	t.Helper()
	sale, err := svc.ReduceFor(t.Context(), stock.Buyer{})
	if err != nil {
		t.Fatalf("sale: %v", err)
	}
	return sale
}

// Every way of selling reserves what it sells, and each end of a
// reservation happens once: a payment is idempotent by its id, a cancel
// returns the unit once, the loser of a race learns the state that won,
// and a returned unit sells again under a new unit number.
func TestReservationEnds(t *testing.T) {
	for _, m := range reservationModes() {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			s, rdb, svc := reservedSale(t, 2, m)
			a, b := sellOne(t, svc), sellOne(t, svc)
			for _, sale := range []stock.Sale{a, b} {
				state, payBy, err := s.OrderState(ctx, sale.OrderID)
				if err != nil || state != redisstore.StateReserved || payBy != sale.PayBy || payBy == 0 {
					t.Fatalf("order %s: %q until %d, %v; want reserved until the sale's pay_by %d", sale.OrderID, state, payBy, err, sale.PayBy)
				}
			}
			if _, err := svc.ReduceFor(ctx, stock.Buyer{}); !errors.Is(err, stock.ErrSoldOut) {
				t.Fatalf("third buyer of 2 units: %v, want sold out", err)
			}

			if e, err := s.Pay(ctx, a.OrderID, "pay-1"); err != nil || e != (redisstore.Ending{State: redisstore.StatePaid}) {
				t.Fatalf("pay a: %+v, %v; want paid", e, err)
			}
			if e, err := s.Pay(ctx, a.OrderID, "pay-1"); err != nil || e.State != redisstore.StatePaid || e.Refund {
				t.Fatalf("pay a again, same payment: %+v, %v; want paid, no refund", e, err)
			}
			if _, err := s.Pay(ctx, b.OrderID, "pay-1"); !errors.Is(err, redisstore.ErrPaymentReused) {
				t.Fatalf("pay b with a's payment: %v; want ErrPaymentReused", err)
			}
			if e, err := s.Cancel(ctx, a.OrderID); err != nil || e.State != redisstore.StatePaid {
				t.Fatalf("cancel paid a: %+v, %v; want the state that won, paid", e, err)
			}
			wantBooks(t, s, 2, 0, 0)

			for range 2 { // the second cancel finds it cancelled: no second return
				if e, err := s.Cancel(ctx, b.OrderID); err != nil || e.State != redisstore.StateCancelled {
					t.Fatalf("cancel b: %+v, %v; want cancelled", e, err)
				}
				wantBooks(t, s, 2, 1, 1)
			}
			if e, err := s.Pay(ctx, b.OrderID, "pay-2"); err != nil || e != (redisstore.Ending{State: redisstore.StateCancelled, Refund: true}) {
				t.Fatalf("pay cancelled b: %+v, %v; want cancelled and the payment owed back", e, err)
			}
			if owed, err := rdb.HGet(ctx, ledgerKeys(1).Derive(true).Refunds, "pay-2").Result(); err != nil || owed != b.OrderID+" cancelled" {
				t.Fatalf("refunds[pay-2] = %q, %v; want %q", owed, err, b.OrderID+" cancelled")
			}

			c := sellOne(t, svc) // the returned unit sells again
			wantBooks(t, s, 2, 0, 1)
			if got := units(t, rdb); len(got) != 3 || got["3"] != c.OrderID {
				t.Fatalf("units %v; want 3 units, the resold one numbered 3 for order %s", got, c.OrderID)
			}
			if _, err := s.Cancel(ctx, "no-such-order"); !errors.Is(err, redisstore.ErrNoReservation) {
				t.Fatalf("cancel an unknown order: %v; want ErrNoReservation", err)
			}
		})
	}
}

// A deadline is inclusive and judged by one clock inside the script that
// decides: a payment at pay_by pays, one a millisecond later finds the
// order expired (it expires there, first, and the payment is owed back),
// and the expirer then has nothing left to return.
func TestPaymentAgainstItsDeadline(t *testing.T) {
	ctx := t.Context()
	s, rdb, svc := reservedSale(t, 2, ledgerModes[0])
	a, b := sellOne(t, svc), sellOne(t, svc)
	jumpClock(t, rdb, a.PayBy)
	if e, err := s.Pay(ctx, a.OrderID, "on-time"); err != nil || e.State != redisstore.StatePaid {
		t.Fatalf("pay at pay_by: %+v, %v; want paid", e, err)
	}
	jumpClock(t, rdb, b.PayBy+1)
	if e, err := s.Pay(ctx, b.OrderID, "late"); err != nil || e != (redisstore.Ending{State: redisstore.StateExpired, Refund: true}) {
		t.Fatalf("pay a millisecond late: %+v, %v; want expired, owed back", e, err)
	}
	wantBooks(t, s, 2, 1, 1)
	if x, err := s.ExpireDue(ctx, 10); err != nil || x != (redisstore.Expiry{}) {
		t.Fatalf("expire after the late payment: %+v, %v; want none expired, none left", x, err)
	}
	wantBooks(t, s, 2, 1, 1)
}

// Expirers running at once each expire their own orders: every unit comes
// back exactly once, whatever the batches. A clock stepped back (the
// high-water mark above Redis's TIME) reopens nothing.
func TestConcurrentExpirersReturnEachUnitOnce(t *testing.T) {
	ctx := t.Context()
	const n = 20
	s, rdb, svc := reservedSale(t, n, ledgerModes[1])
	var last stock.Sale
	for range n {
		last = sellOne(t, svc)
	}
	if x, err := s.ExpireDue(ctx, 1); err != nil || x.Expired != 0 || x.Next == 0 || x.Next > last.PayBy || x.Pending != n {
		t.Fatalf("expire before any deadline: %+v, %v; want none expired, the earliest deadline, %d pending", x, err, n)
	}
	wantBooks(t, s, n, 0, 0)
	if p, next, err := s.Pending(ctx); err != nil || p != n || next == 0 || next > last.PayBy {
		t.Fatalf("pending: %d, next %d, %v; want %d, the earliest deadline", p, next, err, n)
	}
	jumpClock(t, rdb, last.PayBy+1) // far ahead of Redis's clock: it stepped back
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := int64(0)
	for range 4 {
		wg.Go(func() {
			for {
				x, err := s.ExpireDue(ctx, 3)
				if err != nil {
					t.Error(err)
					return
				}
				k := x.Expired
				mu.Lock()
				total += k
				mu.Unlock()
				if k == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if total != n {
		t.Fatalf("expirers expired %d orders, want %d", total, n)
	}
	wantBooks(t, s, n, n, n)
	// Sold again now, on the clock that moved forward: new deadlines
	// from it, not from Redis's TIME behind it.
	again := sellOne(t, svc)
	if again.PayBy != last.PayBy+1+window.Milliseconds() {
		t.Fatalf("pay_by after the clock stepped back: %d, want %d (forward-only clock + window)", again.PayBy, last.PayBy+1+window.Milliseconds())
	}
}

// A return landing between a locked sale's read and its write must not be
// overwritten by the write (the stock read less what it sold): the write
// is refused, the unit stays returned, and the next read sees it. A read
// again under the same lease is no token collision.
func TestReturnBetweenLockedReadAndWrite(t *testing.T) {
	ctx := t.Context()
	s, _, svc := reservedSale(t, 2, ledgerModes[0])
	a := sellOne(t, svc) // under the service's lock; stock 1
	seg := s.Segment(0)
	f := stock.Fence{Lock: "test/seckill:lock", Token: 1 << 40, Lease: "slow-holder"}
	r, err := seg.Read(ctx, f, false)
	if err != nil || r.Stock != 1 {
		t.Fatalf("read: %+v, %v; want 1", r, err)
	}
	if e, err := s.Cancel(ctx, a.OrderID); err != nil || e.State != redisstore.StateCancelled {
		t.Fatalf("cancel: %+v, %v", e, err)
	}
	members := []stock.Member{{ID: "m1"}}
	la := stock.LedgerArgs{Replica: "r1", Now: time.Now(), PaymentWindow: window}
	var fe *stock.FencedError
	if _, err := seg.WriteLedger(ctx, f, r.Stock, members, la); !errors.As(err, &fe) || !fe.Returned || !errors.Is(err, stock.ErrFenced) {
		t.Fatalf("write of the read before the return: %v; want ErrFenced, Returned", err)
	}
	wantBooks(t, s, 2, 2, 1)
	r, err = seg.Read(ctx, f, false)
	if err != nil || r.Stock != 2 {
		t.Fatalf("read again under the same lease: %+v, %v; want 2 and no collision", r, err)
	}
	vs, err := seg.WriteLedger(ctx, f, r.Stock, members, la)
	if err != nil || len(vs) != 1 || vs[0].Kind != stock.VerdictSold {
		t.Fatalf("write of the fresh read: %+v, %v; want sold", vs, err)
	}
	wantBooks(t, s, 2, 1, 1)
}

// Returns need one stock key and the ledger: a segmented sale refuses
// them, naming why, rather than returning a unit to the wrong segment.
func TestReservationsNeedOneSegment(t *testing.T) {
	s, _ := ledgerStore(t, 4, 2)
	if _, err := s.Cancel(t.Context(), "any"); !errors.Is(err, redisstore.ErrNoReservations) {
		t.Fatalf("cancel in a segmented sale: %v; want ErrNoReservations", err)
	}
	if _, err := s.ExpireDue(context.Background(), 0); err == nil {
		t.Fatal("expire with a batch of 0: no error")
	}
}

// docs/reservations.md names every state and the refund rule the
// lifecycle answers with.
func TestReservationsDocNamesEveryState(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/reservations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{redisstore.StateReserved, redisstore.StatePaid, redisstore.StateCancelled, redisstore.StateExpired,
		"refund owed", "ErrPaymentReused", "ErrNoReservations", "stock + lucky - returned = initial", "!return",
		"orders_ends", "<orders>:ended", "UNIQUE (payment_id)"} {
		if !strings.Contains(string(doc), "`"+s+"`") && !strings.Contains(string(doc), s) {
			t.Errorf("docs/reservations.md does not name %q", s)
		}
	}
}

// A cancel does not give the buyer's per-user slot back: with a limit of
// one, a buyer cannot reserve, cancel and reserve again to catch units as
// they come back (the bot loop). The unit itself goes back to everyone.
func TestCancelKeepsThePerUserSlot(t *testing.T) {
	ctx := t.Context()
	s, _ := ledgerStore(t, 2, 1)
	s = s.WithReservations()
	if err := s.Reset(ctx, 2); err != nil {
		t.Fatal(err)
	}
	svc := ledgerModes[0].service(s, func(c *stock.ServiceConfig) { c.PaymentWindow, c.PerUserLimit = window, 1 })
	bot := stock.Buyer{User: "bot"}
	sale, err := svc.ReduceFor(ctx, bot)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := s.Cancel(ctx, sale.OrderID); err != nil || e.State != redisstore.StateCancelled {
		t.Fatalf("cancel: %+v, %v", e, err)
	}
	if _, err := svc.ReduceFor(ctx, bot); !errors.Is(err, stock.ErrLimitReached) {
		t.Fatalf("the bot again after its cancel: %v; want ErrLimitReached", err)
	}
	if _, err := svc.ReduceFor(ctx, stock.Buyer{User: "alice"}); err != nil {
		t.Fatalf("another buyer takes a unit: %v", err)
	}
	wantBooks(t, s, 2, 1, 1)
}
