package loadgen_test

import (
	"context"
	"testing"
	"time"

	"seckill/internal/lab/loadgen"
)

// A sale with reservations against real replicas behind nginx (redis
// lock, orders.payment_window 1s): every third buyer never pays, its
// unit expires and sells again, until every unit is paid exactly once and
// the books are exact (docs/reservations.md; the demo's reservations row).
func TestReservationsOnLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := startRedisCluster(ctx, t, "redis-server nginx-light", map[string]string{
		"lock.wait_timeout":     "60s",
		"stock.ledger":          "true",
		"orders.payment_window": "1s",
	})

	const stock = 30
	r, err := loadgen.RunReserve(ctx, loadgen.ReserveConfig{
		URL: c.URL(), AdminToken: c.AdminToken(), Minter: c.Minter(),
		Stock: stock, Buyers: 2 * stock, NeverPay: 3, Concurrency: 20, Timeout: 2 * time.Minute,
		Window: time.Second, SameClock: true,
	})
	if err != nil {
		t.Fatalf("run: %v (%+v)\n%s", err, r, c.Logs(20))
	}
	if !r.Consistent || r.Paid != stock || r.PaidTwice != 0 || r.Errors != 0 || r.Left != 0 {
		t.Fatalf("got %+v; want %d paid once each, nothing left, books exact, no errors\n%s", r, stock, c.Logs(20))
	}
	// Every unit a winner never paid for (or paid too late: owed back)
	// came back, once, and sold again.
	unpaid := r.NeverPay + r.Refunds
	if r.NeverPay == 0 || r.Returned != int64(unpaid) || r.Lucky != int64(stock+unpaid) {
		t.Fatalf("got %d never paid, %d paid late, %d returned, lucky %d; want each unpaid unit returned once and resold",
			r.NeverPay, r.Refunds, r.Returned, r.Lucky)
	}
	// Every order won, each checked on its own: one per unit taken.
	if l := r.Lifecycles; l.Orders != int(r.Lucky) || l.Broken != 0 {
		t.Fatalf("lifecycles %+v; want %d orders checked, none broken", l, r.Lucky)
	}
	t.Logf("%+v", r)
}
