package zkelect

import (
	"context"
	"fmt"

	"github.com/go-zookeeper/zk"

	"seckill/internal/election"
	"seckill/internal/lock"
)

// leadership is one tenure of our latch node.
type leadership struct {
	e    *Elector
	node string
	term uint64
	sig  *lock.Signal
}

// lead starts a tenure of node: Done closes on the first session event that
// is not HasSession (suspended, expired, closed) or when the node is deleted.
// It returns nil, nil when the session already blinked, so Campaign looks
// again.
func (e *Elector) lead(node string, term uint64) (election.Leadership, error) {
	l := &leadership{e: e, node: node, term: term, sig: lock.NewSignal()}
	// Subscribe first: its first event is the current state, so a
	// disconnection after our reads cannot slip by unseen.
	events, cancel := e.s.Subscribe()
	if ev, ok := <-events; !ok || ev.State != zk.StateHasSession {
		cancel()
		return nil, nil
	}
	ok, _, nodeCh, err := e.s.Conn().ExistsW(node)
	if err != nil || !ok {
		cancel()
		return nil, nil
	}
	go func() {
		defer cancel()
		for {
			select {
			case <-l.sig.Done():
				return
			case ev, ok := <-events:
				switch {
				case !ok:
					l.sig.Close(fmt.Errorf("%w: zookeeper session closed", election.ErrLost))
					return
				case ev.State == zk.StateExpired:
					l.sig.Close(fmt.Errorf("%w: zookeeper session expired", election.ErrLost))
					return
				case ev.State != zk.StateHasSession:
					l.sig.Close(fmt.Errorf("%w: %w: zookeeper %s", election.ErrLost, election.ErrSuspended, ev.State))
					return
				}
			case ev := <-nodeCh:
				// NodeDeleted, or the watch dropped by a disconnection (which
				// the session event above reports too). Either ends the tenure.
				l.sig.Close(fmt.Errorf("%w: latch node %s: %s", election.ErrLost, node, ev.Type))
				return
			}
		}
	}()
	return l, nil
}

func (l *leadership) Term() uint64          { return l.term }
func (l *leadership) Done() <-chan struct{} { return l.sig.Done() }
func (l *leadership) Err() error            { return l.sig.Err() }

// Check syncs with the leader of the ensemble (so the read is not stale) and
// confirms our node is still the lowest.
func (l *leadership) Check(ctx context.Context) error {
	if err := l.sig.Err(); err != nil {
		return fmt.Errorf("%w: %w", election.ErrNotLeader, err)
	}
	conn := l.e.s.Conn()
	if _, err := call(ctx, func() (string, error) { return conn.Sync(l.e.path) }); err != nil {
		return l.e.zkErr("sync", err)
	}
	kids, err := call(ctx, func() ([]string, error) { k, _, err := conn.Children(l.e.path); return k, err })
	if err != nil {
		return l.e.zkErr("check leadership", err)
	}
	sortBySeq(kids)
	if len(kids) == 0 || l.e.path+"/"+kids[0] != l.node {
		err := fmt.Errorf("%w: latch node %s is no longer the lowest", election.ErrLost, l.node)
		l.sig.Close(err)
		return fmt.Errorf("%w: %w", election.ErrNotLeader, err)
	}
	return nil
}

// Resign ends the tenure (Done closes first, so the job stops before the
// successor starts) and deletes the latch node.
func (l *leadership) Resign(ctx context.Context) error {
	if !l.sig.Close(election.ErrResigned) {
		return fmt.Errorf("%w: %w", election.ErrNotLeader, l.sig.Err())
	}
	return l.e.withdraw(ctx)
}
