package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/stockd"
)

// demo_reserve.go: the demo's reservations row (docs/reservations.md):
// the redis sale with a payment window, every third buyer never paying.
// Its unit expires and sells again, until every unit is paid, once.

// reservationWindow is the row's orders.payment_window: short, so that
// the units of those who never pay come back within the demo.
const reservationWindow = 2 * time.Second

// reservationsRow is the row: its report, or why there is none.
type reservationsRow struct {
	Report *loadgen.ReserveReport `json:"report,omitempty"`
	Err    string                 `json:"error,omitempty"`
	OK     bool                   `json:"ok"`
}

// sellReserved switches the replicas to the redis sale with reservations
// and runs buyers against stock units.
func sellReserved(ctx context.Context, c *localcluster.Cluster, base stockd.Edit, clusterEnv map[string]string,
	stock, buyers, concurrency int, timeout time.Duration) *reservationsRow {
	row := &reservationsRow{}
	env := stockd.Overrides(base, func(cfg *stockd.Config) {
		cfg.Stock.Ledger, cfg.Stock.PerUserLimit, cfg.Orders.PaymentWindow = true, 0, reservationWindow
	})
	maps.Copy(env, clusterEnv)
	if err := c.SetBackend(ctx, "redis", env); err != nil {
		row.Err = firstLine(err)
		return row
	}
	rep, err := loadgen.RunReserve(ctx, loadgen.ReserveConfig{
		URL: c.URL(), AdminToken: c.AdminToken(), Minter: c.Minter(),
		Stock: stock, Buyers: buyers, NeverPay: 3, Concurrency: concurrency,
		// The demo's Redis runs on this machine's clock, never stepped.
		Window: reservationWindow, SameClock: true,
		// Every round of resales waits out a window and the expirer.
		Timeout: max(timeout, 2*time.Minute),
	})
	row.Report = rep
	if err != nil {
		row.Err = firstLine(err)
		return row
	}
	row.OK = rep.Consistent && rep.Errors == 0
	return row
}

// writeReservationsTable prints the row.
func writeReservationsTable(w io.Writer, r *reservationsRow) {
	fmt.Fprintf(w, "Reservations (redis, orders.payment_window %s; every third buyer never pays)\n", reservationWindow)
	fmt.Fprintln(w, "| stock | buyers | paid | never paid (resold) | returned | refunds | lost | units paid twice | books | census | lifecycles | time | verdict |")
	fmt.Fprintln(w, "|--:|--:|--:|--:|--:|--:|--:|--:|---|---|---|--:|---|")
	rep := r.Report
	if rep == nil {
		fmt.Fprintf(w, "| - | - | - | - | - | - | - | - | - | - | - | - | error: %s |\n", r.Err)
		return
	}
	books := "exact"
	if rep.Left+rep.Lucky-rep.Returned != int64(rep.Stock) {
		books = fmt.Sprintf("off: %d+%d-%d", rep.Left, rep.Lucky, rep.Returned)
	}
	census := "-"
	if c := rep.Census; c != nil {
		census = fmt.Sprintf("exact: %d paid, %d expired", c.Paid, c.Expired)
		if !c.OK {
			census = "off: " + strings.Join(c.Problems, "; ")
		}
	}
	lives := fmt.Sprintf("%d checked", rep.Lifecycles.Orders)
	if l := rep.Lifecycles; l.Broken > 0 {
		lives = fmt.Sprintf("%d of %d broken: %s", l.Broken, l.Orders, l.First)
	}
	verdict := "OK"
	switch {
	case r.Err != "":
		verdict = "error: " + r.Err
	case !r.OK:
		verdict = "INCONSISTENT"
	}
	fmt.Fprintf(w, "| %d | %d | %d | %d | %d | %d | %d | %d | %s | %s | %s | %.1f s | %s |\n",
		rep.Stock, rep.Buyers, rep.Paid, rep.NeverPay, rep.Returned, rep.Refunds, rep.Lost, rep.PaidTwice, books, census, lives, rep.DurationMS/1000, verdict)
}
