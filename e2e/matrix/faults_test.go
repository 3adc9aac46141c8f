package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/lab"
	"seckill/internal/lab/localcluster"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// TestFaultMatrix runs every cell of the fault matrix (package lab) on its
// own cluster with the fault layer on: real replicas behind nginx, each
// reaching Redis, the lock Redis, etcd and ZooKeeper through its own
// toxiproxy. Correct backends must stay safe and recover; the fencing-off
// controls and the flawed backends must show their failure, or the checker
// is blind. The buyers' cells must also pass every check of the buyers'
// verdict (orders == lucky == ledger == MySQL rows, no duplicate, no
// buyer over the limit). A backend (or failpoint) stockd does not build
// yet skips its cell. Run one cell with
// -run 'TestFaultMatrix/redis/pause/fenced', the buyers' cells with
// -run 'TestFaultMatrix/^redis$/(pause|consumerkill|mysqldown|replayrace)/fenced/buyers',
// the stock Redis failover cells with -run 'TestFaultMatrix/^(redis|etcd)$/failover-',
// the Redis Cluster cells with -run 'TestFaultMatrix/^redis$/cluster-',
// the reservation cells with -run 'TestFaultMatrix/^(redis|etcd)$/reserve-',
// the cells whose stock Redis loses the sale with -run 'TestFaultMatrix/.*/^(wipe|restore|restore-all|restore-both|witness-wipe|witness-restore|other-sale)$'.
// SECKILL_LAB_FULL=1 (make lab-full) runs lab.FullMatrix: the byName
// cells too, which the default matrix leaves out to keep CI in budget.
// SECKILL_LAB_SALE=combine (or segments8) runs every cell of the
// articles' sale sold that way instead (lab.SoldWith).
func TestFaultMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("fault matrix: minutes of real processes")
	}
	pool := &clusterPool{stockd: os.Getenv("SECKILL_STOCKD"), sem: make(chan struct{}, faultClusters())}
	t.Cleanup(pool.close(t))

	cells := lab.Matrix(nil, nil)
	if os.Getenv("SECKILL_LAB_FULL") == "1" { // make lab-full
		cells = lab.FullMatrix()
	}
	if sale := os.Getenv("SECKILL_LAB_SALE"); sale != "" {
		var err error
		if cells, err = lab.SoldWith(cells, sale); err != nil {
			t.Fatalf("SECKILL_LAB_SALE: %v", err)
		}
	}
	for _, cell := range cells {
		t.Run(cell.String(), func(t *testing.T) {
			t.Parallel()
			c := pool.get(t)
			defer func() { pool.put(t, c) }()
			r, err := lab.Run(t.Context(), c, cell)
			if err != nil {
				t.Fatal(err)
			}
			line, _ := json.Marshal(r)
			t.Logf("%s", line)
			// A must-happen event (a sale after the fault) that did not
			// come fails the cell (r.Passed); one that came late is
			// reported: a loaded machine makes it late, never absent.
			for _, s := range r.Slow {
				t.Logf("slow (reported, not failed): %s", s)
			}
			if h := r.History; h != nil {
				t.Logf("history: %d ops, %d in flight, ok %v, checked in %dms %s", h.Ops, h.InFlight, h.OK, h.CheckMS, h.Picture)
			}
			switch cell.Expect() {
			case lab.ExpectSafe, lab.ExpectMayLose, lab.ExpectLoss:
				if r.Oversold != 0 {
					t.Errorf("got oversold %d, want 0", r.Oversold)
				}
				if !r.Consistent {
					t.Errorf("got stock %d + lucky %d (initial %d) with %d sold answers, want consistent books",
						r.Stock, r.Lucky, r.Initial, r.Sold)
				}
				if cell.Buyers && r.Orders == nil {
					t.Errorf("got no buyers' verdict, want one")
				}
				if cell.Buyers && r.Orders != nil && !r.Orders.OK() {
					t.Errorf("got the buyers' check %q failed, want every check to pass: %+v", r.Orders.Failed(), r.Orders.Checks)
				}
				// The failover cells: with replica acks on, no acknowledged
				// sale may vanish with the old primary; the control reports.
				if f := r.Failover; f != nil && f.Acks > 0 && f.Lost != 0 {
					t.Errorf("got %d acknowledged sales lost with min_replica_acks %d, want 0", f.Lost, f.Acks)
				}
				if f := r.Failover; cell.Expect() == lab.ExpectLoss && (f == nil || f.Lost == 0) {
					t.Errorf("got no acknowledged sale lost by the starved-replica control, want some: the checker cannot see a loss")
				}
				if lab.IsFailover(cell.Scenario) && r.Failover == nil {
					t.Errorf("got no failover measure, want one")
				}
				if lab.IsReserve(cell.Scenario) && (r.Reservations == nil || r.Reservations.Census == nil) {
					t.Errorf("got no census of the reservations, want one")
				}
			case lab.ExpectOversell:
				if r.Oversold == 0 {
					t.Errorf("got no oversell (stock %d, lucky %d), want one: the checker cannot see a lost lock", r.Stock, r.Lucky)
				}
				if r.History == nil || r.History.OK {
					t.Errorf("got history %+v, want a violation: the history check cannot see the oversell", r.History)
				}
			case lab.ExpectWrong:
				// The broken build: the sums balance, the answers do not.
				if r.Oversold != 0 || !r.Consistent {
					t.Errorf("got oversold %d, consistent %v; want the sums to balance", r.Oversold, r.Consistent)
				}
				if r.History == nil || r.History.OK || r.History.Unknown {
					t.Errorf("got history %+v, want a violation", r.History)
				}
			case lab.ExpectHalt:
				// The stock Redis lost the sale: the books went with it,
				// and the answers after it are the verdict.
				s := r.Store
				if s == nil {
					t.Fatalf("got no store-loss measure, want one")
				}
				if n := s.After["sold"] + s.After["sold_out"]; n > 0 {
					t.Errorf("got %d sales sent after the stock Redis came back answered sold or sold_out (%v), want every one store_lost", n, s.After)
				}
				if s.SoldTwice != 0 {
					t.Errorf("got %d stock-after values answered 200 twice, want 0", s.SoldTwice)
				}
				if lab.Rewinds(cell.Scenario) && s.Rewound != c.Replicas() {
					t.Errorf("got %d replicas' /readyz store_rewound, want all %d", s.Rewound, c.Replicas())
				}
			case lab.ExpectStuck:
				if r.Sold > 0 && r.RecoveryMS >= 0 {
					t.Errorf("got a sale %dms after the crash, want the lock held forever", r.RecoveryMS)
				}
			}
			if !r.Passed() {
				t.Errorf("got status %s, want pass: %s\n%s", r.Status, r.Note, c.Logs(10))
			}
		})
	}
}

