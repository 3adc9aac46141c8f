package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"seckill/internal/api"
	"seckill/internal/election"
	"seckill/internal/election/audit"
	"seckill/internal/election/etcdelect"
	"seckill/internal/election/zkelect"
	"seckill/internal/etcdsess"
	"seckill/internal/zksess"
)

// electionDeps are what startElection borrows from main. Etcd and ZK are
// the process's shared sessions (the ones the lock uses) when the lock
// backend already built them; nil means startElection builds its own from
// cfg and closes it in stop.
type electionDeps struct {
	Redis      *redis.Client         // the stock Redis: the audit reads the sale and writes its stream here
	Registerer prometheus.Registerer // e.g. metrics.Registry(); nil registers nothing
	Logger     *slog.Logger
	Etcd       *etcdsess.Manager
	ZK         *zksess.Session
}

// startElection joins the election configured by election.* and runs the
// sale audit every election.job_interval while this replica leads. It
// returns stop, which resigns (so another replica leads at once) and waits
// for the campaign to end — call it first on shutdown, before the HTTP
// server drains — and the GET /leader handler. With election.backend none it
// starts nothing and /leader reports backend "none".
func startElection(ctx context.Context, cfg *Config, d electionDeps) (stop func(), leader gin.HandlerFunc, err error) {
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Election.Backend == "none" {
		return func() {}, func(c *gin.Context) {
			c.JSON(http.StatusOK, api.Leader{Self: cfg.Replica, Backend: "none"})
		}, nil
	}
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	el, err := buildElector(ctx, cfg, d, &closers)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	m := election.NewMetrics(d.Registerer, prometheus.Labels{"replica": cfg.Replica, "election": el.Backend()})
	aud := audit.New(d.Redis, audit.Config{
		Stock: cfg.Stock.Key, Lucky: cfg.Stock.LuckyKey, Fence: cfg.Stock.FenceKey,
		Initial: initialKey(cfg), // written by Store.Reset
		Replica: cfg.Replica, Backend: el.Backend(),
	})
	runner := election.NewRunner(election.RunnerConfig{
		Elector: el, Interval: cfg.Election.JobInterval, Logger: log,
		Job: func(ctx context.Context, term uint64) error {
			r, err := aud.Run(ctx, term)
			m.ObserveRun(auditResult(r, err))
			if errors.Is(err, audit.ErrFenced) {
				log.Warn("audit: run refused, a leader with a higher term has recorded", "term", term, "err", err)
			} else if err == nil && !r.OK {
				log.Error("audit: sale invariant violated", "term", term, "stock", r.Stock, "lucky", r.Lucky,
					"initial", r.Initial, "problems", r.Problems)
			} else if err == nil {
				log.Debug("audit ok", "term", term, "stock", r.Stock, "lucky", r.Lucky, "id", r.ID)
			}
			return err
		},
		OnChange: m.ObserveStatus,
	})
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		if err := runner.Run(rctx); err != nil {
			log.Error("election stopped", "err", err)
		}
	}()
	var once sync.Once
	stop = func() { // idempotent: main may call it on shutdown and in a defer
		once.Do(func() {
			cancel()
			<-exited
			closeAll()
		})
	}
	leader = func(c *gin.Context) {
		qctx, qcancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer qcancel()
		st := runner.Status()
		v := api.Leader{Self: cfg.Replica, IsLeader: st.Leading}
		l, err := el.Leader(qctx)
		switch {
		case err == nil:
			v.Leader, v.Term = l.ID, l.Term
			// A replica that was paused past its session still has its
			// local flag set until it processes the expiry; the fresh read
			// is authoritative, so never claim leadership it contradicts.
			v.IsLeader = v.IsLeader && l.ID == cfg.Replica
		case errors.Is(err, election.ErrNoLeader):
			v.IsLeader = false
		default:
			v.Error = err.Error()
			c.JSON(http.StatusServiceUnavailable, v)
			return
		}
		c.JSON(http.StatusOK, v)
	}
	return stop, leader, nil
}

// buildElector makes the configured candidate on the shared session, or on
// one of its own (registered in closers) when main has none.
func buildElector(ctx context.Context, cfg *Config, d electionDeps, closers *[]func()) (election.Elector, error) {
	onClose := func(f func()) { *closers = append(*closers, f) }
	switch cfg.Election.Backend {
	case "etcd":
		m := d.Etcd
		if m == nil {
			cli, err := clientv3.New(clientv3.Config{
				Endpoints:   cfg.Etcd.Endpoints,
				DialTimeout: cfg.Etcd.DialTimeout,
				// Keep-alive probes notice a dead connection within seconds,
				// well inside the session TTL.
				DialKeepAliveTime:    time.Second,
				DialKeepAliveTimeout: time.Second,
				Logger:               zap.NewNop(),
			})
			if err != nil {
				return nil, fmt.Errorf("election: etcd client: %w", err)
			}
			onClose(func() { _ = cli.Close() })
			m = etcdsess.New(cli, cfg.Etcd.SessionTTL)
			onClose(func() { _ = m.Close() })
		}
		el := etcdelect.New(m, etcdelect.Options{Prefix: cfg.Election.Path, ID: cfg.Replica})
		onClose(func() { _ = el.Close() })
		return el, nil
	case "zookeeper":
		s := d.ZK
		if s == nil {
			// A JVM that has just started may take seconds to grant a first
			// session under load; the session timeout alone is too tight.
			dctx, cancel := context.WithTimeout(ctx, cfg.ZooKeeper.SessionTimeout+15*time.Second)
			defer cancel()
			var err error
			if s, err = zksess.Dial(dctx, cfg.ZooKeeper.Servers, cfg.ZooKeeper.SessionTimeout); err != nil {
				return nil, fmt.Errorf("election: %w", err)
			}
			onClose(s.Close)
		}
		el := zkelect.New(s, zkelect.Options{Path: cfg.Election.Path, ID: cfg.Replica})
		onClose(func() { _ = el.Close() })
		return el, nil
	}
	return nil, fmt.Errorf("config: election.backend: unknown backend %q", cfg.Election.Backend)
}

// auditResult is the metrics label of one audit run.
func auditResult(r audit.Record, err error) string {
	switch {
	case errors.Is(err, audit.ErrFenced):
		return "fenced"
	case err != nil:
		return "error"
	case !r.OK:
		return "violation"
	}
	return "ok"
}
