package stockd

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"seckill/internal/auth"
	"seckill/internal/stock/redisstore"
)

// reservations.go: orders.payment_window (docs/reservations.md).

// validateReservations checks orders.payment_window and what it needs.
func validateReservations(c *Config, bad func(key, format string, args ...any)) {
	w := c.Orders.PaymentWindow
	switch {
	case w == 0:
	case w < time.Second || w > 24*time.Hour:
		bad("orders.payment_window", "must be between 1s and 24h0m0s, or 0 (a unit sold is final), got %s", w)
	case !c.Stock.Ledger:
		bad("orders.payment_window", "needs stock.ledger: true (what is reserved is an order)")
	case c.Stock.Segments > 1:
		bad("orders.payment_window", "needs stock.segments: 1 (a returned unit goes back to the one stock key), got %d", c.Stock.Segments)
	case (c.Redis.Sentinel.Master != "" || onCluster(c)) && minReplicaAcks(c) == 0:
		// The lab's reserve-failover cell, run without the acks, lost 10
		// and 12 payments answered paid in two runs.
		bad("stock.min_replica_acks", "must not be 0 with orders.payment_window on a stock Redis that fails over (redis.sentinel.master, redis.cluster.addrs): a failover would lose payments answered paid, and their units would sell again (-1 or at least 1)")
	}
	if d := c.Orders.DurableTimeout; d < 10*time.Millisecond || d >= c.HTTP.WriteTimeout {
		bad("orders.durable_timeout", "must be at least 10ms and below http.write_timeout (%s), got %s", c.HTTP.WriteTimeout, d)
	}
	switch s := c.Orders.PaymentSecret; {
	case s == "":
	case w == 0:
		bad("orders.payment_secret", "needs orders.payment_window (without it nothing is paid)")
	case len(s) < auth.MinSecretLen:
		bad("orders.payment_secret", "too short: want at least %d bytes, got %d (e.g. openssl rand -hex 32)", auth.MinSecretLen, len(s))
	case !c.Auth.AllowWeakSecrets:
		weakSecret("orders.payment_secret", s, "openssl rand -hex 32", bad)
	}
}

// The expirer's pace: it asks for due orders at least every
// expirerPoll (so an order expires at most that late), at once again
// after a full batch, and after expirerRetry when Redis did not answer.
const (
	expirerBatch = 100
	expirerPoll  = time.Second
	expirerRetry = time.Second
)

// reserving reports whether this replica's sale reserves what it sells:
// a payment window, which Validate allows only with the ledger.
func (r *replica) reserving() bool { return r.cfg.Orders.PaymentWindow > 0 && r.ledger }

// startExpirer runs, with orders.payment_window, the default sale's
// expirer until the replica closes. Every replica runs one: an order
// expires in one script run, so expirers racing return each unit once,
// and one killed mid-batch leaves nothing half done; no election, so no
// leader's loss stops the returns.
func (r *replica) startExpirer(ctx context.Context) {
	if !r.reserving() {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { expire(ctx, r.store, r.log, r.m.ObserveExpirerRun) })
	r.w.onClose(func() error {
		cancel()
		wg.Wait()
		return nil
	})
}

// expire returns st's due reservations until ctx ends, telling observe
// of each run.
func expire(ctx context.Context, st *redisstore.Store, log *slog.Logger, observe func(expired int64, err error)) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		x, err := st.ExpireDue(ctx, expirerBatch)
		if ctx.Err() == nil {
			observe(x.Expired, err)
		}
		wait := expirerPoll
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("expirer: could not expire due reservations", "err", err)
			wait = expirerRetry
		case err != nil:
		case x.Expired == expirerBatch:
			wait = 0 // more are due
		case x.Next > 0:
			// By this process's clock, which may differ from Redis's:
			// the poll bounds how far off it can make an expiry.
			wait = min(max(time.Until(time.UnixMilli(x.Next)), 10*time.Millisecond), expirerPoll)
		}
		if x.Expired > 0 {
			log.Info("expirer: reservations expired, units back on sale", "orders", x.Expired, "pending", x.Pending)
		}
		t.Reset(wait)
	}
}