// faultClusters is how many fault clusters the matrix runs on at once, a
// cell on one of them at a time: go test's -parallel (make test sets 3; go's
// default is one per core). The cells mostly wait (a lease to expire, a link
// cut for seconds): measured on two cores, one cluster kept 0.7 of a core
// busy, and two clusters ran every cell as fast as one did. A cell's name
// stays as it was, so -run still picks one cell (and starts one cluster).
func faultClusters() int {
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 0 {
			return n
		}
	}
	return 1
}

// clusterPool lends the matrix's fault clusters to its cells, starting one
// when a cell finds none free, up to faultClusters.
type clusterPool struct {
	stockd string
	sem    chan struct{} // one token per cluster lent out

	mu     sync.Mutex
	free   []*localcluster.Cluster
	all    []*localcluster.Cluster
	failed []string // the cells that failed, in order
}

// maxFailed is how many cells may fail before the rest fail at once: a
// cell that cannot sell waits out its CellDeadline (minutes), and a fault
// that breaks every cluster would otherwise spend the suite's whole
// timeout on cells that can tell nothing new, hiding the first failures
// behind a timeout's goroutine dump.
const maxFailed = 3

// get lends t a cluster, started if none is free; it fails (or, for a
// missing binary outside CI, skips) t when one cannot start, and fails t
// at once once maxFailed cells have failed.
func (p *clusterPool) get(t *testing.T) *localcluster.Cluster {
	t.Helper()
	p.sem <- struct{}{}
	p.mu.Lock()
	if len(p.failed) >= maxFailed {
		failed := slices.Clone(p.failed)
		p.mu.Unlock()
		<-p.sem
		t.Fatalf("not run: %d cells failed before it (%s); fix those first", len(failed), strings.Join(failed, ", "))
	}
	if n := len(p.free); n > 0 {
		c := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return c
	}
	p.mu.Unlock()
	cfg := lab.ClusterConfig()
	cfg.Stockd = p.stockd
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	c, err := localcluster.Start(ctx, cfg)
	cancel()
	if err != nil {
		<-p.sem
		if errors.Is(err, servers.ErrNotInstalled) {
			servertest.SkipOrFail(t, err, "redis-server nginx-light")
		}
		t.Fatalf("start fault cluster: %v", err)
	}
	p.mu.Lock()
	p.all = append(p.all, c)
	p.mu.Unlock()
	return c
}

// put returns c for the next cell, unless t failed: a failed cell may have
// left its cluster unable to sell (a halt, a server down or paused), and
// every later cell on it would fail after its whole deadline for the same
// reason. Its cluster is closed; the next cell starts a fresh one.
func (p *clusterPool) put(t *testing.T, c *localcluster.Cluster) {
	if t.Failed() {
		if err := c.Close(); err != nil {
			t.Logf("close the failed cell's cluster: %v", err)
		}
		p.mu.Lock()
		p.failed = append(p.failed, t.Name())
		p.mu.Unlock()
		<-p.sem
		return
	}
	p.mu.Lock()
	p.free = append(p.free, c)
	p.mu.Unlock()
	<-p.sem
}

// close is the matrix's cleanup: it runs once every cell is done.
func (p *clusterPool) close(t *testing.T) func() {
	return func() {
		for _, c := range p.all {
			if err := c.Close(); err != nil {
				t.Logf("close fault cluster: %v", err)
			}
		}
	}
}
