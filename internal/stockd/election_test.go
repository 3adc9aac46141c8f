package stockd

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"seckill/internal/election"
	"seckill/internal/election/audit"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/testwait"
)

// The lock and the election run on one session per process: the election
// borrows the one the lock built, and builds (and registers for closing)
// nothing of its own.
func TestLockAndElectionShareTheSession(t *testing.T) {
	cases := []struct {
		backend string
		server  func(t *testing.T, c *Config)
		session func(w *wiring) any
	}{
		{"etcd", func(t *testing.T, c *Config) { c.Etcd.Endpoints = []string{"http://" + servertest.Etcd(t).Addr()} },
			func(w *wiring) any { return w.etcdMgr }},
		{"zookeeper", func(t *testing.T, c *Config) { c.ZooKeeper.Servers = []string{servertest.ZooKeeper(t).Addr()} },
			func(w *wiring) any { return w.zkSess }},
	}
	for _, tc := range cases {
		t.Run(tc.backend, func(t *testing.T) {
			c := validConfig(t)
			c.Lock.Backend, c.Election.Backend = tc.backend, tc.backend
			tc.server(t, c)
			w := &wiring{cfg: c, log: slog.Default()}
			t.Cleanup(func() { _ = w.close() })

			if _, _, err := buildLocker(t.Context(), w); err != nil {
				t.Fatal(err)
			}
			sess, clients := tc.session(w), len(w.closers)
			el, err := buildElector(t.Context(), w)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = el.(election.Closer).Close() })
			if tc.session(w) != sess || len(w.closers) != clients {
				t.Fatalf("the election built clients of its own: %d closers, want %d", len(w.closers), clients)
			}
			// GET /leader names the election's backend through the status.
			if got := (leaderStatus{Elector: el}).Backend(); got != tc.backend {
				t.Fatalf("the status names backend %q, want %q", got, tc.backend)
			}
		})
	}
}

// With the election off, /leader has no status to read and stop is a no-op.
func TestElectionNone(t *testing.T) {
	w := &wiring{cfg: validConfig(t), log: slog.Default()}
	stop, status, err := startElection(t.Context(), w, nil, auditSources{})
	if err != nil || status != nil {
		t.Fatalf("got %v, %v; want no status and no error", status, err)
	}
	stop()
	if len(w.closers) != 0 {
		t.Fatalf("built %d clients for no election", len(w.closers))
	}
}

// countingLedger is a ledger that says when the audit has read it.
type countingLedger struct {
	audit.Ledger
	reads chan struct{}
}

func (l countingLedger) LedgerStats(ctx context.Context) (stock.LedgerStats, error) {
	st, err := l.Ledger.LedgerStats(ctx)
	select {
	case l.reads <- struct{}{}:
	default:
	}
	return st, err
}

// The leader's audit reconciles the ledger it is given: its records carry
// the ledger's counts, and orders == lucky holds for real sales.
func TestElectionAuditsTheLedger(t *testing.T) {
	c := validConfig(t)
	c.Redis.Addr = servertest.Redis(t).Addr()
	c.Election.Backend = "etcd"
	c.Etcd.Endpoints = []string{"http://" + servertest.Etcd(t).Addr()}
	c.Election.JobInterval = 100 * time.Millisecond
	w := &wiring{cfg: c, log: slog.Default()}
	t.Cleanup(func() { _ = w.close() })
	store := redisstore.NewStore(w.stockRedis(), redisstore.Keys{Stock: c.Stock.Key, Lucky: c.Stock.LuckyKey,
		Fence: c.Stock.FenceKey, Initial: initialKey(c), Orders: ordersKey(c)})
	ctx := t.Context()
	if err := store.Reset(ctx, 3); err != nil {
		t.Fatal(err)
	}
	svc := stock.NewService(stock.ServiceConfig{Store: store, Mode: stock.ModeAtomic, Replica: c.Replica})
	if _, err := svc.ReduceFor(ctx, stock.Buyer{User: "alice"}); err != nil {
		t.Fatal(err)
	}
	ledger := countingLedger{Ledger: store, reads: make(chan struct{}, 1)}
	stop, _, err := startElection(ctx, w, nil, auditSources{ledger: ledger})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// Two reads of the ledger: the first run has been recorded by then.
	until := testwait.Until(t)
	for range 2 {
		select {
		case <-ledger.reads:
		case <-until.Done():
			t.Fatal("the leader's audit did not read the ledger")
		}
	}
	recs, err := audit.ReadStream(ctx, w.stockRedis(), audit.DefaultStream)
	if err != nil || len(recs) == 0 {
		t.Fatalf("audit stream: %d records, %v", len(recs), err)
	}
	r := recs[0]
	if !r.OK || r.Ledger == nil || r.Ledger.Orders != 1 || r.Ledger.Lucky != 1 || r.Ledger.Sale == "" {
		t.Fatalf("got record OK=%v ledger %+v problems %q, want OK with 1 order and lucky 1", r.OK, r.Ledger, r.Problems)
	}
}
