package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locallock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
	"seckill/internal/testwait"
)

const ordersKey = "seckill:orders"

func ledgerKeys(segments int) redisstore.Keys {
	return redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Initial: "stock:initial",
		Segments: segments, Orders: ordersKey}
}

// ledgerStore is a Store with the ledger on, on a fresh real redis-server,
// reset to n over segments.
func ledgerStore(t *testing.T, n int64, segments int) (*redisstore.Store, *redis.Client) {
	t.Helper()
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.NewStore(rdb, ledgerKeys(segments))
	if err := s.Reset(t.Context(), n); err != nil {
		t.Fatalf("reset: %v", err)
	}
	return s, rdb
}

// ledgerMode is one way of selling with the ledger on.
type ledgerMode struct {
	name     string
	segments int
	cfg      func(*stock.ServiceConfig)
}

var ledgerModes = []ledgerMode{
	{"locked", 1, func(c *stock.ServiceConfig) { c.Fencing = true }},
	{"atomic", 1, func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }},
	{"combine", 1, func(c *stock.ServiceConfig) { c.Fencing, c.Combine = true, true }},
	{"segments", 4, func(c *stock.ServiceConfig) { c.Fencing = true }},
	{"segments+combine", 4, func(c *stock.ServiceConfig) { c.Fencing, c.Combine = true, true }},
}

func (m ledgerMode) service(s *redisstore.Store, mut func(*stock.ServiceConfig)) *stock.Service {
	return newService(s, locallock.New(), func(c *stock.ServiceConfig) {
		c.Replica = "r1"
		m.cfg(c)
		if mut != nil {
			mut(c)
		}
	})
}

// answer is one ReduceFor's outcome.
type answer struct {
	buyer stock.Buyer
	sale  stock.Sale
	err   error
}

// buyAll runs one concurrent ReduceFor per buyer, all released at once.
func buyAll(t *testing.T, svc *stock.Service, buyers []stock.Buyer) []answer {
	t.Helper()
	out := make([]answer, len(buyers))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, b := range buyers {
		wg.Go(func() {
			<-start
			out[i].buyer = b
			out[i].sale, out[i].err = svc.ReduceFor(t.Context(), b)
		})
	}
	close(start)
	wg.Wait()
	return out
}

func wantLedger(t *testing.T, s *redisstore.Store, orders, buyers, lucky int64) stock.LedgerStats {
	t.Helper()
	st, err := s.LedgerStats(t.Context())
	if err != nil {
		t.Fatalf("ledger stats: %v", err)
	}
	if st.Orders != orders || st.Buyers != buyers || st.Lucky != lucky || st.Sale == "" {
		t.Fatalf("got ledger %+v, want orders %d buyers %d lucky %d and a sale id", st, orders, buyers, lucky)
	}
	return st
}

// One buyer sending 50 concurrent sales gets exactly the limit, whichever
// way the units are sold: the count is checked by the script that sells.
func TestPerUserLimit(t *testing.T) {
	for _, m := range ledgerModes {
		for _, limit := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/limit %d", m.name, limit), func(t *testing.T) {
				s, _ := ledgerStore(t, 100, m.segments)
				svc := m.service(s, func(c *stock.ServiceConfig) { c.PerUserLimit = limit })
				buyers := make([]stock.Buyer, 50)
				for i := range buyers {
					buyers[i] = stock.Buyer{User: "alice"}
				}
				var sold, limited int
				for _, a := range buyAll(t, svc, buyers) {
					switch {
					case a.err == nil && !a.sale.Replayed && a.sale.OrderID != "":
						sold++
					case errors.Is(a.err, stock.ErrLimitReached):
						limited++
					default:
						t.Errorf("got %+v, %v; want a sale with an order or ErrLimitReached", a.sale, a.err)
					}
				}
				if sold != limit || limited != 50-limit {
					t.Fatalf("got %d sold and %d limited, want %d and %d", sold, limited, limit, 50-limit)
				}
				wantLedger(t, s, int64(limit), 1, int64(limit))
				storetest.WantStatus(t, s, stock.Status{Stock: int64(100 - limit), Lucky: int64(limit)})
				orders, total, err := s.OrdersByUser(t.Context(), "alice", 0, 0)
				if err != nil || total != int64(limit) || len(orders) != limit {
					t.Fatalf("alice's orders: got %d of %d, %v; want %d", len(orders), total, err, limit)
				}
			})
		}
	}
}

