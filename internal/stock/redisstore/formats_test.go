package redisstore_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// A sale reset by a newer replica, whose format this build does not read,
// is refused on every path in (a process that sold in the old sale, one
// that starts now), and nothing is written in it; a sale without a format
// key (set up before formats) is format 1 and sells.
func TestSaleOfANewerFormatIsRefused(t *testing.T) {
	s, rdb := newStore(t, 10)
	if got, err := rdb.Get(t.Context(), "stock:format").Result(); err != nil || got != "1" {
		t.Fatalf("the reset's stock:format = %q, %v; want \"1\"", got, err)
	}
	if _, err := s.SellAtomic(t.Context(), stock.NewAttemptID()); err != nil {
		t.Fatalf("sale of this build's format: %v", err)
	}
	// A newer replica's reset: a new epoch, and its format.
	if err := rdb.MSet(t.Context(), "stock", 10, "lucky", 0, "stock:epoch", "reset-by-a-newer-replica", "stock:format", 3).Err(); err != nil {
		t.Fatal(err)
	}
	fresh := redisstore.NewStore(rdb, redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"})
	for name, st := range map[string]*redisstore.Store{"the process that sold": s, "a process started after": fresh} {
		_, err := st.SellAtomic(t.Context(), stock.NewAttemptID())
		if !errors.Is(err, stock.ErrSaleFormat) || !errors.Is(err, stock.ErrUnavailable) {
			t.Fatalf("%s, on a sale of format 3: %v; want ErrSaleFormat (unavailable)", name, err)
		}
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 10, Lucky: 0})
	if got, _ := rdb.Get(t.Context(), "stock:format").Result(); got != "3" {
		t.Fatalf("stock:format became %q; want the newer replica's 3 untouched", got)
	}

	if err := rdb.Set(t.Context(), "stock:format", "two", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.SellAtomic(t.Context(), stock.NewAttemptID()); !errors.Is(err, stock.ErrSaleFormat) {
		t.Fatalf("sale with stock:format \"two\": %v; want ErrSaleFormat", err)
	}

	if err := rdb.Del(t.Context(), "stock:format").Err(); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*redisstore.Store{"the process that sold": s, "a process started after": fresh} {
		if _, err := st.SellAtomic(t.Context(), stock.NewAttemptID()); err != nil {
			t.Fatalf("%s, on a sale without stock:format (an older stockd's): %v", name, err)
		}
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 8, Lucky: 2})
}

// Every format this build writes, it also reads.
func TestFormatsReadWhatTheyWrite(t *testing.T) {
	for _, f := range redisstore.Formats() {
		if f.Name == "" || f.What == "" || f.Writes < 1 || f.ReadsFrom > f.Writes {
			t.Errorf("format %+v: want a name, what it covers, and Writes >= 1 >= ... ReadsFrom <= Writes", f)
		}
	}
}

// Every ledger entry says its format, whichever script sold it (locked,
// atomic); an entry of a newer format is refused where it is read, as
// unavailable, not read as this build's; one without the field (before
// formats) reads as format 1.
func TestLedgerEntriesCarryTheirFormat(t *testing.T) {
	s, rdb := ledgerStore(t, 10, 1)
	ctx := t.Context()
	for _, m := range []ledgerMode{ledgerModes[0], ledgerModes[1]} {
		if _, err := m.service(s, nil).ReduceFor(ctx, stock.Buyer{User: "u-" + m.name}); err != nil {
			t.Fatalf("%s sale: %v", m.name, err)
		}
	}
	entries, err := rdb.XRange(ctx, ordersKey, "-", "+").Result()
	if err != nil || len(entries) != 2 {
		t.Fatalf("the ledger holds %d entries (%v); want the 2 sold", len(entries), err)
	}
	for _, e := range entries {
		if got := e.Values["format"]; got != "1" {
			t.Errorf("entry %s (%v): format %v, want \"1\"", e.ID, e.Values["replica"], got)
		}
	}

	// A newer replica's entry, and one from before formats, indexed as
	// the scripts index theirs.
	fields := func(id, format string) map[string]any {
		v := map[string]any{"id": id, "sale": "s", "user": "", "key": "", "token": "1", "replica": "r",
			"stock_after": "1", "time": "1795420836805", "unit": "9"}
		if format != "" {
			v["format"] = format
		}
		return v
	}
	for id, format := range map[string]string{"from-a-newer-replica": "2", "not-a-number": "two", "from-before-formats": ""} {
		entry, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: ordersKey, Values: fields(id, format)}).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, ordersKey+":index", id, entry).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"from-a-newer-replica", "not-a-number"} {
		_, err := s.Order(ctx, id)
		if !errors.Is(err, stock.ErrOrderFormat) || !errors.Is(err, stock.ErrUnavailable) {
			t.Errorf("order %s: %v; want ErrOrderFormat (unavailable)", id, err)
		}
	}
	if o, err := s.Order(ctx, "from-before-formats"); err != nil || o.Unit != 9 {
		t.Errorf("an entry without a format (0.9.0's): %+v, %v; want it read", o, err)
	}
}

