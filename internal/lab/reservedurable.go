package lab

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"seckill/internal/backoff"
	"seckill/internal/servers"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stockd"
)

// reservedurable.go: the reserve-durable cell. With orders.durable each
// reservation's end is a row of MariaDB's orders_ends, and a payment is
// answered paid only once MariaDB holds it (docs/reservations.md,
// "Durable states"). The cell pauses MariaDB (SIGSTOP) at the first
// return until reserveDurablePayments more payments have run in the stock
// Redis: those are paid there and not in MariaDB, so their answers wait
// (or are 503 and sent again), and the ends the scripts kept for MariaDB
// pile up in the stock Redis. Then MariaDB resumes. Judged, beside the
// census: once the replicas copied them, every order of the sale that
// ended has its row in orders_ends with the end the stock Redis decided,
// none another.

// reserveDurablePayments are the payments run in the stock Redis while
// MariaDB is paused.
const reserveDurablePayments = 3

// reserveDurableEnv turns the durable orders on (MariaDB starts with
// them): each replica's consumer claims an idle entry after a second.
func reserveDurableEnv(c *stockd.Config) {
	workDelay(5 * time.Millisecond)(c)
	c.Orders.Durable, c.Orders.ClaimIdle = true, time.Second
}

func runReserveDurable(x *run) error {
	maria := x.c.MariaDB()
	if maria == nil {
		return fmt.Errorf("no MariaDB: the cell needs orders.durable's")
	}
	db, err := sql.Open("mysql", servers.MariaDBDSN(maria.Addr()))
	if err != nil {
		return err
	}
	defer db.Close()
	held := &heldAtAnswer{db: db}
	x.onPaid = held.check(x)
	defer func() { x.onPaid = nil }()
	err = x.reserveSale(func(st reserveStage) error {
		if err := x.stockCounter(st.rdb, st.keys.Returned, func(n int64) bool { return n >= 1 }); err != nil {
			return err
		}
		ctx, cancel := x.until()
		defer cancel()
		paid, err := st.rdb.HLen(ctx, st.keys.Payments).Result()
		if err != nil {
			return err
		}
		if err := maria.Pause(); err != nil {
			return fmt.Errorf("pause MariaDB: %w", err)
		}
		at := time.Now()
		waitErr := x.stockHashLen(st.rdb, st.keys.Payments, paid+reserveDurablePayments)
		kept, _ := st.rdb.ZCard(ctx, st.keys.Ended).Result()
		if err := maria.Resume(); err != nil {
			return fmt.Errorf("resume MariaDB: %w", err)
		}
		if waitErr != nil {
			return fmt.Errorf("no payment while MariaDB was paused: %w", waitErr)
		}
		x.notef("MariaDB paused at the first return for %dms, while %d payments ran in the stock Redis; %d ends kept there for it",
			ms(time.Since(at)), reserveDurablePayments, kept)
		return nil
	})
	if err != nil {
		return err
	}
	held.judge(x)
	return x.endsInMariaDB(maria)
}

// heldAtAnswer reads, at each payment answered paid, that payment's row
// in orders_ends: the 200 promised MariaDB holds it, so a row read after
// the answer that is missing, or names another end, is a broken promise,
// where the final look at orders_ends (endsInMariaDB) would find it
// copied later by the syncer.
type heldAtAnswer struct {
	db *sql.DB

	mu      sync.Mutex
	checked int
	broken  []string // "order: what MariaDB held"
}

// check is the sale's OnPaid: one read per payment, under the cell's
// bound (a MariaDB still paused then makes it wait, not fail).
func (h *heldAtAnswer) check(x *run) func(order, paymentID string) {
	return func(order, paymentID string) {
		ctx, cancel := x.until()
		defer cancel()
		want := redisstore.StatePaid + " " + paymentID
		got, err := endsOf(ctx, h.db, map[string]string{order: want})
		h.mu.Lock()
		defer h.mu.Unlock()
		h.checked++
		switch g, ok := got[order]; {
		case err != nil:
			h.broken = append(h.broken, fmt.Sprintf("%s: unread (%v)", order, err))
		case !ok:
			h.broken = append(h.broken, order+": no row")
		case g != want:
			h.broken = append(h.broken, fmt.Sprintf("%s: %q, want %q", order, g, want))
		}
	}
}

// judge records what the reads found.
func (h *heldAtAnswer) judge(x *run) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.broken) > 0 {
		x.problemf("%d of %d payments answered paid were not in orders_ends at their answer (first: %s)", len(h.broken), h.checked, h.broken[0])
		return
	}
	x.notef("each of the %d payments answered paid was in orders_ends at its answer", h.checked)
}

// endsInMariaDB waits until every order of the sale that ended (the stock
// Redis's states) has its row in orders_ends, and names each whose row
// holds another end.
func (x *run) endsInMariaDB(maria *servers.Process) error {
	rdb := x.stockRedis()
	defer rdb.Close()
	keys, err := saleKeys()
	if err != nil {
		return err
	}
	ctx, cancel := x.until()
	defer cancel()
	states, err := rdb.HGetAll(ctx, keys.States).Result()
	if err != nil {
		return fmt.Errorf("read the orders' states: %w", err)
	}
	want := map[string]string{} // order -> its end as orders_ends holds it
	for id, st := range states {
		state, pid, _ := strings.Cut(st, " ")
		if state == redisstore.StateReserved {
			continue
		}
		if state != redisstore.StatePaid {
			pid = ""
		}
		want[id] = state + " " + pid
	}
	db, err := sql.Open("mysql", servers.MariaDBDSN(maria.Addr()))
	if err != nil {
		return err
	}
	defer db.Close()
	poll := backoff.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	for {
		got, err := endsOf(ctx, db, want)
		var missing, wrong []string
		for id, w := range want {
			switch g, ok := got[id]; {
			case !ok:
				missing = append(missing, id)
			case g != w:
				wrong = append(wrong, fmt.Sprintf("%s %q in MariaDB, %q in Redis", id, g, w))
			}
		}
		if err == nil && len(wrong) > 0 {
			x.problemf("%d orders end otherwise in MariaDB than in the stock Redis (first: %s)", len(wrong), wrong[0])
			return nil
		}
		if err == nil && len(missing) == 0 {
			x.notef("orders_ends holds the %d ends of the sale, each as the stock Redis decided it", len(want))
			return nil
		}
		if werr := poll.Wait(ctx); werr != nil {
			x.problemf("%d of %d ended orders never reached orders_ends (%v): %v", len(missing), len(want), err, werr)
			return nil
		}
	}
}

// endsOf reads the rows of orders_ends of the orders in want: order ->
// "state payment".
func endsOf(ctx context.Context, db *sql.DB, want map[string]string) (map[string]string, error) {
	got := map[string]string{}
	if len(want) == 0 {
		return got, nil
	}
	ids := make([]any, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	rows, err := db.QueryContext(ctx, "SELECT id, state, COALESCE(payment_id, '') FROM orders_ends WHERE id IN (?"+
		strings.Repeat(",?", len(ids)-1)+")", ids...)
	if err != nil {
		return got, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, state, pid string
		if err := rows.Scan(&id, &state, &pid); err != nil {
			return got, err
		}
		got[id] = state + " " + pid
	}
	return got, rows.Err()
}