// The same Idempotency-Key sent 20 times at once sells one unit: every
// answer carries the one order id, and all but one say they are replays —
// also when the replays race the original across segments or in one batch.
func TestIdempotencyKeyConcurrent(t *testing.T) {
	for _, m := range ledgerModes {
		t.Run(m.name, func(t *testing.T) {
			s, _ := ledgerStore(t, 100, m.segments)
			svc := m.service(s, nil)
			buyers := make([]stock.Buyer, 20)
			for i := range buyers {
				buyers[i] = stock.Buyer{User: "bob", Key: "k-1"}
			}
			orders := map[string]int{}
			replayed := 0
			var after int64 = -1
			for _, a := range buyAll(t, svc, buyers) {
				if a.err != nil {
					t.Fatalf("got %v, want a sale or its replay", a.err)
				}
				orders[a.sale.OrderID]++
				if a.sale.Replayed {
					replayed++
				}
				if after >= 0 && a.sale.StockAfter != after {
					t.Errorf("got stock after %d, want every answer to carry the original's %d", a.sale.StockAfter, after)
				}
				after = a.sale.StockAfter
			}
			if len(orders) != 1 || replayed != 19 {
				t.Fatalf("got order ids %v and %d replays, want one id and 19 replays", orders, replayed)
			}
			wantLedger(t, s, 1, 1, 1)
			for id := range orders {
				o, err := s.Order(t.Context(), id)
				if err != nil || o.Key != "k-1" || o.User != "bob" || o.StockAfter != after {
					t.Fatalf("order %s: got %+v, %v; want bob's with key k-1 and stock after %d", id, o, err, after)
				}
			}
		})
	}
}

// A key is its buyer's own: the same key from another buyer, or from an
// anonymous one, is a purchase of its own, and the first buyer's retry
// still replays the first sale.
func TestKeyScopedPerBuyer(t *testing.T) {
	for _, m := range ledgerModes {
		t.Run(m.name, func(t *testing.T) {
			s, _ := ledgerStore(t, 10, m.segments)
			svc := m.service(s, nil)
			first, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "carol", Key: "shared"})
			if err != nil {
				t.Fatal(err)
			}
			dave, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "dave", Key: "shared"})
			if err != nil || dave.Replayed || dave.OrderID == first.OrderID {
				t.Fatalf("dave's sale with carol's key: got %+v, %v; want a sale of his own", dave, err)
			}
			anon, err := svc.ReduceFor(t.Context(), stock.Buyer{Key: "shared"})
			if err != nil || anon.Replayed || anon.OrderID == first.OrderID || anon.OrderID == dave.OrderID {
				t.Fatalf("an anonymous sale with carol's key: got %+v, %v; want a sale of its own", anon, err)
			}
			// A user and key that run together must not meet another pair.
			if odd, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "car", Key: "ol:shared"}); err != nil || odd.Replayed {
				t.Fatalf("user car with key ol:shared: got %+v, %v; want a sale of its own", odd, err)
			}
			again, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "carol", Key: "shared"})
			if err != nil || !again.Replayed || again.OrderID != first.OrderID {
				t.Fatalf("carol's retry: got %+v, %v; want a replay of %s", again, err, first.OrderID)
			}
			wantLedger(t, s, 4, 3, 4)
		})
	}
}

// A replay still answers once the stock is gone; a new key then is sold
// out, and a limited buyer past the stock is told sold out first.
func TestReplayAfterSoldOut(t *testing.T) {
	for _, m := range ledgerModes {
		t.Run(m.name, func(t *testing.T) {
			s, _ := ledgerStore(t, 1, m.segments)
			svc := m.service(s, func(c *stock.ServiceConfig) { c.PerUserLimit = 1 })
			first, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "erin", Key: "k"})
			if err != nil {
				t.Fatal(err)
			}
			again, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "erin", Key: "k"})
			if err != nil || !again.Replayed || again.OrderID != first.OrderID || again.StockAfter != 0 {
				t.Fatalf("replay after the last unit: got %+v, %v; want a replay of %s", again, err, first.OrderID)
			}
			if _, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "erin", Key: "k2"}); !errors.Is(err, stock.ErrSoldOut) {
				t.Fatalf("a new key once sold out: got %v, want ErrSoldOut", err)
			}
			wantLedger(t, s, 1, 1, 1)
		})
	}
}

