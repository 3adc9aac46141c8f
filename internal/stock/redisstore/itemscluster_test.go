package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locallock"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/testwait"
)

// Items on a Redis Cluster (3 masters, 3 replicas): every item's keys,
// settings included, are one slot, so creating, selling (locked, fenced,
// ledger on), reading, listing, surveying and resetting items spread
// over the masters works as on one Redis, with no CROSSSLOT: a second
// create of one id is refused by the registry's claim, and a reset
// sweeps the item's idempotency records from the master that holds them.
func TestItemsOnACluster(t *testing.T) {
	cl := servertest.RedisCluster(t)
	cc := clusterClient(t, cl)
	ctx := t.Context()
	items := itemsOver(cc, true, nil)

	const units, buyers = 30, 40
	ids := []string{"a", "b", "c", "d", "e", "f"}
	masters := map[string]bool{}
	for _, id := range ids {
		if _, err := items.Create(ctx, redisstore.Item{ID: id, Stock: units}); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		node, err := cc.MasterForKey(ctx, redisstore.ItemMetaKey(id))
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Fatalf("items %v all on one master (%v): the test would not cross nodes", ids, masters)
	}
	if _, err := items.Create(ctx, redisstore.Item{ID: "a", Stock: 1}); !errors.Is(err, stock.ErrItemExists) {
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
	if err != nil || sv.Items != len(ids) || len(sv.Problems()) != 0 || len(sv.Halted) != 0 {
		t.Fatalf("survey: %+v, %v; want %d items, all balanced and ledgered", sv, err, len(ids))
	}
	list, err := items.List(ctx)
	if err != nil || len(list) != len(ids) || list[0].ID != "a" || list[0].Stock != units {
		t.Fatalf("list: %+v, %v", list, err)
	}

	// A reset sweeps b's idempotency records: u0's key k0 is a new sale.
	if _, err := items.Reset(ctx, redisstore.Item{ID: "b", Stock: 5, PerUserLimit: 1}); err != nil {
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
	cl := servertest.RedisCluster(t)
	cc := clusterClient(t, cl)
	ctx := t.Context()
	// The steps that must be acknowledged wait with the long default bound;
	// only the one whose replica is frozen takes a short one, by name. Both
	// handles sell through one lock, as one replica's would.
	lk := locallock.New()
	items := itemsOver(cc, true, func(c *redisstore.ItemsConfig) {
		c.Acks, c.Service.Locker = redisstore.ReplicaAcks{Replicas: 1}, lk
	})
	frozen := itemsOver(cc, true, func(c *redisstore.ItemsConfig) {
		c.Acks = redisstore.ReplicaAcks{Replicas: 1, Timeout: redisstore.AckMustNotWithin(300 * time.Millisecond)}
		c.Service.Locker = lk
	})
	if _, err := items.Create(ctx, redisstore.Item{ID: "a", Stock: 10}); err != nil {
		t.Fatalf("create, acknowledged by the replica: %v", err)
	}
	if _, err := items.ReduceFor(ctx, "a", stock.Buyer{}); err != nil {
		t.Fatalf("sale with the replica up: %v", err)
	}
	replica := cl.ReplicaOf(masterOf(t, cl, cc, redisstore.ItemMetaKey("a")))
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = replica.Resume() }()
	sale, err := frozen.ReduceFor(ctx, "a", stock.Buyer{})
	var ue *stock.UnconfirmedError
	if !errors.As(err, &ue) || !errors.Is(err, redisstore.ErrNotReplicated) {
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

// An item's master killed mid-sale on a Redis Cluster, replica acks 1:
// its replica is promoted and the item sells on by itself; no sale
// answered sold is lost (each has its order in the ledger after), none is
// sold twice (each stock-after once), the books balance, and the sale
// never halts (acknowledged means the promoted replica has it).
func TestItemMasterKillOnACluster(t *testing.T) {
	cl := servertest.RedisCluster(t)
	cc := clusterClient(t, cl)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	items := itemsOver(cc, true, func(c *redisstore.ItemsConfig) {
		c.Acks = redisstore.ReplicaAcks{Replicas: 1}
	})
	const initial, before, after = 2000, 100, 100
	if _, err := items.Create(ctx, redisstore.Item{ID: "a", Stock: initial}); err != nil {
		t.Fatal(err)
	}
	master := masterOf(t, cl, cc, redisstore.ItemMetaKey("a"))

	var (
		mu                     sync.Mutex
		sold                   []stock.Sale
		afterKill, unconfirmed int
		halted                 error
		others                 []error
		killed                 bool
		kill, done             = make(chan struct{}), make(chan struct{})
		killOnce, doneOnce     sync.Once
		wg                     sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				default:
				}
				s, err := items.ReduceFor(ctx, "a", stock.Buyer{})
				mu.Lock()
				switch {
				case err == nil:
					sold = append(sold, s)
					if killed {
						afterKill++
						if afterKill >= after {
							doneOnce.Do(func() { close(done) })
						}
					} else if len(sold) >= before {
						killOnce.Do(func() { close(kill) })
					}
				case errors.Is(err, stock.ErrUnconfirmed):
					unconfirmed++
				case errors.Is(err, stock.ErrStoreRewound), errors.Is(err, stock.ErrStoreLost):
					halted = err
					doneOnce.Do(func() { close(done) })
				default:
					others = append(others, err)
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-kill:
	case <-ctx.Done():
		t.Fatalf("%d sales before the kill never answered", before)
	}
	mu.Lock()
	killed = true
	mu.Unlock()
	began := time.Now()
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	np, err := cl.WaitPromoted(ctx, master)
	if err != nil {
		t.Fatal(err)
	}
	promoted := time.Since(began)
	// The promoted replica has no replica of its own: nothing can be
	// acknowledged (every sale unconfirmed, as it must be) until the old
	// master, started again, rejoins as its replica.
	if err := master.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitReplica(ctx, np.Addr()); err != nil {
		t.Fatal(err)
	}
	rejoined := time.Since(began) - promoted
	select {
	case <-done:
	case <-ctx.Done():
	}
	doneOnce.Do(func() { close(done) })
	wg.Wait()
	t.Logf("replica promoted %v after the kill, the old master its replica %v after; %d sold (%d after), %d unconfirmed, %d other errors",
		promoted.Round(time.Millisecond), rejoined.Round(time.Millisecond), len(sold), afterKill, unconfirmed, len(others))
	if len(others) > 0 {
		t.Logf("first error: %v; last: %v", others[0], others[len(others)-1])
	}
	if halted != nil || afterKill < after {
		t.Fatalf("the sale did not go on by itself: %d sold after the kill, halted: %v", afterKill, halted)
	}
	checkSold(t, ctx, items, "a", initial, sold)
}

// clusterClient is a stock client of cl: no retries, failover followed.
func clusterClient(t *testing.T, cl *servers.RedisCluster) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRetries: -1})
	redisstore.SendOnce(cc)
	redisstore.FollowFailover(cc)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// A script whose reply does not come in time runs once: go-redis's
// cluster client sends a command again after a read timeout, whatever
// MaxRetries says (measured: the counter below reached 2), and SendOnce
// stops it.
func TestClusterClientSendsOnce(t *testing.T) {
	cl := servertest.RedisCluster(t)
	ctx := t.Context()
	const key = "{item:once}:n"
	// Counts, then holds the node for 600 ms: past the read timeout.
	slow := redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
local t0 = redis.call('TIME')
repeat
  local t = redis.call('TIME')
until (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > 600000
return n`)
	until := testwait.Until(t)
	for _, once := range []bool{false, true} {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
		if once {
			redisstore.SendOnce(cc)
		}
		if err := cc.Set(ctx, key, 0, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := slow.Run(ctx, cc, []string{key}).Err(); err == nil {
			t.Fatalf("once=%v: the slow script answered within the read timeout", once)
		}
		// A GET queues behind the script running on the node, so its
		// first answer counts every run sent so far; the control's resend
		// was sent before Run returned, and is waited for.
		var n int64
		for until.Err() == nil {
			v, err := cc.Get(ctx, key).Int64()
			if err == nil {
				n = v
				if once || n >= 2 {
					break
				}
			}
		}
		_ = cc.Close()
		switch {
		case once && n != 1:
			t.Errorf("with SendOnce the script ran %d times, want 1", n)
		case !once && n < 2:
			t.Errorf("without SendOnce the script ran %d time(s), want the resend this test guards against (go-redis changed?)", n)
		}
	}
}

// A master killed, its replica promoted: a client without retries
// (FollowFailover) reaches the promoted replica within seconds. Without
// the hook go-redis kept sending to the dead master for as long as it
// was watched.
func TestClusterClientFollowsFailover(t *testing.T) {
	cl := servertest.RedisCluster(t)
	cc := clusterClient(t, cl)
	ctx := t.Context()
	const key = "{item:a}:stock"
	if err := cc.Set(ctx, key, 7, 0).Err(); err != nil {
		t.Fatal(err)
	}
	master := masterOf(t, cl, cc, key)
	// WAIT on the key's master (the cluster client would send it to any
	// node): the replica to be promoted holds the key.
	if n, err := waitOne(ctx, master.Addr(), 5000); err != nil || n != 1 {
		t.Fatalf("WAIT 1 on %s: %d, %v", master.Addr(), n, err)
	}
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.WaitPromoted(ctx, master); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	var last error
	for time.Since(promoted) < 10*time.Second {
		v, err := cc.Get(ctx, key).Int()
		if err == nil {
			if v != 7 {
				t.Fatalf("got %d from the promoted replica, want 7", v)
			}
			t.Logf("answered %v after the promotion", time.Since(promoted).Round(time.Millisecond))
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond) // the reload runs in go-redis's background: no event to wait on
	}
	t.Fatalf("still no answer 10s after the promotion: %v", last)
}

// waitReplica returns once the Redis at addr has a replica that holds all
// it was written (WAIT 1: the event), polling only while none is
// attached, at most 30s.
func waitReplica(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		n, err := waitOne(ctx, addr, 1000)
		if err == nil && n >= 1 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no replica of %s within 30s: %d, %v", addr, n, err)
		}
	}
}

// An item's slot moved to another master mid-sale (MIGRATING/IMPORTING,
// its keys MIGRATEd a few at a time while sales run, then SETSLOT NODE),
// replica acks 1: while the item's keys are split between the two
// masters its sales are refused before running (ASK, TRYAGAIN: answered
// unavailable), and once the slot is moved they go on by themselves on
// the new master. No sale answered sold is lost or sold twice, the books
// balance. The stall is logged: what buyers of that item see.
func TestItemSlotMigrationOnACluster(t *testing.T) {
	cl := servertest.RedisCluster(t)
	cc := clusterClient(t, cl)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	items := itemsOver(cc, true, func(c *redisstore.ItemsConfig) {
		c.Acks = redisstore.ReplicaAcks{Replicas: 1}
	})
	const initial, before, after = 5000, 100, 100
	if _, err := items.Create(ctx, redisstore.Item{ID: "a", Stock: initial}); err != nil {
		t.Fatal(err)
	}
	from := masterOf(t, cl, cc, redisstore.ItemMetaKey("a"))
	var to *servers.Process
	for _, m := range cl.Masters() {
		if m != from && to == nil {
			to = m
		}
	}
	slot, err := cc.ClusterKeySlot(ctx, redisstore.ItemMetaKey("a")).Result()
	if err != nil {
		t.Fatalf("item a's slot %d: %v", slot, err)
	}

	var (
		mu                 sync.Mutex
		sold               []stock.Sale
		attempts           int
		refused, other     int
		firstOther         error
		refusal            = make(chan struct{}, 1) // a buyer was refused
		lastErr            error
		moving, moved      bool
		afterMove          int
		longest            time.Duration
		lastSold           time.Time
		start, done        = make(chan struct{}), make(chan struct{})
		startOnce, doneOne sync.Once
		wg                 sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				default:
				}
				s, err := items.ReduceFor(ctx, "a", stock.Buyer{})
				now := time.Now()
				mu.Lock()
				attempts++
				switch {
				case err == nil:
					sold = append(sold, s)
					if moving && !lastSold.IsZero() {
						longest = max(longest, now.Sub(lastSold))
					}
					lastSold = now
					if moved {
						afterMove++
						if afterMove >= after {
							doneOne.Do(func() { close(done) })
						}
					} else if len(sold) >= before {
						startOnce.Do(func() { close(start) })
					}
				case errors.Is(err, stock.ErrUnavailable):
					refused++
					lastErr = err
					signal(refusal)
				default:
					other++
					signal(refusal)
					if firstOther == nil {
						firstOther = err
					}
					lastErr = err
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-start:
	case <-ctx.Done():
		t.Fatalf("%d sales before the move never answered", before)
	}
	mu.Lock()
	moving = true
	mu.Unlock()
	began := time.Now()
	batches := 0
	// Between batches, hold the slot split until a buyer has been
	// refused by it.
	step := func() {
		batches++
		select { // a refusal from before this batch does not count
		case <-refusal:
		default:
		}
		select {
		case <-refusal:
		case <-ctx.Done():
		}
	}
	if err := cl.MigrateSlot(ctx, int(slot), 40, from, to, step); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	mu.Lock()
	moved = true
	mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
	doneOne.Do(func() { close(done) })
	wg.Wait()
	t.Logf("slot %d moved in %v (%d batches of 40 keys); %d sold (%d after), %d refused unavailable, %d other; longest gap between sales while moving %v; last error %v; first other %v",
		slot, took.Round(time.Millisecond), batches, len(sold), afterMove, refused, other, longest.Round(time.Millisecond), lastErr, firstOther)
	if afterMove < after {
		t.Fatalf("the sale did not go on after the move: %d sold after it", afterMove)
	}
	if n, err := cc.MasterForKey(ctx, redisstore.ItemMetaKey("a")); err != nil || n.Options().Addr != to.Addr() {
		t.Fatalf("item a's master after the move: %v, %v; want %s", n, err, to.Addr())
	}
	checkSold(t, ctx, items, "a", initial, sold)
}

// waitOne runs WAIT 1 ms on the Redis at addr: how many replicas hold
// what it was written.
func waitOne(ctx context.Context, addr string, ms int) (int, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	return rdb.Do(ctx, "wait", 1, ms).Int()
}

// masterOf is the master process that holds key's slot.
func masterOf(t *testing.T, cl *servers.RedisCluster, cc *redis.ClusterClient, key string) *servers.Process {
	t.Helper()
	node, err := cc.MasterForKey(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cl.Masters() {
		if m.Addr() == node.Options().Addr {
			return m
		}
	}
	t.Fatalf("%s's master %s is not one of the cluster's", key, node.Options().Addr)
	return nil
}

// checkSold judges item id after a fault: its books balance at initial,
// lucky covers every sale answered sold, each of those is in its ledger,
// and no stock-after was answered twice (a unit sold twice).
func checkSold(t *testing.T, ctx context.Context, items *redisstore.Items, id string, initial int64, sold []stock.Sale) {
	t.Helper()
	st, err := items.Status(ctx, id)
	if err != nil || st.Stock+st.Lucky != initial || st.Lucky < int64(len(sold)) {
		t.Fatalf("books: %+v, %v; want stock+lucky = %d and lucky ≥ the %d sold", st, err, initial, len(sold))
	}
	ledger, err := items.Orders(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	units := map[int64]bool{}
	for _, s := range sold {
		if units[s.StockAfter] {
			t.Errorf("stock-after %d answered twice: a unit sold twice", s.StockAfter)
		}
		units[s.StockAfter] = true
		if _, err := ledger.Order(ctx, s.OrderID); err != nil {
			t.Errorf("order %s, answered sold, is not in the ledger after the fault: %v", s.OrderID, err)
		}
	}
}

// signal sends on c unless a send is already waiting there.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
