package zkelect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"seckill/internal/election"
)

// call runs a ZooKeeper request so that ctx bounds the caller's wait.
// go-zookeeper requests take no context and wait through a disconnection; the
// goroutine outlives a cancelled caller only until the library answers,
// which it does on reconnection or with ErrConnectionClosed when the Session
// closes.
func call[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// awaitSession returns once the connection has a session. Requests sent
// while disconnected would only queue inside the library.
func (e *Elector) awaitSession(ctx context.Context) error {
	events, cancel := e.s.Subscribe()
	defer cancel()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return election.ErrClosed
			}
			if ev.State == zk.StateHasSession {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ensureNode returns our latch node, creating it (and the election path)
// when we have none or the one we had died with an expired session.
func (e *Elector) ensureNode(ctx context.Context) (string, error) {
	e.mu.Lock()
	node := e.node
	e.mu.Unlock()
	if node != "" {
		ok, err := call(ctx, func() (bool, error) { ok, _, err := e.s.Conn().Exists(node); return ok, err })
		if err != nil {
			return "", e.zkErr("check own node", err)
		}
		if ok {
			return node, nil
		}
		e.forget(node)
	}
	if err := e.ensurePath(ctx); err != nil {
		return "", err
	}
	// A protected create: if the connection drops between the server
	// creating the node and us hearing back, the node is an orphan of our
	// live session, queued ahead of the one the next Campaign makes, which
	// would watch it forever while Leader reports us. The Session tracks the
	// create from the moment it is sent and sweeps such a node as soon as
	// the session is back. (go-zookeeper's CreateProtectedEphemeralSequential
	// searches once, and gives up when that search fails too.)
	// Wait for any orphan of ours to be swept first, so the new node is
	// never queued behind it.
	if err := e.s.Swept(ctx, e.path); err != nil {
		return "", e.zkErr("sweep lost latch creates", err)
	}
	created, err := e.s.CreateProtected(ctx, e.path, nodePrefix, []byte(e.id), zk.WorldACL(zk.PermAll))
	if err != nil {
		return "", e.zkErr("create latch node", err)
	}
	e.mu.Lock()
	e.node = created.Path
	e.mu.Unlock()
	return created.Path, nil
}

// ensurePath creates the election path and its ancestors as persistent nodes.
func (e *Elector) ensurePath(ctx context.Context) error {
	parts := strings.Split(strings.TrimPrefix(e.path, "/"), "/")
	p := ""
	for _, part := range parts {
		p += "/" + part
		_, err := call(ctx, func() (string, error) { return e.s.Conn().Create(p, nil, 0, zk.WorldACL(zk.PermAll)) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return e.zkErr("create "+p, err)
		}
	}
	return nil
}

// forget drops node as ours if it still is.
func (e *Elector) forget(node string) {
	e.mu.Lock()
	if e.node == node {
		e.node = ""
	}
	e.mu.Unlock()
}

// withdraw deletes our latch node, if any, so we stop being a candidate.
func (e *Elector) withdraw(ctx context.Context) error {
	e.mu.Lock()
	node := e.node
	e.mu.Unlock()
	if node == "" {
		return nil
	}
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, e.s.Conn().Delete(node, -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return e.zkErr("delete latch node", err)
	}
	e.forget(node)
	return nil
}

// zkErr wraps a library error: ctx errors pass through (Campaign adds
// ErrNotElected), a closed connection is ErrClosed, the rest ErrUnavailable.
func (e *Elector) zkErr(op string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("zkelect: %s: %w", op, err)
	case errors.Is(err, zk.ErrConnectionClosed) && e.s.State() == zk.StateDisconnected:
		return fmt.Errorf("%w: %w: zkelect: %s: %w", election.ErrUnavailable, election.ErrSuspended, op, err)
	case errors.Is(err, zk.ErrClosing), errors.Is(err, zk.ErrConnectionClosed):
		return fmt.Errorf("%w: zkelect: %s: %w", election.ErrUnavailable, op, err)
	}
	return fmt.Errorf("%w: zkelect: %s: %w", election.ErrUnavailable, op, err)
}