// After a mixed run — named and anonymous buyers, keys sent twice, a
// limit, more buyers than stock — every unit sold has exactly one order
// and every order a unit: stream length == lucky == fresh sales, stock +
// lucky == initial, and no buyer is over the limit.
func TestLedgerMatchesSalesMixedRun(t *testing.T) {
	const initial, limit = 40, 2
	for _, m := range ledgerModes {
		t.Run(m.name, func(t *testing.T) {
			s, rdb := ledgerStore(t, initial, m.segments)
			svc := m.service(s, func(c *stock.ServiceConfig) { c.PerUserLimit = limit })
			var buyers []stock.Buyer
			for i := range 90 {
				b := stock.Buyer{}
				if i%3 != 0 {
					b.User = "u" + strconv.Itoa(i%15)
				}
				if i%2 == 0 {
					b.Key = "key-" + strconv.Itoa(i)
					buyers = append(buyers, b) // the same request twice
				}
				buyers = append(buyers, b)
			}
			fresh := 0
			ids := map[string]bool{}
			for _, a := range buyAll(t, svc, buyers) {
				switch {
				case a.err == nil && !a.sale.Replayed:
					fresh++
					if ids[a.sale.OrderID] {
						t.Errorf("order id %s answered twice as a fresh sale", a.sale.OrderID)
					}
					ids[a.sale.OrderID] = true
				case a.err == nil:
				case errors.Is(a.err, stock.ErrSoldOut), errors.Is(a.err, stock.ErrLimitReached):
				default:
					t.Errorf("buyer %+v: %v", a.buyer, a.err)
				}
			}
			st, err := s.LedgerStats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if st.Orders != st.Lucky || st.Lucky != int64(fresh) {
				t.Fatalf("got orders %d lucky %d fresh sales %d, want all equal", st.Orders, st.Lucky, fresh)
			}
			status, err := s.Status(t.Context())
			if err != nil || status.Stock+status.Lucky != initial || status.Stock < 0 {
				t.Fatalf("got status %+v, %v; want stock + lucky == %d", status, err, initial)
			}
			counts, err := rdb.HGetAll(t.Context(), ordersKey+":buyers").Result()
			if err != nil {
				t.Fatal(err)
			}
			for u, c := range counts {
				if n, _ := strconv.Atoi(c); n > limit {
					t.Errorf("buyer %s bought %d, over the limit %d", u, n, limit)
				}
			}
			for id := range ids {
				if _, err := s.Order(t.Context(), id); err != nil {
					t.Errorf("order %s of a fresh sale: %v", id, err)
				}
			}
		})
	}
}

// Order, OrdersByUser and LedgerStats read what the sales wrote: each
// order's fields, a user's orders oldest first with paging and a total.
func TestOrderReading(t *testing.T) {
	s, _ := ledgerStore(t, 10, 1)
	svc := ledgerModes[0].service(s, func(c *stock.ServiceConfig) { c.Replica = "r7" })
	before := time.Now().Add(-time.Second)
	var sales []stock.Sale
	for i := range 4 {
		sale, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "frank", Key: "f" + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		sales = append(sales, sale)
	}
	if _, err := svc.Reduce(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := wantLedger(t, s, 5, 1, 5)
	o, err := s.Order(t.Context(), sales[1].OrderID)
	if err != nil {
		t.Fatal(err)
	}
	want := stock.Order{ID: sales[1].Attempt, Sale: st.Sale, User: "frank", Key: "f1", Token: sales[1].Token,
		Replica: "r7", StockAfter: 8, Unit: 2, Time: o.Time, Entry: o.Entry}
	if o != want || o.Entry == "" || o.Time.Before(before) || o.Time.After(time.Now()) {
		t.Fatalf("got order %+v, want %+v with an entry id and a time of now", o, want)
	}
	if _, err := s.Order(t.Context(), "no-such-order"); !errors.Is(err, stock.ErrNoOrder) {
		t.Fatalf("unknown order: got %v, want ErrNoOrder", err)
	}
	page, total, err := s.OrdersByUser(t.Context(), "frank", 1, 2)
	if err != nil || total != 4 || len(page) != 2 || page[0].ID != sales[1].OrderID || page[1].ID != sales[2].OrderID {
		t.Fatalf("frank's orders from 1, 2 of them: got %+v of %d, %v; want orders 1 and 2 of 4", page, total, err)
	}
	// A user whose name is another's prefix sees only their own.
	if _, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "fran"}); err != nil {
		t.Fatal(err)
	}
	if page, total, err := s.OrdersByUser(t.Context(), "fran", 0, 0); err != nil || total != 1 || len(page) != 1 || page[0].User != "fran" {
		t.Fatalf("fran's orders: got %+v of %d, %v; want her one", page, total, err)
	}
	if page, total, err := s.OrdersByUser(t.Context(), "nobody", 0, 10); err != nil || total != 0 || len(page) != 0 {
		t.Fatalf("nobody's orders: got %+v of %d, %v; want none", page, total, err)
	}
}

