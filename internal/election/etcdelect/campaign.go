package etcdelect

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// errSessionOver: the session ended while we waited for older candidates.
var errSessionOver = errors.New("etcd session expired or closed while campaigning")

// campaign is concurrency.Election.Campaign, except for its cleanup: when
// ctx ends while waiting, Election.Campaign resigns under the client's
// lifetime ctx, which blocks until the client closes if etcd is
// unreachable — and the client is closed only after the election stopped.
// Here the cleanup runs under its own bounded ctx (closeTimeout); a key it
// could not delete goes with the session lease. The key (prefix+lease) and
// the value follow Election's layout, so the returned Election's Leader,
// Resign and Proclaim work on it.
func campaign(ctx context.Context, s *concurrency.Session, prefix, val string) (*concurrency.Election, error) {
	cli := s.Client()
	key := fmt.Sprintf("%s%x", prefix, s.Lease())
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val, clientv3.WithLease(s.Lease()))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		// The put may have been applied: remove it, bounded.
		cleanup(cli, key, 0)
		return nil, err
	}
	rev := resp.Header.Revision
	if !resp.Succeeded {
		kv := resp.Responses[0].GetResponseRange().Kvs[0]
		rev = kv.CreateRevision
		if string(kv.Value) != val {
			if _, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
				Then(clientv3.OpPut(key, val, clientv3.WithIgnoreLease())).Commit(); err != nil {
				cleanup(cli, key, rev)
				return nil, err
			}
		}
	}
	if err := waitOlderGone(ctx, s, prefix, rev-1); err != nil {
		cleanup(cli, key, rev)
		return nil, err
	}
	return concurrency.ResumeElection(s, prefix, key, rev), nil
}

// cleanup deletes key (if its create revision is still rev; 0: whatever
// it is) under its own bounded ctx, never the caller's or the client's.
func cleanup(cli *clientv3.Client, key string, rev int64) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	txn := cli.Txn(ctx)
	if rev != 0 {
		txn = txn.If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev))
	}
	_, _ = txn.Then(clientv3.OpDelete(key)).Commit() // else: it goes with the lease
}

// waitOlderGone waits until no key under prefix was created at or before
// maxRev, watching only the youngest of them each time.
func waitOlderGone(ctx context.Context, s *concurrency.Session, prefix string, maxRev int64) error {
	cli := s.Client()
	opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(maxRev))
	for {
		resp, err := cli.Get(ctx, prefix, opts...)
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		if err := waitDelete(ctx, s, string(resp.Kvs[0].Key), resp.Header.Revision); err != nil {
			return err
		}
	}
}

// waitDelete returns nil when key is deleted after rev or the watch lost
// its place (the caller reads again), and an error when ctx or the session
// ends first.
func waitDelete(ctx context.Context, s *concurrency.Session, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := s.Client().Watch(wctx, key, clientv3.WithRev(rev+1), clientv3.WithFilterPut())
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.Done():
			return errSessionOver
		case wr, ok := <-wch:
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				return errors.New("watch closed: etcd client closed")
			}
			if wr.Err() != nil || wr.Canceled {
				return nil // compacted or cancelled: read again
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					return nil
				}
			}
		}
	}
}
