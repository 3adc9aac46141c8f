package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

// replicas.go: "acknowledged means durable". Redis replicates
// asynchronously: a script's writes reach the replica after its reply
// reached us, so a failover in between loses a sale that was answered
// 200 sold, and the next buyer gets the same unit. With ReplicaAcks the
// selling scripts are followed, on the same connection, by WAIT: a sale is
// answered sold only once that many replicas hold it; otherwise it is
// unconfirmed (ErrNotReplicated inside ErrUnconfirmed) and its receipt
// settles it later — it sold if the receipt is there once the replicas
// have it too, and it did not if a failover lost it.
//
// WAIT counts the replicas that acknowledged the connection's last
// propagated write. A retry that finds its receipt writes nothing, and a
// replayed idempotency key writes nothing of the sale it answers, so their
// WAIT would measure some older write; each run is therefore followed by a
// write of its own (SET of the store's ack key) before WAIT, which moves
// the connection's offset past everything the primary had done, the
// answered sale included — the replication stream is one ordered log.

// ReplicaAcks makes a sale wait for replicas (Store.WithReplicaAcks).
type ReplicaAcks struct {
	// Replicas is how many replicas must hold a sale before it is answered
	// sold; 0 turns the wait off (a sale is answered once the primary has
	// it, as before).
	Replicas int
	// Timeout bounds the wait (AckBound; zero: DefaultReplicaAckTimeout).
	// A sale not acknowledged in time is unconfirmed, never sold.
	Timeout AckBound
}

// ErrNotReplicated: a sale's script ran on the primary but fewer replicas
// than ReplicaAcks.Replicas acknowledged it within the timeout; a failover
// now would lose it. The service answers it unconfirmed (it wraps into
// ErrUnconfirmed there); Store.Receipt settles it later.
var ErrNotReplicated = errors.New("stock: sale not acknowledged by enough replicas")

// WithReplicaAcks returns a store over the same client and keys whose
// sales (Write, WriteBatch, SellAtomic, the ledger's forms) and receipts
// wait for a.Replicas replicas. a.Replicas 0 returns a store that does not
// wait.
func (s *Store) WithReplicaAcks(a ReplicaAcks) *Store {
	if s.wit == nil {
		return s.with(a, nil, 0)
	}
	return s.with(a, s.wit.reg, s.wit.timeout)
}

// ReplicaAcks is the store's setting (zero: sales do not wait).
func (s *Store) ReplicaAcks() ReplicaAcks { return s.acks }

// ackKey is the key the write before WAIT sets: a receipt name no attempt
// id can take (they hold a '-').
func (s *Store) ackKey() string { return s.keys.Receipts + "ack" }

// eval runs sc as Script.Run does (EVALSHA, then EVAL on NOSCRIPT). With
// replica acks on it pipelines the run with the ack key's write and WAIT,
// so all three go down one connection, and returns WAIT's command too
// (else nil) for acked to judge once the reply says what the run did.
func (s *Store) eval(ctx context.Context, sc *redis.Script, keys []string, args ...any) (*redis.Cmd, *redis.Cmd) {
	if s.acks.Replicas <= 0 {
		return sc.Run(ctx, s.rdb, keys, args...), nil
	}
	run := func(send func(p redis.Pipeliner) *redis.Cmd) (*redis.Cmd, *redis.Cmd) {
		rdb, err := s.ackClient(ctx)
		if err != nil {
			c := redis.NewCmd(ctx)
			c.SetErr(err)
			return c, nil
		}
		p := rdb.Pipeline()
		c := send(p)
		w := s.queueWait(ctx, p)
		_, _ = p.Exec(ctx) // each command carries its own error
		s.nodeFailed(ctx, c.Err())
		return c, w
	}
	c, w := run(func(p redis.Pipeliner) *redis.Cmd { return sc.EvalSha(ctx, p, keys, args...) })
	if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
		// Nothing ran; send the script whole, as Script.Run would.
		c, w = run(func(p redis.Pipeliner) *redis.Cmd { return sc.Eval(ctx, p, keys, args...) })
	}
	return c, w
}

// queueWait queues the ack key's write and WAIT on p.
func (s *Store) queueWait(ctx context.Context, p redis.Pipeliner) *redis.Cmd {
	p.Set(ctx, s.ackKey(), "1", 0)
	// Do, as a pipeline has no Wait method; the pipeline's read timeout
	// (the client's) bounds it, hence ReplicaAcks.Timeout's rule.
	return p.Do(ctx, "wait", s.acks.Replicas, s.acks.Timeout.Duration().Milliseconds())
}