// Reset starts a new sale: a new id, and no orders, buyers, counts or
// idempotency records of the old one — a key of the old sale sells again.
func TestResetClearsTheLedger(t *testing.T) {
	s, rdb := ledgerStore(t, 5, 2)
	svc := ledgerModes[0].service(s, func(c *stock.ServiceConfig) { c.PerUserLimit = 1 })
	first, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "gina", Key: "g"})
	if err != nil {
		t.Fatal(err)
	}
	old := wantLedger(t, s, 1, 1, 1)
	if err := s.Reset(t.Context(), 5); err != nil {
		t.Fatal(err)
	}
	st := wantLedger(t, s, 0, 0, 0)
	if st.Sale == old.Sale {
		t.Fatalf("got sale id %q after a reset, want a new one", st.Sale)
	}
	if n, err := rdb.Keys(t.Context(), ordersKey+":idem:*").Result(); err != nil || len(n) != 0 {
		t.Fatalf("idempotency records after reset: %v, %v; want none", n, err)
	}
	if _, err := s.Order(t.Context(), first.OrderID); !errors.Is(err, stock.ErrNoOrder) {
		t.Fatalf("the old sale's order after reset: got %v, want ErrNoOrder", err)
	}
	again, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "gina", Key: "g"})
	if err != nil || again.Replayed || again.OrderID == first.OrderID {
		t.Fatalf("gina's key in the new sale: got %+v, %v; want a fresh sale", again, err)
	}
	o, err := s.Order(t.Context(), again.OrderID)
	if err != nil || o.Sale != st.Sale {
		t.Fatalf("the new order: got %+v, %v; want sale %s", o, err, st.Sale)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 4, Lucky: 1})
}

// A record left by an earlier sale that the reset's sweep missed (written
// after it) names its sale, so it does not count in the new one.
func TestIdempotencyRecordOfAnotherSaleIsIgnored(t *testing.T) {
	s, rdb := ledgerStore(t, 5, 1)
	svc := ledgerModes[0].service(s, nil)
	if err := rdb.Set(t.Context(), ordersKey+":idem:h", "oldsale henry old-order 3 9", 0).Err(); err != nil {
		t.Fatal(err)
	}
	sale, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "henry", Key: "h"})
	if err != nil || sale.Replayed || sale.OrderID == "old-order" {
		t.Fatalf("got %+v, %v; want a fresh sale", sale, err)
	}
}

// With the ledger off, a buyer or key is refused rather than ignored; an
// anonymous sale is the articles' and leaves no order.
func TestLedgerOff(t *testing.T) {
	s, rdb := newStore(t, 5)
	svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) { c.Fencing = true })
	for _, b := range []stock.Buyer{{User: "ivy"}, {Key: "k"}} {
		if _, err := svc.ReduceFor(t.Context(), b); !errors.Is(err, stock.ErrNoLedger) {
			t.Fatalf("buyer %+v with the ledger off: got %v, want ErrNoLedger", b, err)
		}
	}
	sale, err := svc.Reduce(t.Context())
	if err != nil || sale.OrderID != "" {
		t.Fatalf("got %+v, %v; want a sale without an order", sale, err)
	}
	if _, err := s.LedgerStats(t.Context()); !errors.Is(err, stock.ErrNoLedger) {
		t.Fatalf("ledger stats with the ledger off: got %v, want ErrNoLedger", err)
	}
	if n, err := rdb.Exists(t.Context(), ordersKey).Result(); err != nil || n != 0 {
		t.Fatalf("stream exists: %d, %v; want none", n, err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 4, Lucky: 1})
}

