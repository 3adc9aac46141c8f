// Package etcdelect is the etcd backend of package election: a
// concurrency.Election on the process's etcd session (etcdsess.Manager), the
// same session the etcd lock borrows. A candidate's key lives under
// election.path and is bound to the session lease, so a crashed or stalled
// leader's key is deleted by etcd when the lease expires (session TTL) and
// the next candidate — which watches only its predecessor — takes over.
//
// The Term is the leader key's create revision: etcd revisions only grow,
// and the leader is always the oldest live key, so every new leader's key is
// younger than every earlier leader's.
package etcdelect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"seckill/internal/election"
	"seckill/internal/etcdsess"
)

var _ election.Elector = (*Elector)(nil)

// Options configure an Elector.
type Options struct {
	// Prefix is the election's key prefix, e.g. "/seckill/leader". A "/" is
	// appended when missing. Required.
	Prefix string
	// ID is the candidate's identity, stored as its key's value (the
	// replica name). Required.
	ID string
}

// Elector is one etcd candidate. It borrows the Manager's sessions and
// never closes them.
type Elector struct {
	sess   *etcdsess.Manager
	prefix string
	id     string

	mu     sync.Mutex
	closed bool
	cur    *leadership // the live tenure, so Close can end it
}

// New returns a candidate campaigning under opts.Prefix on m's sessions.
func New(m *etcdsess.Manager, opts Options) *Elector {
	p := opts.Prefix
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return &Elector{sess: m, prefix: p, id: opts.ID}
}

// ID is the candidate's identity.
func (e *Elector) ID() string { return e.id }

// Backend is "etcd".
func (e *Elector) Backend() string { return "etcd" }

// Campaign puts the candidate's key (bound to the current session's lease)
// and waits until every older key is gone, as concurrency.Election.Campaign
// does, but every cleanup (ctx ended, etcd unreachable) runs under its own
// bounded ctx, so a stop never waits for etcd. A wait can end successfully
// even when our own key vanished meanwhile (a lease that expired mid-wait);
// Campaign therefore confirms that our key is the oldest before it reports
// leadership.
func (e *Elector) Campaign(ctx context.Context) (election.Leadership, error) {
	if e.isClosed() {
		return nil, election.ErrClosed
	}
	s, err := e.sess.Session(ctx)
	if err != nil {
		if errors.Is(err, etcdsess.ErrClosed) {
			return nil, fmt.Errorf("%w: %w", election.ErrClosed, err)
		}
		return nil, notElected(ctx, fmt.Errorf("%w: %w", election.ErrUnavailable, err))
	}
	el, err := campaign(ctx, s, e.prefix, e.id)
	if err != nil {
		// campaign has deleted our key (or it goes with the lease).
		return nil, notElected(ctx, fmt.Errorf("%w: campaign: %w", election.ErrUnavailable, err))
	}
	l := &leadership{el: el, sess: s, key: el.Key(), term: uint64(el.Rev()), sig: newSignal(),
		rewatched: make(chan struct{}, 1)}
	if err := l.Check(ctx); err != nil {
		cleanup(s.Client(), l.key, int64(l.term))
		return nil, notElected(ctx, err)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		cleanup(s.Client(), l.key, int64(l.term))
		return nil, election.ErrClosed
	}
	e.cur = l
	e.mu.Unlock()
	l.watch(s.Client())
	return l, nil
}

// Leader reads the oldest key under the prefix by a linearizable read.
func (e *Elector) Leader(ctx context.Context) (election.Leader, error) {
	resp, err := e.sess.Client().Get(ctx, e.prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return election.Leader{}, fmt.Errorf("%w: leader: %w", election.ErrUnavailable, err)
	}
	if len(resp.Kvs) == 0 {
		return election.Leader{}, election.ErrNoLeader
	}
	kv := resp.Kvs[0]
	return election.Leader{ID: string(kv.Value), Term: uint64(kv.CreateRevision)}, nil
}

// Close resigns a live tenure (so another candidate leads at once) and
// refuses later campaigns. It does not close the session: the Manager owns it.
func (e *Elector) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	l := e.cur
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := l.Resign(ctx); err != nil && !errors.Is(err, election.ErrNotLeader) {
		return err
	}
	return nil
}

func (e *Elector) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// notElected adds ErrNotElected when the failure came from ctx ending.
func notElected(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w: %w", election.ErrNotElected, ctx.Err(), err)
	}
	return err
}
