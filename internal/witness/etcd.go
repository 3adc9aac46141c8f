package witness

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"seckill/internal/stock"
)

// Etcd is a stock.Register in one etcd key. Its compare-and-set compares
// the value itself, not the key's ModRevision: restoring a snapshot takes
// etcd's revisions back, so a revision can name two different values.
//
// The etcd client waits for a connection (gRPC WaitForReady) rather than
// failing fast: with the server down, Get and Put return only when ctx
// ends, with an error wrapping stock.ErrRegisterUnavailable and ctx's
// error. Callers give them a ctx with a deadline.
type Etcd struct {
	cli *clientv3.Client
	key string
}

var _ stock.Register = (*Etcd)(nil)

// NewEtcd returns the register kept in key. It uses cli and does not close
// it.
func NewEtcd(cli *clientv3.Client, key string) *Etcd {
	return &Etcd{cli: cli, key: key}
}

// Name is "etcd " and the key.
func (e *Etcd) Name() string { return "etcd " + e.key }

// Get reads the key (a linearizable read): its value, or nil when it is
// absent.
func (e *Etcd) Get(ctx context.Context) ([]byte, error) {
	resp, err := e.cli.Get(ctx, e.key)
	if err != nil {
		return nil, etcdErr(ctx, "get", e.key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	value := resp.Kvs[0].Value
	if value == nil {
		value = []byte{} // stored, but empty: not the nil of "absent"
	}
	return value, nil
}

// Put writes value in one transaction that succeeds only while the key
// holds expect (nil: while the key is absent, its CreateRevision 0).
func (e *Etcd) Put(ctx context.Context, value, expect []byte) (bool, error) {
	cmp := clientv3.Compare(clientv3.CreateRevision(e.key), "=", 0)
	if expect != nil {
		cmp = clientv3.Compare(clientv3.Value(e.key), "=", string(expect))
	}
	resp, err := e.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(e.key, string(value))).Commit()
	if err != nil {
		return false, etcdErr(ctx, "put", e.key, err)
	}
	return resp.Succeeded, nil
}

// etcdErr wraps an error from the client: stock.ErrRegisterUnavailable when
// etcd did not answer, and the caller's context error as well when that
// context has ended.
func etcdErr(ctx context.Context, op, key string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		if !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		return fmt.Errorf("witness: etcd %s %s: %w: %w", op, key, stock.ErrRegisterUnavailable, err)
	}
	if etcdUnavailable(err) {
		return fmt.Errorf("witness: etcd %s %s: %w: %w", op, key, stock.ErrRegisterUnavailable, err)
	}
	return fmt.Errorf("witness: etcd %s %s: %w", op, key, err)
}

// etcdUnavailable reports whether err means etcd did not answer the request
// (down, unreachable, no leader, overloaded, timed out), as opposed to
// answering it with a refusal.
func etcdUnavailable(err error) bool {
	for _, e := range []error{
		context.DeadlineExceeded,
		rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail,
		rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrTimeoutWaitAppliedIndex,
		rpctypes.ErrNoLeader, rpctypes.ErrNotLeader, rpctypes.ErrLeaderChanged,
		rpctypes.ErrStopped, rpctypes.ErrUnhealthy, rpctypes.ErrTooManyRequests,
		syscall.ECONNREFUSED, syscall.ECONNRESET,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}