// Fencing off (the lab's oversell control) writes no order: the ledger is
// the fenced and atomic sales' alone.
func TestUnfencedSaleWritesNoOrder(t *testing.T) {
	s, _ := ledgerStore(t, 5, 1)
	svc := newService(s, locallock.New(), nil)
	sale, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "jack", Key: "j"})
	if err != nil || sale.OrderID != "" {
		t.Fatalf("got %+v, %v; want an unfenced sale without an order", sale, err)
	}
	wantLedger(t, s, 0, 0, 1)
}

// A holder whose write is fenced (a newer holder read in between) sells
// nothing and leaves no order, no buyer count and no key record.
func TestFencedSaleLeavesNoOrder(t *testing.T) {
	s, _ := ledgerStore(t, 5, 1)
	old := newFakeLease(1)
	old.onDone = func() {
		if _, err := s.Read(t.Context(), stock.Fence{Lock: "test/seckill:lock", Token: 2, Lease: "newer"}); err != nil {
			t.Errorf("newer holder's read: %v", err)
		}
	}
	svc := newService(s, one(old), func(c *stock.ServiceConfig) {
		c.Fencing, c.PerUserLimit = true, 1
		c.Delay = stock.Delay{Min: time.Millisecond, Max: time.Millisecond}
	})
	if _, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "kim", Key: "k"}); !errors.Is(err, stock.ErrFenced) {
		t.Fatalf("got %v, want ErrFenced", err)
	}
	wantLedger(t, s, 0, 0, 0)
	storetest.WantStatus(t, s, stock.Status{Stock: 5})
	// Neither the key nor the limit remembers the refused sale.
	svc2 := ledgerModes[1].service(s, func(c *stock.ServiceConfig) { c.PerUserLimit = 1 })
	if sale, err := svc2.ReduceFor(t.Context(), stock.Buyer{User: "kim", Key: "k"}); err != nil || sale.Replayed {
		t.Fatalf("kim's retry after the fenced sale: got %+v, %v; want a fresh sale", sale, err)
	}
}

// lossyLedgerStore is lossyStore with the ledger on.
func lossyLedgerStore(t *testing.T, n int64, retries int) (*redisstore.Store, *servertest.ReplyLoser) {
	t.Helper()
	srv := servertest.Redis(t)
	hop := servertest.NewReplyLoser(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: hop.Addr(), MaxRetries: retries, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.NewStore(rdb, ledgerKeys(1))
	if err := s.Reset(t.Context(), n); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if err := s.LoadScripts(t.Context()); err != nil {
		t.Fatalf("load scripts: %v", err)
	}
	return s, hop
}

// The sale's reply is lost after it ran: the retry (the client's or the
// service's) finds the receipt and answers the first run's order, so the
// ledger holds one order and the buyer one unit.
func TestLostReplyLeavesOneOrder(t *testing.T) {
	for _, m := range ledgerModes[:2] {
		for _, retries := range []int{3, -1} {
			t.Run(fmt.Sprintf("%s/retries %d", m.name, retries), func(t *testing.T) {
				s, hop := lossyLedgerStore(t, 10, retries)
				hop.Lose([]byte("lucky"), 1)
				svc := newService(s, one(newFakeLease(7)), func(c *stock.ServiceConfig) {
					m.cfg(c)
					c.PerUserLimit = 1
				})
				sale, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "liam", Key: "l"})
				if err != nil || sale.Replayed || sale.OrderID != sale.Attempt || sale.StockAfter != 9 {
					t.Fatalf("got %+v, %v; want a fresh sale, order = attempt, stock after 9", sale, err)
				}
				if hop.Lost() != 1 {
					t.Fatalf("lost %d replies, want 1: the fault did not happen", hop.Lost())
				}
				wantLedger(t, s, 1, 1, 1)
				if after, sold, err := s.Receipt(t.Context(), sale.Attempt); err != nil || !sold || after != 9 {
					t.Fatalf("receipt: got (%d, %v, %v), want (9, true, nil)", after, sold, err)
				}
			})
		}
	}
}