// acked judges WAIT's answer for a run that sold (or answered a sale):
// nil when enough replicas hold it or the wait is off, ErrUnavailable when
// WAIT itself got no answer (the service retries the run, which answers
// from its receipt and waits again), else ErrNotReplicated.
func (s *Store) acked(ctx context.Context, op string, wait *redis.Cmd) error {
	if wait == nil {
		return nil
	}
	n, err := wait.Int64()
	if err != nil {
		return WrapRedis(ctx, op+": wait for replicas", err)
	}
	if n < int64(s.acks.Replicas) {
		return fmt.Errorf("stock: %s: %w: %d of %d within %v", op, ErrNotReplicated, n, s.acks.Replicas, s.acks.Timeout)
	}
	return nil
}

// getAcked is GET key followed, with replica acks on, by the ack key's
// write and WAIT on the same connection (else the WAIT command is nil).
func (s *Store) getAcked(ctx context.Context, key string) (*redis.StringCmd, *redis.Cmd) {
	if s.acks.Replicas <= 0 {
		return s.rdb.Get(ctx, key), nil
	}
	rdb, err := s.ackClient(ctx)
	if err != nil {
		return redis.NewStringResult("", err), nil
	}
	p := rdb.Pipeline()
	g := p.Get(ctx, key)
	w := s.queueWait(ctx, p)
	_, _ = p.Exec(ctx)
	s.nodeFailed(ctx, g.Err())
	return g, w
}

// ackClient is where a run and its WAIT go, one connection: WAIT counts
// the replicas' acknowledgements of its own connection's writes and names
// no key, so on a Redis Cluster (where go-redis would send a keyless
// command to any node) it goes with the run to the client of the master
// that holds the sale's slot. Elsewhere the store's client.
func (s *Store) ackClient(ctx context.Context) (redis.UniversalClient, error) {
	cc, ok := s.rdb.(*redis.ClusterClient)
	if !ok {
		return s.rdb, nil
	}
	node, err := cc.MasterForKey(ctx, s.keys.Stock)
	if err != nil {
		return nil, fmt.Errorf("%w: the master of %s: %w", stock.ErrUnavailable, s.keys.Stock, err)
	}
	return node, nil
}

// nodeFailed has a Redis Cluster client read the slots again after a
// node it handed out (ackClient) answered err as reloadIfNoAnswer says:
// the cluster client's own hooks (FollowFailover) do not see a node
// client's commands.
func (s *Store) nodeFailed(ctx context.Context, err error) {
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		reloadIfNoAnswer(ctx, cc, err)
	}
}

// pipeliner is what resetAcked runs its two round trips on: one pinned
// connection (*redis.Conn) or, for a client that cannot pin one, the
// client itself.
type pipeliner interface {
	TxPipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// resetAcked runs a reset's transaction, then the ack key's write and
// WAIT, so that a reset answered is on the replicas: without the wait a
// failover right after it could promote a replica that still holds the
// old sale (its stock, lucky and fence), and the buyers would be sold the
// old sale's units under a reset the admin saw succeed. WAIT cannot run
// inside MULTI (it answers at once there), hence the second round trip; it
// goes down the connection that ran the transaction where the client can
// pin one (a *redis.Client, Sentinel's included), so that a failover in
// between fails the wait (the connection is gone, or the demoted primary
// refuses the write) instead of waiting on a new primary that never had
// the reset. Not acknowledged in time: ErrNotReplicated wrapped in
// ErrUnavailable; the reset stands on the primary, and a second one,
// which writes the same values, is how to settle it.
func (s *Store) resetAcked(ctx context.Context, tx func(redis.Pipeliner) error) error {
	rdb, err := s.ackClient(ctx)
	if err != nil {
		return err
	}
	var c pipeliner = rdb
	if cl, ok := rdb.(*redis.Client); ok {
		conn := cl.Conn()
		defer func() { _ = conn.Close() }()
		c = conn
	}
	if _, err := c.TxPipelined(ctx, tx); err != nil {
		s.nodeFailed(ctx, err)
		return WrapRedis(ctx, "reset", err)
	}
	var wait *redis.Cmd
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		wait = s.queueWait(ctx, p)
		return nil
	}); err != nil {
		return WrapRedis(ctx, "reset: wait for replicas", err)
	}
	if err := s.acked(ctx, "reset", wait); err != nil {
		if errors.Is(err, ErrNotReplicated) {
			err = fmt.Errorf("%w: %w", stock.ErrUnavailable, err)
		}
		return err
	}
	return nil
}