// A refusal of a newer format is definite: the sale answers it at its
// first read, without retrying it for the confirm deadline with the lock
// held (every buyer behind it would wait, then be shed busy), in each
// way of selling.
func TestNewerFormatIsNotRetried(t *testing.T) {
	for _, m := range []ledgerMode{ledgerModes[0], ledgerModes[1], ledgerModes[2]} {
		t.Run(m.name, func(t *testing.T) {
			s, rdb := ledgerStore(t, 10, 1)
			var retried atomic.Int64
			svc := m.service(s, func(c *stock.ServiceConfig) {
				c.ConfirmTimeout = 3 * time.Second // long enough for retries to show
				c.OnEvent = func(e stock.Event) {
					if e == stock.EventRetried {
						retried.Add(1)
					}
				}
			})
			if _, err := svc.Reduce(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := rdb.MSet(t.Context(), "stock:epoch", "reset-by-a-newer-replica", "stock:format", 3).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Reduce(t.Context()); !errors.Is(err, stock.ErrSaleFormat) {
				t.Fatalf("a sale in a sale of format 3: %v; want ErrSaleFormat", err)
			}
			if n := retried.Load(); n != 0 {
				t.Fatalf("the refusal was retried %d times; want none", n)
			}
		})
	}
}

// A sale with reservations is a format of its own (2): a replica without
// them refuses it, and a replica with them refuses a sale reset without
// them (ErrSaleKind, a definite answer like a newer format's), until a
// reset makes the sale its kind. Before, each sold in the other's sale:
// units with no deadline in a sale whose census counts a state for each,
// or a return read as a Redis gone back in time.
func TestSaleOfAnotherKindIsRefused(t *testing.T) {
	ctx := t.Context()
	reserving, rdb := ledgerStore(t, 10, 1)
	reserving = reserving.WithReservations()
	plain := redisstore.NewStore(rdb, ledgerKeys(1))
	sells := map[*redisstore.Store]*stock.Service{
		reserving: ledgerModes[0].service(reserving, func(c *stock.ServiceConfig) { c.PaymentWindow = window }),
		plain:     ledgerModes[0].service(plain, nil),
	}
	kind := func(st *redisstore.Store, want string) {
		t.Helper()
		if err := st.Reset(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if got, err := rdb.Get(ctx, ledgerKeys(1).Derive(true).Format).Result(); err != nil || got != want {
			t.Fatalf("the reset's format: %q, %v; want %q", got, err, want)
		}
	}
	for _, tc := range []struct {
		name          string
		resets, other *redisstore.Store
		format        string
	}{
		{"with reservations", reserving, plain, "2"},
		{"without", plain, reserving, "1"},
	} {
		kind(tc.resets, tc.format)
		if _, err := sells[tc.resets].ReduceFor(ctx, stock.Buyer{}); err != nil {
			t.Fatalf("a sale %s, by its kind's replica: %v", tc.name, err)
		}
		_, err := sells[tc.other].ReduceFor(ctx, stock.Buyer{})
		if !errors.Is(err, stock.ErrSaleKind) || !errors.Is(err, stock.ErrUnavailable) || !stock.IsNewerFormat(err) {
			t.Fatalf("a sale %s, by the other kind's replica: %v; want ErrSaleKind, a definite refusal", tc.name, err)
		}
		if !strings.Contains(err.Error(), "orders.payment_window") {
			t.Fatalf("the refusal %q does not name orders.payment_window", err)
		}
		// Ready all the same: the operator's reset goes through it.
		if err := tc.other.CheckCounters(ctx); err != nil {
			t.Fatalf("/readyz's check, the other kind's replica: %v; want none", err)
		}
		storetest.WantStatus(t, tc.resets, stock.Status{Stock: 9, Lucky: 1})
	}
}