// buyInOrder queues buyers behind a gated first Acquire one at a time, so
// the batch holds them in that order, then opens the gate.
func buyInOrder(t *testing.T, ctx context.Context, svc *stock.Service, g *gatedLocker, buyers []stock.Buyer) []answer {
	t.Helper()
	out := make([]answer, len(buyers))
	var wg sync.WaitGroup
	for i, b := range buyers {
		wg.Go(func() { out[i].buyer = b; out[i].sale, out[i].err = svc.ReduceFor(ctx, b) })
		if i == 0 {
			until := testwait.Until(t)
			for !svc.Gathering(0) && until.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			continue
		}
		waitQueued(t, svc, 0, i)
	}
	close(g.open)
	wg.Wait()
	return out
}

// One combined batch holding a limited buyer twice and a key twice: the
// script answers each member in order from what the earlier ones wrote,
// and every member's receipt says what it got, also after a lost reply.
func TestCombinedBatchVerdictsAndReceipts(t *testing.T) {
	s, hop := lossyLedgerStore(t, 10, -1)
	hop.Lose([]byte("lucky"), 1)
	g := gated(locallock.New())
	svc := newService(s, g, func(c *stock.ServiceConfig) { c.Fencing, c.Combine, c.PerUserLimit = true, true, 1 })
	buyers := []stock.Buyer{{User: "mia"}, {User: "mia"}, {User: "ned", Key: "n"}, {User: "ned", Key: "n"}, {}}
	out := buyInOrder(t, t.Context(), svc, g, buyers)
	if hop.Lost() != 1 {
		t.Fatalf("lost %d replies, want 1", hop.Lost())
	}
	type want struct {
		err      error
		replayOf int // -1: not a replay
		after    int64
	}
	wants := []want{{nil, -1, 9}, {stock.ErrLimitReached, -1, 0}, {nil, -1, 8}, {nil, 2, 8}, {nil, -1, 7}}
	for i, w := range wants {
		a := out[i]
		if !errors.Is(a.err, w.err) || (w.err == nil && a.sale.StockAfter != w.after) {
			t.Fatalf("member %d (%+v): got %+v, %v; want %v, stock after %d", i, a.buyer, a.sale, a.err, w.err, w.after)
		}
		if w.replayOf >= 0 && (!a.sale.Replayed || a.sale.OrderID != out[w.replayOf].sale.OrderID) {
			t.Fatalf("member %d: got %+v, want a replay of member %d's order", i, a.sale, w.replayOf)
		}
		if w.err != nil || w.replayOf >= 0 {
			continue
		}
		if a.sale.OrderID != a.sale.Attempt || a.sale.Replayed {
			t.Fatalf("member %d: got %+v, want its own order", i, a.sale)
		}
		after, sold, err := s.Receipt(t.Context(), a.sale.Attempt)
		if err != nil || !sold || after != w.after {
			t.Fatalf("member %d's receipt: got (%d, %v, %v), want (%d, true, nil)", i, after, sold, err, w.after)
		}
	}
	// The limited member's attempt id is the batch's, at its place.
	limited := stock.MemberAttempt(batchOf(out[0].sale.Attempt), 1)
	if _, sold, err := s.Receipt(t.Context(), limited); err != nil || sold {
		t.Fatalf("the limited member's receipt: got sold %v, %v; want not sold", sold, err)
	}
	wantLedger(t, s, 3, 2, 3)
}

