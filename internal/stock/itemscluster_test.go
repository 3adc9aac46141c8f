package stock_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lab/servers"
	"seckill/internal/lab/servers/servertest"
	"seckill/internal/stock"
)

// Items on a Redis Cluster (3 masters, 3 replicas): every item's keys,
// settings included, are one slot, so creating, selling (locked, fenced,
// ledger on), reading, listing, surveying and resetting items spread
// over the masters works as on one Redis, with no CROSSSLOT: a second
// create of one id is refused by the registry's claim, and a reset
// sweeps the item's idempotency records from the master that holds them.
func TestItemsOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := servertest.RedisCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRetries: -1})
	t.Cleanup(func() { _ = cc.Close() })
	ctx := t.Context()
	items := itemsOver(cc, true, nil)

	const units, buyers = 30, 40
	ids := []string{"a", "b", "c", "d", "e", "f"}
	masters := map[string]bool{}
	for _, id := range ids {
		if _, err := items.Create(ctx, stock.Item{ID: id, Stock: units}); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		node, err := cc.MasterForKey(ctx, stock.ItemMetaKey(id))
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Fatalf("items %v all on one master (%v): the test would not cross nodes", ids, masters)
	}
	if _, err := items.Create(ctx, stock.Item{ID: "a", Stock: 1}); !errors.Is(err, stock.ErrItemExists) {
		t.Fatalf("second create of a: got %v, want ErrItemExists", err)
	}

	// Every item sold at once, named buyers with keys.
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	sold := make([]int, len(ids))
	errs := make(chan error, len(ids)*buyers)
	for i, id := range ids {
		for j := range buyers {
			wg.Go(func() {
				_, err := items.ReduceFor(ctx, id, stock.Buyer{User: fmt.Sprintf("u%d", j), Key: fmt.Sprintf("k%d", j)})
				switch {
				case err == nil:
					mu.Lock()
					sold[i]++
					mu.Unlock()
				case !errors.Is(err, stock.ErrSoldOut):
					errs <- fmt.Errorf("%s: %w", id, err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, id := range ids {
		st, err := items.Status(ctx, id)
		if err != nil || sold[i] != units || st.Stock != 0 || st.Lucky != units || !st.SoldOut {
			t.Fatalf("%s: sold %d, status %+v (%v); want %d sold, stock 0, lucky %d", id, sold[i], st, err, units, units)
		}
	}
	sv, err := items.Survey(ctx)
	if err != nil || sv.Items != len(ids) || len(sv.Unbalanced) != 0 || len(sv.Unledgered) != 0 || len(sv.Halted) != 0 {
		t.Fatalf("survey: %+v, %v; want %d items, all balanced and ledgered", sv, err, len(ids))
	}
	list, err := items.List(ctx)
	if err != nil || len(list) != len(ids) || list[0].ID != "a" || list[0].Stock != units {
		t.Fatalf("list: %+v, %v", list, err)
	}

	// A reset sweeps b's idempotency records: u0's key k0 is a new sale.
	if _, err := items.Reset(ctx, stock.Item{ID: "b", Stock: 5, PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	s, err := items.ReduceFor(ctx, "b", stock.Buyer{User: "u0", Key: "k0"})
	if err != nil || s.Replayed || s.StockAfter != 4 {
		t.Fatalf("b after its reset, u0's old key: %+v, %v; want a new sale, 4 left", s, err)
	}
	if _, err := items.ReduceFor(ctx, "b", stock.Buyer{User: "u0", Key: "k1"}); !errors.Is(err, stock.ErrLimitReached) {
		t.Fatalf("u0's second unit of b (limit 1 since the reset): got %v, want ErrLimitReached", err)
	}
	if st, err := items.Status(ctx, "c"); err != nil || st.Lucky != units {
		t.Fatalf("c after b's reset: %+v, %v; want untouched", st, err)
	}
}

// With replica acks on a Redis Cluster, WAIT goes with the sale to the
// master of the item's slot, on one connection: a sale is answered sold
// with that master's replica up, and unconfirmed (not replicated) while
// it is frozen, never sold; its receipt says sold once the replica thaws.
// (Sent through the cluster client, WAIT would go to any node, whose
// replicas have nothing to acknowledge: every sale would look replicated.)
func TestItemReplicaAcksOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := servertest.RedisCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRetries: -1})
	t.Cleanup(func() { _ = cc.Close() })
	ctx := t.Context()
	items := itemsOver(cc, true, func(c *stock.ItemsConfig) {
		c.Acks = stock.ReplicaAcks{Replicas: 1, Timeout: 300 * time.Millisecond}
	})
	if _, err := items.Create(ctx, stock.Item{ID: "a", Stock: 10}); err != nil {
		t.Fatalf("create, acknowledged by the replica: %v", err)
	}
	if _, err := items.ReduceFor(ctx, "a", stock.Buyer{}); err != nil {
		t.Fatalf("sale with the replica up: %v", err)
	}
	node, err := cc.MasterForKey(ctx, stock.ItemMetaKey("a"))
	if err != nil {
		t.Fatal(err)
	}
	var replica *servers.Process
	for _, m := range cl.Masters() {
		if m.Addr() == node.Options().Addr {
			replica = cl.ReplicaOf(m)
		}
	}
	if replica == nil {
		t.Fatalf("no replica for item a's master %s", node.Options().Addr)
	}
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = replica.Resume() }()
	sale, err := items.ReduceFor(ctx, "a", stock.Buyer{})
	var ue *stock.UnconfirmedError
	if !errors.As(err, &ue) || !errors.Is(err, stock.ErrNotReplicated) {
		t.Fatalf("sale with a's master's replica frozen: got %+v, %v; want unconfirmed (not replicated)", sale, err)
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	after, sold, err := items.Receipt(ctx, "a", ue.Attempt)
	if err != nil || !sold || after != 8 {
		t.Fatalf("receipt once the replica thawed: after %d, sold %v, %v; want 8, sold", after, sold, err)
	}
}
