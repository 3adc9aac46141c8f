package stockd

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"seckill/internal/election"
	"seckill/internal/election/audit"
	"seckill/internal/election/etcdelect"
	"seckill/internal/election/zkelect"
	"seckill/internal/handler"
)

// leaderStatus is what GET /leader reads: the Runner's local belief and the
// Elector's fresh answer.
type leaderStatus struct {
	*election.Runner
	election.Elector
}

// auditSources are what the leader's audit checks beside the books, each
// nil when off (audit.Config names what each adds).
type auditSources struct {
	ledger       audit.Ledger
	durable      audit.DurableOrders
	items        audit.ItemsSurveyor
	itemLedgers  audit.ItemLedgers
	reservations audit.Reservations
}

// startElection joins the election configured by election.* on the
// process's shared session (w's, the one the lock uses too) and runs the
// sale audit every election.job_interval while this replica leads; with
// src.ledger (and durable) set, the audit also reconciles the order ledger
// with lucky (and MySQL's rows with the ledger), with items each item's
// books and ledger (and one item's durable copy per run), and with
// reservations their census. stop
// resigns, so another replica leads at once, and waits for the campaign to
// end; it must run before w closes the sessions. With election.backend none
// it starts nothing and the status is nil (/leader reports backend "none").
func startElection(ctx context.Context, w *wiring, reg prometheus.Registerer, src auditSources) (stop func(), _ handler.LeaderStatus, _ error) {
	cfg := w.cfg
	el, err := buildElector(ctx, w)
	if err != nil || el == nil {
		return func() {}, nil, err
	}
	m := election.NewMetrics(reg, prometheus.Labels{"replica": cfg.Replica, "election": el.Backend()})
	stream, term := auditKeys(cfg)
	aud := audit.New(w.stockRedis(), audit.Config{
		Stream: stream, TermKey: term,
		Stock: cfg.Stock.Key, Lucky: cfg.Stock.LuckyKey, Fence: cfg.Stock.FenceKey,
		Initial:  initialKey(cfg), // written by Store.Reset
		Segments: cfg.Stock.Segments,
		Replica:  cfg.Replica, Backend: el.Backend(),
		Ledger: src.ledger, Durable: src.durable, Items: src.items, ItemLedgers: src.itemLedgers,
		Reservations: src.reservations, Logger: w.log,
	})
	runner := election.NewRunner(election.RunnerConfig{
		Elector: el, Interval: cfg.Election.JobInterval, Logger: w.log,
		Job: aud.Job(m, w.log), OnChange: m.ObserveStatus,
	})
	// The campaign outlives ctx (the signal) until stop: resigning needs it.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		if err := runner.Run(rctx); err != nil {
			w.log.Error("election stopped", "err", err)
		}
	}()
	stop = sync.OnceFunc(func() { // main calls it on shutdown and in a defer
		cancel()
		<-exited
		if c, ok := el.(election.Closer); ok {
			_ = c.Close()
		}
	})
	return stop, leaderStatus{runner, el}, nil
}

// buildElector makes the configured candidate on w's shared session; nil for
// election.backend none.
func buildElector(ctx context.Context, w *wiring) (election.Elector, error) {
	cfg := w.cfg
	switch cfg.Election.Backend {
	case "none":
		return nil, nil
	case "etcd":
		m, err := w.etcdSession()
		if err != nil {
			return nil, fmt.Errorf("election: %w", err)
		}
		return etcdelect.New(m, etcdelect.Options{Prefix: cfg.Election.Path, ID: cfg.Replica}), nil
	case "zookeeper":
		s, err := w.zkSession(ctx)
		if err != nil {
			return nil, fmt.Errorf("election: %w", err)
		}
		return zkelect.New(s, zkelect.Options{Path: cfg.Election.Path, ID: cfg.Replica}), nil
	}
	return nil, fmt.Errorf("config: election.backend: unknown backend %q", cfg.Election.Backend)
}
