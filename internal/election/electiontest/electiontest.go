// Package electiontest is the conformance suite every election backend runs
// against real servers: three candidates, each with its own client and
// session (like three processes), running the audit job through
// election.Runner against a real Redis.
package electiontest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/election"
	"seckill/internal/election/audit"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// Candidate is one candidate process as the suite sees it.
type Candidate struct {
	election.Elector
	// Crash stops the candidate's connection for good without resigning,
	// as kill -9 would: its session expires on the server after the TTL.
	Crash func()
	// Cut severs the connection (a partition, or a process frozen past its
	// TTL); Restore reconnects it.
	Cut, Restore func()
}

// Cluster is one coordination server and a way to make candidates on it.
type Cluster interface {
	// Candidate returns a new candidate named id under path, with its own
	// client and session; everything is closed in t.Cleanup.
	Candidate(t *testing.T, path, id string) Candidate
	// SessionTTL is how long a silent candidate keeps its place.
	SessionTTL() time.Duration
	// Restart stops the server gracefully and starts it again.
	Restart(t *testing.T)
}

// Interval is the job interval the suite runs with.
const Interval = 250 * time.Millisecond

// Run runs the suite against cluster.
func Run(t *testing.T, c Cluster) {
	rdb := redis.NewClient(&redis.Options{Addr: servertest.Redis(t).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s := &suite{c: c, rdb: rdb}
	t.Run("OneLeader", s.oneLeader)
	t.Run("CrashFailover", s.crashFailover)
	t.Run("GracefulFailover", s.gracefulFailover)
	t.Run("PausedLeaderFenced", s.pausedLeaderFenced)
	t.Run("ServerRestart", s.serverRestart)
	t.Run("CampaignCancel", s.campaignCancel)
}

type suite struct {
	c   Cluster
	rdb *redis.Client
	n   atomic.Int64
}

// node is one candidate with its Runner and auditor.
type node struct {
	Candidate
	runner  *election.Runner
	auditor *audit.Auditor
	cancel  context.CancelFunc
	exited  chan struct{}
	fenced  atomic.Int64
	runs    atomic.Int64
}

// group is three candidates of one fresh election, with their own stream.
type group struct {
	nodes   []*node
	path    string
	stream  string
	changes chan string // "<id> leading <term>" / "<id> follower", in order
}

func (s *suite) group(t *testing.T, n int) *group {
	t.Helper()
	i := s.n.Add(1)
	path := fmt.Sprintf("/seckill-test/%s/e%d", t.Name(), i)
	g := &group{path: path, stream: fmt.Sprintf("audit:%d:%s", i, t.Name()), changes: make(chan string, 256)}
	termKey := g.stream + ":term"
	for k := range n {
		id := fmt.Sprintf("cand-%d", k+1)
		cand := s.c.Candidate(t, path, id)
		nd := &node{Candidate: cand, exited: make(chan struct{})}
		nd.auditor = audit.New(s.rdb, audit.Config{
			Stock: g.stream + ":stock", Lucky: g.stream + ":lucky", Fence: g.stream + ":fence",
			Stream: g.stream, TermKey: termKey, Replica: id, Backend: cand.Backend(),
		})
		nd.runner = election.NewRunner(election.RunnerConfig{
			Elector: cand, Interval: Interval,
			Job: func(ctx context.Context, term uint64) error {
				_, err := nd.auditor.Run(ctx, term)
				return err
			},
			OnRun: func(_ uint64, err error) {
				nd.runs.Add(1)
				if errors.Is(err, audit.ErrFenced) {
					nd.fenced.Add(1)
				}
			},
			OnChange: func(st election.Status) {
				msg := id + " follower"
				if st.Leading {
					msg = fmt.Sprintf("%s leading %d", id, st.Term)
				}
				select {
				case g.changes <- msg:
				default:
				}
			},
		})
		g.nodes = append(g.nodes, nd)
	}
	for _, nd := range g.nodes {
		ctx, cancel := context.WithCancel(context.Background())
		nd.cancel = cancel
		go func() {
			defer close(nd.exited)
			_ = nd.runner.Run(ctx)
		}()
		t.Cleanup(nd.stop)
	}
	return g
}

// stop cancels the node's Runner (it resigns) and waits for it.
func (nd *node) stop() {
	nd.cancel()
	<-nd.exited
}

// awaitLeader waits until exactly one node of alive believes it leads and
// returns it, or fails after within.
func (g *group) awaitLeader(t *testing.T, alive ...*node) *node {
	t.Helper()
	if len(alive) == 0 {
		alive = g.nodes
	}
	// A must-happen event: bounded by the test's deadline, not a figure
	// (how fast it came is the failover cases' note, not their verdict).
	until := testwait.Until(t)
	for {
		var leaders []*node
		for _, nd := range alive {
			if nd.runner.Status().Leading {
				leaders = append(leaders, nd)
			}
		}
		if len(leaders) > 1 {
			t.Fatalf("%d candidates believe they lead: %v", len(leaders), ids(leaders))
		}
		if len(leaders) == 1 {
			return leaders[0]
		}
		// Wake on the next transition; the test's deadline bounds the wait.
		select {
		case <-g.changes:
		case <-until.Done():
			t.Fatalf("no leader among %v", ids(alive))
		}
	}
}

func ids(ns []*node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.ID()
	}
	return out
}

func (g *group) others(nd *node) []*node {
	var out []*node
	for _, o := range g.nodes {
		if o != nd {
			out = append(out, o)
		}
	}
	return out
}

// sample checks every period for d that at most one of alive believes it
// leads and that all of them see the same leader.
func (g *group) sample(t *testing.T, d time.Duration, alive []*node) {
	t.Helper()
	var wg sync.WaitGroup
	until := testwait.Until(t)           // a steady-state read must answer
	tick := time.NewTicker(Interval / 4) // sampling cadence, not synchronisation
	defer tick.Stop()
	end := time.Now().Add(d)
	for ; time.Now().Before(end); <-tick.C {
		var leading []string
		for _, nd := range alive {
			if nd.runner.Status().Leading {
				leading = append(leading, nd.ID())
			}
		}
		if len(leading) > 1 {
			t.Fatalf("two leaders at once: %v", leading)
		}
		seen := make([]election.Leader, len(alive))
		errs := make([]error, len(alive))
		for i, nd := range alive {
			wg.Go(func() { seen[i], errs[i] = nd.Leader(until) })
		}
		wg.Wait()
		for i, err := range errs {
			// A read a busy machine made slow is late, not wrong; one that
			// fails is the finding.
			if err != nil {
				t.Fatalf("%s could not read the leader in steady state: %v", alive[i].ID(), err)
			}
		}
		for i := range seen[1:] {
			// A transition between two reads may legitimately differ; the
			// steady state may not. Callers sample only in steady state.
			if seen[i+1] != seen[0] {
				t.Fatalf("candidates disagree on the leader: %+v vs %+v", seen[0], seen[i+1])
			}
		}
	}
}