// Check keeps the values the ledger's records cannot hold out of a sale.
func TestBuyerCheck(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct {
		b  stock.Buyer
		ok bool
	}{
		{stock.Buyer{}, true},
		{stock.Buyer{User: long(stock.MaxUserLen), Key: long(stock.MaxKeyLen)}, true},
		{stock.Buyer{User: "a~!"}, true},
		{stock.Buyer{User: long(stock.MaxUserLen + 1)}, false},
		{stock.Buyer{Key: long(stock.MaxKeyLen + 1)}, false},
		{stock.Buyer{User: "a b"}, false},
		{stock.Buyer{Key: "a\tb"}, false},
		{stock.Buyer{User: "é"}, false},
		{stock.Buyer{Key: "a,b\x7f"}, false},
	} {
		if err := tc.b.Check(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, stock.ErrBadBuyer)) {
			t.Errorf("Check(%+v): got %v, want ok %v", tc.b, err, tc.ok)
		}
	}
	s, _ := ledgerStore(t, 5, 1)
	svc := ledgerModes[0].service(s, nil)
	if _, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "a b"}); !errors.Is(err, stock.ErrBadBuyer) {
		t.Fatalf("a sale to %q: got %v, want ErrBadBuyer", "a b", err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 5})
}

// Once every segment is known empty, a replay still reaches a script that
// finds its key's record: it answers the original sale, not sold out.
func TestSegmentedReplayAfterSellOut(t *testing.T) {
	for _, m := range ledgerModes {
		if m.segments < 2 {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			s, _ := ledgerStore(t, 4, m.segments)
			svc := m.service(s, nil)
			first, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "olga", Key: "o"})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := svc.Reduce(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			// Sold out now; these mark every segment empty.
			for range 3 {
				if _, err := svc.Reduce(t.Context()); !errors.Is(err, stock.ErrSoldOut) {
					t.Fatalf("after the last unit: got %v, want ErrSoldOut", err)
				}
			}
			again, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "olga", Key: "o"})
			if err != nil || !again.Replayed || again.OrderID != first.OrderID {
				t.Fatalf("olga's replay after the sell-out: got %+v, %v; want a replay of %s", again, err, first.OrderID)
			}
			if _, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "olga", Key: "o2"}); !errors.Is(err, stock.ErrSoldOut) {
				t.Fatalf("a new key after the sell-out: got %v, want ErrSoldOut", err)
			}
			wantLedger(t, s, 4, 1, 4)
		})
	}
}

// A stock set by hand, never reset, has no sale id: the first order sets
// one, and every order names it.
func TestOrdersNameASaleWithoutReset(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Set(t.Context(), "stock", 5, 0).Err(); err != nil {
		t.Fatal(err)
	}
	s := redisstore.NewStore(rdb, ledgerKeys(1))
	for _, m := range ledgerModes[:2] {
		svc := m.service(s, nil)
		sale, err := svc.ReduceFor(t.Context(), stock.Buyer{User: "pat"})
		if err != nil {
			t.Fatal(err)
		}
		o, err := s.Order(t.Context(), sale.OrderID)
		st, serr := s.LedgerStats(t.Context())
		if err != nil || serr != nil || o.Sale == "" || o.Sale != st.Sale {
			t.Fatalf("%s: got order %+v (%v) in sale %q (%v), want the order to name the sale", m.name, o, err, st.Sale, serr)
		}
	}
}

// Every order carries its unit's number in the sale, the lucky count its
// sale made: over a sold-out sale the units are exactly 1..stock, once
// each, whichever mode sold them, across segments and combined batches.
func TestOrdersNumberTheirUnits(t *testing.T) {
	for _, m := range ledgerModes {
		t.Run(m.name, func(t *testing.T) {
			const stockN = 12
			s, _ := ledgerStore(t, stockN, m.segments)
			svc := m.service(s, nil)
			var buyers []stock.Buyer
			for i := range stockN + 3 {
				buyers = append(buyers, stock.Buyer{User: "n" + strconv.Itoa(i)})
			}
			seen := map[int64]string{}
			for _, a := range buyAll(t, svc, buyers) {
				if a.err != nil {
					continue
				}
				o, err := s.Order(t.Context(), a.sale.OrderID)
				if err != nil {
					t.Fatal(err)
				}
				if prev, dup := seen[o.Unit]; dup || o.Unit < 1 || o.Unit > stockN {
					t.Fatalf("order %s has unit %d (already %q's, or outside 1..%d)", o.ID, o.Unit, prev, stockN)
				}
				seen[o.Unit] = o.ID
			}
			if len(seen) != stockN {
				t.Fatalf("got %d numbered units, want %d", len(seen), stockN)
			}
		})
	}
}
