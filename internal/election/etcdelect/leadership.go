package etcdelect

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"seckill/internal/backoff"
	"seckill/internal/election"
	"seckill/internal/lock"
)

// closeTimeout bounds the resign done by Close: etcd unreachable, the lease
// expires on its own after the session TTL anyway.
const closeTimeout = 2 * time.Second

func newSignal() *lock.Signal { return lock.NewSignal() }

// leadership is one tenure: our key at our create revision on one session.
type leadership struct {
	el   *concurrency.Election
	sess *concurrency.Session
	key  string
	term uint64
	sig  *lock.Signal
	stop context.CancelFunc // ends the watch goroutine

	// seen is the revision of the last read that proved leadership (Check
	// runs from the Runner and the watch); the watch starts after it.
	seenMu sync.Mutex
	seen   int64
	// rewatched gets a token each time the watch is re-established after
	// a compaction (for tests); buffered(1), never blocks.
	rewatched chan struct{}
}

func (l *leadership) Term() uint64          { return l.term }
func (l *leadership) Done() <-chan struct{} { return l.sig.Done() }
func (l *leadership) Err() error            { return l.sig.Err() }

// Re-read backoff after a compacted watch when etcd does not answer.
const (
	rereadMin = 100 * time.Millisecond
	rereadMax = time.Second
)

// watch closes Done when the session ends (lease expired or revoked,
// keep-alive gave up) or our key is deleted or replaced — by an operator, a
// revoke from another client, or our own Resign.
//
// It watches from the revision after the read that proved leadership (any
// later event on our key ends the tenure). A compaction past that revision
// is no news about our key: the watch (resumed after a reconnect) is then
// refused with ErrCompacted, and watch reads again — is our key still the
// oldest? — and watches on from that read, instead of giving up a tenure
// that nothing ended (re-campaigning would reuse the same key and term, and
// fail the same way).
func (l *leadership) watch(cli *clientv3.Client) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	l.stop = cancel
	wch := cli.Watch(ctx, l.key, clientv3.WithRev(l.seenRev()+1))
	go func() {
		defer cancel()
		for {
			select {
			case <-l.sess.Done():
				l.sig.Close(fmt.Errorf("%w: etcd session expired or closed", election.ErrLost))
				return
			case <-l.sig.Done():
				return
			case resp, ok := <-wch:
				if ok && resp.CompactRevision != 0 {
					if !l.reread(ctx) {
						return
					}
					wch = cli.Watch(ctx, l.key, clientv3.WithRev(l.seenRev()+1))
					select {
					case l.rewatched <- struct{}{}:
					default:
					}
					continue
				}
				if !ok || resp.Canceled {
					// The watch ends when etcd has no leader (WithRequireLeader)
					// or the client closes: we can no longer see our key.
					l.sig.Close(fmt.Errorf("%w: %w: watch on leader key ended: %v",
						election.ErrLost, election.ErrSuspended, resp.Err()))
					return
				}
				for _, ev := range resp.Events {
					if ev.Type == clientv3.EventTypeDelete || ev.Kv.CreateRevision != int64(l.term) {
						l.sig.Close(fmt.Errorf("%w: leader key %s deleted", election.ErrLost, l.key))
						return
					}
				}
			}
		}
	}()
}

// reread confirms leadership after the watch lost its place, retrying
// while etcd does not answer (the session's end stops it if that lasts).
// It reports whether the tenure goes on; l.seen is then the read's revision.
func (l *leadership) reread(ctx context.Context) bool {
	retry := backoff.Backoff{Initial: rereadMin, Max: rereadMax}
	for {
		rctx, cancel := context.WithTimeout(ctx, closeTimeout)
		err := l.Check(rctx)
		cancel()
		if err == nil {
			return true
		}
		if errors.Is(err, election.ErrNotLeader) {
			return false // Check closed Done
		}
		select {
		case <-l.sess.Done():
			l.sig.Close(fmt.Errorf("%w: etcd session expired or closed", election.ErrLost))
			return false
		case <-l.sig.Done():
			return false
		case <-ctx.Done():
			return false
		case <-time.After(retry.Next()):
		}
	}
}

// Check reads the oldest key under the prefix (a linearizable read, so it
// fails when etcd is unreachable or has no quorum) and confirms it is ours.
func (l *leadership) Check(ctx context.Context) error {
	if err := l.sig.Err(); err != nil {
		return fmt.Errorf("%w: %w", election.ErrNotLeader, err)
	}
	resp, err := l.el.Leader(ctx)
	if err != nil {
		if err == concurrency.ErrElectionNoLeader {
			return l.lost("no leader key")
		}
		return fmt.Errorf("%w: check leadership: %w", election.ErrUnavailable, err)
	}
	kv := resp.Kvs[0]
	if string(kv.Key) != l.key || uint64(kv.CreateRevision) != l.term {
		return l.lost(fmt.Sprintf("leader is %s (rev %d)", kv.Value, kv.CreateRevision))
	}
	l.seenMu.Lock()
	l.seen = max(l.seen, resp.Header.Revision)
	l.seenMu.Unlock()
	return nil
}

func (l *leadership) seenRev() int64 {
	l.seenMu.Lock()
	defer l.seenMu.Unlock()
	return l.seen
}

func (l *leadership) lost(why string) error {
	err := fmt.Errorf("%w: %s", election.ErrLost, why)
	l.sig.Close(err)
	return fmt.Errorf("%w: %w", election.ErrNotLeader, err)
}

// Resign ends the tenure first — Done closes before the key is gone, so the
// job has stopped when the next candidate starts — then deletes our key if it
// is still the one we created, so the next candidate's watch fires at once.
func (l *leadership) Resign(ctx context.Context) error {
	if !l.sig.Close(election.ErrResigned) {
		return fmt.Errorf("%w: %w", election.ErrNotLeader, l.sig.Err())
	}
	if err := l.el.Resign(ctx); err != nil {
		// The key stays until the session lease expires (or is revoked).
		return fmt.Errorf("%w: resign: %w", election.ErrUnavailable, err)
	}
	return nil
}
