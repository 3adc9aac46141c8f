// Package zkelect is the ZooKeeper backend of package election: Curator's
// LeaderLatch recipe on the process's zksess.Session. Each candidate creates
// an ephemeral-sequential node under election.path; the candidate with the
// lowest sequence leads, every other one watches only its predecessor (no
// herd effect), and a dead leader's node vanishes with its session.
//
// Connection states are handled as Curator recommends, and as its
// double-leader bugs taught: on Disconnected (SUSPENDED) the tenure's Done
// closes at once, because the session may expire on the server while this
// process cannot hear it. The node is kept; the next Campaign, once the
// session is back, finds it still lowest and leads again with the same Term
// — leadership resumes only when confirmed. On Expired (LOST) the node is
// gone and Campaign starts over with a new one.
//
// The Term is the latch node's czxid: zxids only grow, and the leader is
// always the oldest live node.
package zkelect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"seckill/internal/election"
	"seckill/internal/zksess"
)

var _ election.Elector = (*Elector)(nil)

// nodePrefix names latch nodes; zksess.Session.CreateProtected prepends
// its protection GUID and the server appends a 10-digit sequence number.
const nodePrefix = "latch-"

// Options configure an Elector.
type Options struct {
	// Path is the election's parent znode, e.g. "/seckill/leader". It and
	// its ancestors are created when missing. Required.
	Path string
	// ID is the candidate's identity, stored as its node's data. Required.
	ID string
}

// Elector is one ZooKeeper candidate. It borrows the Session and never
// closes it.
type Elector struct {
	s    *zksess.Session
	path string
	id   string

	mu     sync.Mutex
	node   string // our latch node's full path, "" when we have none
	closed bool
}

// New returns a candidate under opts.Path on session s.
func New(s *zksess.Session, opts Options) *Elector {
	return &Elector{s: s, path: strings.TrimSuffix(opts.Path, "/"), id: opts.ID}
}

// ID is the candidate's identity.
func (e *Elector) ID() string { return e.id }

// Backend is "zookeeper".
func (e *Elector) Backend() string { return "zookeeper" }

// Campaign waits for a live session, makes sure the candidate has a latch
// node (reusing the one from before a suspension if it survived), then waits
// until that node is the lowest, watching only its predecessor.
func (e *Elector) Campaign(ctx context.Context) (_ election.Leadership, err error) {
	defer func() {
		if err != nil && ctx.Err() != nil {
			// Withdraw: a node left behind would become "leader" with nobody
			// running the job. If the delete cannot be sent now, the node is
			// retried by the next Campaign or dies with the session.
			e.withdraw(context.WithoutCancel(ctx))
			err = fmt.Errorf("%w: %w: %w", election.ErrNotElected, ctx.Err(), err)
		}
	}()
	for {
		if e.isClosed() {
			return nil, election.ErrClosed
		}
		if err := e.awaitSession(ctx); err != nil {
			return nil, err
		}
		node, err := e.ensureNode(ctx)
		if err != nil {
			return nil, err
		}
		// nil, nil: the predecessor went away or the session blinked.
		if l, err := e.tryLead(ctx, node); err != nil || l != nil {
			return l, err
		}
	}
}

// tryLead checks whether node leads. If it does, it returns the Leadership.
// Otherwise it waits for the predecessor to go (or the session to change)
// and returns nil, nil so Campaign looks again.
func (e *Elector) tryLead(ctx context.Context, node string) (election.Leadership, error) {
	kids, err := call(ctx, func() ([]string, error) { k, _, err := e.s.Conn().Children(e.path); return k, err })
	if err != nil {
		return nil, e.zkErr("list candidates", err)
	}
	sortBySeq(kids)
	me := -1
	for i, k := range kids {
		if e.path+"/"+k == node {
			me = i
			break
		}
	}
	if me < 0 {
		// Our node is gone (session expired in between): make a new one.
		e.forget(node)
		return nil, nil
	}
	if me == 0 {
		st, err := call(ctx, func() (*zk.Stat, error) { _, st, err := e.s.Conn().Exists(node); return st, err })
		if err != nil {
			return nil, e.zkErr("stat own node", err)
		}
		if st == nil {
			e.forget(node)
			return nil, nil
		}
		return e.lead(node, uint64(st.Czxid))
	}
	pred := e.path + "/" + kids[me-1]
	type watch struct {
		ok bool
		ch <-chan zk.Event
	}
	w, err := call(ctx, func() (watch, error) {
		ok, _, ch, err := e.s.Conn().ExistsW(pred)
		return watch{ok, ch}, err
	})
	if err != nil {
		return nil, e.zkErr("watch predecessor", err)
	}
	if !w.ok {
		return nil, nil
	}
	events, cancel := e.s.Subscribe()
	defer cancel()
	for {
		select {
		case <-w.ch:
			// Deleted, or the watch was dropped by a disconnection: look again.
			return nil, nil
		case ev, ok := <-events:
			if !ok {
				return nil, election.ErrClosed
			}
			if ev.State != zk.StateHasSession {
				return nil, nil // awaitSession waits for it to come back
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Leader reads the lowest node and its data.
func (e *Elector) Leader(ctx context.Context) (election.Leader, error) {
	for range 3 { // the lowest node can vanish between the two reads
		kids, err := call(ctx, func() ([]string, error) { k, _, err := e.s.Conn().Children(e.path); return k, err })
		if errors.Is(err, zk.ErrNoNode) {
			return election.Leader{}, election.ErrNoLeader
		}
		if err != nil {
			return election.Leader{}, e.zkErr("leader", err)
		}
		if len(kids) == 0 {
			return election.Leader{}, election.ErrNoLeader
		}
		sortBySeq(kids)
		type got struct {
			data []byte
			st   *zk.Stat
		}
		g, err := call(ctx, func() (got, error) { d, st, err := e.s.Conn().Get(e.path + "/" + kids[0]); return got{d, st}, err })
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return election.Leader{}, e.zkErr("leader", err)
		}
		return election.Leader{ID: string(g.data), Term: uint64(g.st.Czxid)}, nil
	}
	return election.Leader{}, election.ErrNoLeader
}

// Close withdraws the candidacy (deleting our node, so a leader's successor
// takes over at once) and refuses later campaigns. The Session stays open.
func (e *Elector) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), e.s.Timeout())
	defer cancel()
	return e.withdraw(ctx)
}

func (e *Elector) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// sortBySeq orders latch nodes by their sequence suffix; the protection GUID
// in front would otherwise decide the order.
func sortBySeq(kids []string) {
	seq := func(s string) string { return s[max(0, len(s)-10):] }
	sort.Slice(kids, func(i, j int) bool { return seq(kids[i]) < seq(kids[j]) })
}
