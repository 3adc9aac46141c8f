package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

// steady is s waiting for acks replicas with the long default bound, for
// every step that must be acknowledged (a reset, a sale with the replica
// up): WAIT returns the moment the replica acknowledges, so the bound only
// matters for a replica that never does. The steps that must time out (the
// replica frozen or held) take a store with a short one, strict.
func steady(s *redisstore.Store, acks int) *redisstore.Store {
	return s.WithReplicaAcks(redisstore.ReplicaAcks{Replicas: acks})
}

// strict is s with acks replicas waited for only timeout, for the steps
// whose replica cannot answer.
func strict(s *redisstore.Store, acks int, timeout time.Duration) *redisstore.Store {
	return s.WithReplicaAcks(redisstore.ReplicaAcks{Replicas: acks, Timeout: redisstore.AckMustNotWithin(timeout)})
}

// sentinelClient is a go-redis FailoverClient (no retries of its own, as
// stockd builds it) over the Sentinel set.
func sentinelClient(t *testing.T, set *servers.SentinelSet) *redis.Client {
	t.Helper()
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    set.MasterName,
		SentinelAddrs: set.SentinelAddrs(),
		MaxRetries:    -1,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// steadyReset resets s to n and returns once the replica holds the reset,
// acks or not: without it an acks-0 run may kill the primary before its
// replica saw the reset at all, and a failover then has no sale to carry.
func steadyReset(t *testing.T, s *redisstore.Store, set *servers.SentinelSet, n int64) {
	t.Helper()
	if err := s.Reset(t.Context(), n); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if err := set.WaitReplicated(t.Context(), 1); err != nil {
		t.Fatalf("replica after the reset: %v", err)
	}
}

// replicated is a store behind Sentinel, over the harness's primary,
// replica and three Sentinels, waiting for acks replicas with the long default bound,
// reset to n with the replica holding the reset.
func replicated(t *testing.T, n int64, keys redisstore.Keys, acks int) (*redisstore.Store, *servers.SentinelSet, *redis.Client) {
	t.Helper()
	set := servertest.Sentinels(t, servers.SentinelOptions{})
	rdb := sentinelClient(t, set)
	s := steady(redisstore.NewStore(rdb, keys), acks)
	steadyReset(t, s, set, n)
	return s, set, rdb
}

var ackModes = []struct {
	name string
	keys redisstore.Keys
	cfg  func(*stock.ServiceConfig)
}{
	{"locked", redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}, func(c *stock.ServiceConfig) { c.Fencing = true }},
	{"atomic", redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}, func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }},
	{"locked+ledger", ledgerKeys(1), func(c *stock.ServiceConfig) { c.Fencing = true }},
	{"atomic+ledger", ledgerKeys(1), func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }},
}

// With min replica acks 1, a sale whose replica is frozen (SIGSTOP) is
// answered unconfirmed within the ack timeout, never sold; its receipt is
// unsettled while the replica stays frozen, and says sold once it thaws.
func TestStoppedReplicaMakesSaleUnconfirmed(t *testing.T) {
	for _, m := range ackModes {
		t.Run(m.name, func(t *testing.T) {
			s, set, _ := replicated(t, 10, m.keys, 1)
			lk := locallock.New()
			svc := newService(s, lk, m.cfg)
			if _, err := svc.Reduce(t.Context()); err != nil {
				t.Fatalf("sale with the replica up: %v", err)
			}
			if err := set.Replica.Pause(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = set.Replica.Resume() }()

			// Within the ack timeout, not after either longer wait the
			// sale could make: a WAIT on the default bound (2s), which the
			// error would name, or retries until the confirm deadline,
			// long here so that they cannot pass for a slow machine.
			const ackTimeout, confirmTimeout = 300 * time.Millisecond, 30 * time.Second
			frozen := strict(s, 1, ackTimeout)
			start := time.Now()
			sale, err := newService(frozen, lk, func(c *stock.ServiceConfig) {
				m.cfg(c)
				c.ConfirmTimeout = confirmTimeout
			}).Reduce(t.Context())
			took := time.Since(start)
			var ue *stock.UnconfirmedError
			if !errors.As(err, &ue) || !errors.Is(err, redisstore.ErrNotReplicated) {
				t.Fatalf("sale with the replica stopped: got %+v, %v; want unconfirmed (not replicated)", sale, err)
			}
			if !strings.Contains(err.Error(), "within "+ackTimeout.String()) {
				t.Fatalf("sale with the replica stopped: %v; want not replicated within the %v ack timeout", err, ackTimeout)
			}
			if took >= confirmTimeout {
				t.Fatalf("unconfirmed after %v: the write was retried until the confirm deadline (%v), not answered at the %v ack timeout", took, confirmTimeout, ackTimeout)
			}
			t.Logf("unconfirmed after %v: %v", took.Round(time.Millisecond), err)
			if _, sold, err := frozen.Receipt(t.Context(), ue.Attempt); !errors.Is(err, redisstore.ErrNotReplicated) || !errors.Is(err, stock.ErrUnavailable) {
				t.Fatalf("receipt while the replica is stopped: sold %v, %v; want ErrNotReplicated (and ErrUnavailable)", sold, err)
			}

			if err := set.Replica.Resume(); err != nil {
				t.Fatal(err)
			}
			after, sold, err := s.Receipt(t.Context(), ue.Attempt)
			if err != nil || !sold || after != 8 {
				t.Fatalf("receipt after the replica resumed: after %d, sold %v, %v; want 8, true", after, sold, err)
			}
			if _, err := svc.Reduce(t.Context()); err != nil {
				t.Fatalf("sale after the replica resumed: %v", err)
			}
		})
	}
}

// The acknowledged-means-durable claim under a real failover: buyers sell
// while the primary is SIGKILLed; Sentinel promotes the replica; the old
// primary rejoins as a replica and the sale goes on. Every answer "sold"
// must still be in the new primary's books (its receipt, and lucky
// counting it). With acks 0 (the control) loss is allowed and reported.
func TestFailoverLosesNoAcknowledgedSale(t *testing.T) {
	for _, c := range []struct {
		name    string
		acks    int
		mayLose bool
	}{{"acks1", 1, false}, {"acks0", 0, true}} {
		for _, m := range []string{"locked", "atomic"} {
			t.Run(c.name+"/"+m, func(t *testing.T) {
				mode := ackModes[0]
				if m == "atomic" {
					mode = ackModes[1]
				}
				const initial = 1_000_000
				s, set, _ := replicated(t, initial, mode.keys, c.acks)
				svc := newService(s, locallock.New(), func(cfg *stock.ServiceConfig) {
					mode.cfg(cfg)
					cfg.ConfirmTimeout = 2 * time.Second
				})
				r := failoverRun(t, s, set, svc)

				// The books are read on the promoted primary itself, not
				// through the client under test (whose pool may still
				// answer with the old primary's dial error for a second).
				books := promoted(t, set, mode.keys)
				lost := 0
				for _, id := range r.sold {
					_, ok, err := books.Receipt(t.Context(), id)
					if err != nil {
						t.Fatalf("receipt %s: %v", id, err)
					}
					if !ok {
						lost++
					}
				}
				st, err := books.Status(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("acks %d, %s: %d sold answers (%d after the kill), %d unconfirmed, %d other errors; lucky %d; lost %d acknowledged; stock+lucky %d of %d; first sale after the kill %v; first other error: %v",
					c.acks, m, len(r.sold), r.soldAfterKill, r.unconfirmed, r.other, st.Lucky, lost, st.Stock+st.Lucky, initial, r.recovery.Round(time.Millisecond), r.otherErr)
				if st.Stock+st.Lucky != initial {
					t.Errorf("stock %d + lucky %d = %d, want %d (the counters diverged)", st.Stock, st.Lucky, st.Stock+st.Lucky, initial)
				}
				if c.mayLose && r.halted {
					// The control lost a sale in the failover, and the
					// guard halted the sale rather than sell it again:
					// the halt is right only with a sale lost.
					if lost == 0 {
						t.Errorf("acks off: the sale halted after the failover with no acknowledged sale lost")
					}
					return
				}
				if r.soldAfterKill == 0 || r.halted {
					t.Errorf("no sale after the failover (halted: %v)", r.halted)
				}
				if c.mayLose {
					return
				}
				if lost != 0 || int64(len(r.sold)) > st.Lucky {
					t.Errorf("acks on: %d sold answers lost (%d sold answers, lucky %d); want none", lost, len(r.sold), st.Lucky)
				}
			})
		}
	}
}

// promoted is a store without replica acks on the Sentinels' current
// primary, directly.
func promoted(t *testing.T, set *servers.SentinelSet, keys redisstore.Keys) *redisstore.Store {
	t.Helper()
	addr, err := set.Master(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return redisstore.NewStore(rdb, keys)
}

type failoverResult struct {
	sold          []string // attempt ids answered sold
	soldAfterKill int
	unconfirmed   int
	other         int
	otherErr      error         // the first of them
	recovery      time.Duration // kill to the first sale answered after it
	// halted: a sale after the kill found Redis behind what was sold
	// (ErrStoreRewound), so the run stopped: nothing more can sell.
	halted bool
}

// failoverRun sells with 8 buyers, kills the primary once 200 sales are
// answered, rejoins it as a replica once every Sentinel has switched, and
// stops 200 sales after the first one answered after the kill, or when the
// sale halts (a sale lost in the failover, caught by the guard).
func failoverRun(t *testing.T, s *redisstore.Store, set *servers.SentinelSet, svc *stock.Service) failoverResult {
	t.Helper()
	ctx, cancel := context.WithCancel(testwait.Until(t))
	defer cancel()
	switched, err := set.WatchSwitch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		r        failoverResult
		killedAt atomic.Pointer[time.Time]
		kill     = make(chan struct{})
		done     = make(chan struct{})
		once     sync.Once
		killOnce sync.Once
	)
	var wg sync.WaitGroup
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
				sale, err := svc.Reduce(ctx)
				mu.Lock()
				switch {
				case err == nil:
					r.sold = append(r.sold, sale.Attempt)
					if k := killedAt.Load(); k != nil {
						if r.soldAfterKill == 0 {
							r.recovery = time.Since(*k)
						}
						r.soldAfterKill++
						if r.soldAfterKill >= 200 {
							once.Do(func() { close(done) })
						}
					} else if len(r.sold) >= 200 {
						killOnce.Do(func() { close(kill) })
					}
				case errors.Is(err, stock.ErrUnconfirmed):
					r.unconfirmed++
				case errors.Is(err, stock.ErrStoreRewound) && killedAt.Load() != nil:
					r.halted = true
					once.Do(func() { close(done) })
				default:
					r.other++
					if r.otherErr == nil {
						r.otherErr = err
					}
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-kill:
	case <-ctx.Done():
		t.Fatal("200 sales never answered")
	}
	now := time.Now()
	if err := set.Primary.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt.Store(&now)
	select {
	case addr := <-switched:
		t.Logf("+switch-master to %s on every Sentinel %v after the kill", addr, time.Since(now).Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatal("no failover")
	}
	if err := set.Rejoin(ctx, set.Primary); err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Error("fewer than 200 sales answered after the failover")
		once.Do(func() { close(done) })
	}
	wg.Wait()
	return r
}

// BenchmarkReplicaAcks is one buyer's sale, atomic and fenced (locked),
// with the replica acks off and on, behind the Sentinel harness: what the
// WAIT costs when the replica is healthy (loopback).
func BenchmarkReplicaAcks(b *testing.B) {
	for _, m := range ackModes[:2] {
		for _, acks := range []int{0, 1} {
			b.Run(fmt.Sprintf("%s/acks%d", m.name, acks), func(b *testing.B) {
				set := servertest.Sentinels(b, servers.SentinelOptions{})
				rdb := redis.NewClient(&redis.Options{Addr: set.Primary.Addr(), MaxRetries: -1})
				b.Cleanup(func() { _ = rdb.Close() })
				s := redisstore.NewStore(rdb, m.keys).WithReplicaAcks(redisstore.ReplicaAcks{Replicas: acks})
				if err := s.Reset(b.Context(), int64(b.N)+1); err != nil {
					b.Fatal(err)
				}
				svc := newService(s, locallock.New(), m.cfg)
				b.ResetTimer()
				for range b.N {
					if _, err := svc.Reduce(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// The window itself, made wide on purpose: the replication stream is held
// in a relay while sales are made, then cut as the primary is SIGKILLed,
// so the promoted replica never saw them. Without acks (the control) every
// one of them was answered sold and is lost; with acks 1 none was answered
// sold, and their receipts on the new primary say they did not sell.
func TestLaggingReplicaFailover(t *testing.T) {
	for _, acks := range []int{0, 1} {
		t.Run(fmt.Sprintf("acks%d", acks), func(t *testing.T) {
			var relay *servertest.Relay
			set := servertest.Sentinels(t, servers.SentinelOptions{
				// Long, or Sentinel re-points the replica past the relay.
				FailoverTimeout: time.Minute,
				ReplicaVia: func(primary string) string {
					relay = servertest.NewRelay(t, primary)
					return relay.Addr()
				},
			})
			const initial = 100
			keys := ledgerKeys(1)
			s := steady(redisstore.NewStore(sentinelClient(t, set), keys), acks)
			steadyReset(t, s, set, initial)
			lk := locallock.New()
			fenced := func(c *stock.ServiceConfig) { c.Fencing = true }
			if _, err := newService(s, lk, fenced).Reduce(t.Context()); err != nil {
				t.Fatalf("sale before the hold: %v", err)
			}
			if err := set.WaitReplicated(t.Context(), 1); err != nil {
				t.Fatal(err)
			}

			relay.Hold()
			held := newService(strict(s, acks, 200*time.Millisecond), lk, fenced)
			const during = 5
			var sold, unconfirmed []string
			for range during {
				sale, err := held.Reduce(t.Context())
				var ue *stock.UnconfirmedError
				switch {
				case err == nil:
					sold = append(sold, sale.Attempt)
				case errors.As(err, &ue):
					unconfirmed = append(unconfirmed, ue.Attempt)
				default:
					t.Fatalf("sale during the hold: %v", err)
				}
			}
			switched, err := set.WatchSwitch(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			relay.Cut()
			if err := set.Primary.Kill(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-switched:
			case <-testwait.Until(t).Done():
				t.Fatal("no failover")
			}

			books := promoted(t, set, keys)
			gone := func(ids []string) (n int) {
				for _, id := range ids {
					if _, ok, err := books.Receipt(t.Context(), id); err != nil {
						t.Fatal(err)
					} else if !ok {
						n++
					}
				}
				return n
			}
			lostSold := gone(sold)
			lost := lostSold + gone(unconfirmed)
			st, err := books.Status(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("acks %d: %d answered sold and %d unconfirmed while the replica lagged; after the failover lucky %d, %d of those sales gone (%d answered sold); stock+lucky %d of %d",
				acks, len(sold), len(unconfirmed), st.Lucky, lost, lostSold, st.Stock+st.Lucky, initial)
			if st.Lucky != 1 || st.Stock+st.Lucky != initial {
				t.Errorf("promoted primary: stock %d, lucky %d; want only the sale made before the hold (lucky 1, sum %d)", st.Stock, st.Lucky, initial)
			}
			if lost != during {
				t.Errorf("%d of the %d sales made during the hold survived; the relay held them from the replica", during-lost, during)
			}
			if acks > 0 && len(sold) != 0 {
				t.Errorf("acks on: %d sales answered sold while the replica lagged, want 0 (all unconfirmed)", len(sold))
			}
			if acks == 0 && len(sold) != during {
				t.Errorf("acks off: %d sales answered sold, want all %d (the control loses them)", len(sold), during)
			}
		})
	}
}

// A reset answered is on the replica: with acks 1 a reset
// while the replication stream is held answers ErrNotReplicated (a 503 in
// stockd), not success; a failover then promotes the replica with the old
// sale still in it, which is what the admin is told may happen. The
// control (acks 0) answers that reset as done and the failover brings the
// old sale back under it. A reset with the stream flowing is on the
// replica, read there directly, the moment it returns.
func TestResetWaitsForReplica(t *testing.T) {
	for _, acks := range []int{0, 1} {
		t.Run(fmt.Sprintf("acks%d", acks), func(t *testing.T) {
			var relay *servertest.Relay
			set := servertest.Sentinels(t, servers.SentinelOptions{
				FailoverTimeout: time.Minute, // or Sentinel re-points the replica past the relay
				ReplicaVia: func(primary string) string {
					relay = servertest.NewRelay(t, primary)
					return relay.Addr()
				},
			})
			keys := ledgerKeys(1)
			const timeout = 200 * time.Millisecond
			s := steady(redisstore.NewStore(sentinelClient(t, set), keys), acks)
			if err := s.Reset(t.Context(), 100); err != nil {
				t.Fatal(err)
			}
			replica := redis.NewClient(&redis.Options{Addr: set.Replica.Addr()})
			t.Cleanup(func() { _ = replica.Close() })
			if acks > 0 {
				if got, err := replica.Get(t.Context(), keys.Stock).Result(); err != nil || got != "100" {
					t.Fatalf("replica right after an acknowledged reset: stock %q, %v; want 100", got, err)
				}
			}
			svc := newService(s, locallock.New(), func(c *stock.ServiceConfig) { c.Fencing = true })
			if _, err := svc.Reduce(t.Context()); err != nil {
				t.Fatalf("sale before the hold: %v", err)
			}
			if err := set.WaitReplicated(t.Context(), 1); err != nil {
				t.Fatal(err)
			}

			relay.Hold()
			start := time.Now()
			err := strict(s, acks, timeout).Reset(t.Context(), 50)
			took := time.Since(start)
			if acks > 0 {
				if !errors.Is(err, redisstore.ErrNotReplicated) || !errors.Is(err, stock.ErrUnavailable) {
					t.Fatalf("reset with the replica held: %v; want ErrNotReplicated and ErrUnavailable", err)
				}
				// Refused at the short bound, not the default (2s) one: the
				// error names the bound its WAIT had. How long it took is
				// noted below.
				if !strings.Contains(err.Error(), "within "+timeout.String()) {
					t.Fatalf("reset with the replica held: %v; want not replicated within the %v ack timeout", err, timeout)
				}
			} else if err != nil {
				t.Fatalf("reset without acks: %v", err)
			}
			t.Logf("acks %d: reset with the replica held answered %v after %v", acks, err, took.Round(time.Millisecond))

			switched, err := set.WatchSwitch(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			relay.Cut()
			if err := set.Primary.Kill(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-switched:
			case <-testwait.Until(t).Done():
				t.Fatal("no failover")
			}
			st, err := promoted(t, set, keys).Status(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			// The hold worked: the promoted replica never saw the second
			// reset. With acks 0 that is a reset answered done and undone.
			if st.Stock != 99 || st.Lucky != 1 {
				t.Fatalf("promoted primary: stock %d, lucky %d; want the old sale (99, 1)", st.Stock, st.Lucky)
			}
		})
	}
}

// A replayed key answered while the replica lags was unconfirmed under a
// new attempt id, which no receipt ever names: GET /stock/receipts said
// "not sold" for good, though the key's order exists. The unconfirmed
// answer now names the original order, whose receipt is unsettled while
// the replica lags and sold once it catches up; and past the receipt's
// lifetime the ledger still answers it.
func TestUnconfirmedReplayNamesTheOriginalOrder(t *testing.T) {
	for _, m := range []struct {
		name string
		cfg  func(*stock.ServiceConfig)
	}{
		{"locked", func(c *stock.ServiceConfig) { c.Fencing = true }},
		{"atomic", func(c *stock.ServiceConfig) { c.Mode = stock.ModeAtomic }},
	} {
		t.Run(m.name, func(t *testing.T) {
			var relay *servertest.Relay
			set := servertest.Sentinels(t, servers.SentinelOptions{
				FailoverTimeout: time.Minute, // or Sentinel re-points the replica past the relay
				ReplicaVia: func(primary string) string {
					relay = servertest.NewRelay(t, primary)
					return relay.Addr()
				},
			})
			rdb := sentinelClient(t, set)
			keys := ledgerKeys(1)
			s := steady(redisstore.NewStore(rdb, keys), 1)
			steadyReset(t, s, set, 10)
			lk := locallock.New()
			buyer := stock.Buyer{User: "u1", Key: "k1"}
			first, err := newService(s, lk, m.cfg).ReduceFor(t.Context(), buyer)
			if err != nil {
				t.Fatalf("first sale: %v", err)
			}

			relay.Hold()
			held := strict(s, 1, 200*time.Millisecond)
			sale, err := newService(held, lk, m.cfg).ReduceFor(t.Context(), buyer)
			var ue *stock.UnconfirmedError
			if !errors.As(err, &ue) || ue.Attempt != first.OrderID {
				t.Fatalf("replay with the replica held: %+v, %v; want unconfirmed naming the original order %s", sale, err, first.OrderID)
			}
			if _, sold, err := held.Receipt(t.Context(), ue.Attempt); !errors.Is(err, redisstore.ErrNotReplicated) {
				t.Fatalf("its receipt with the replica held: sold %v, %v; want unsettled (ErrNotReplicated)", sold, err)
			}
			relay.Release()
			if after, sold, err := s.Receipt(t.Context(), ue.Attempt); err != nil || !sold || after != 9 {
				t.Fatalf("its receipt once the replica caught up: after %d, sold %v, %v; want sold, 9 left", after, sold, err)
			}
			// Past the receipt's lifetime (ReceiptTTL), the order answers.
			if err := rdb.Del(t.Context(), "stock:fence:receipt:"+first.OrderID).Err(); err != nil {
				t.Fatal(err)
			}
			if after, sold, err := s.Receipt(t.Context(), first.OrderID); err != nil || !sold || after != 9 {
				t.Fatalf("receipt with the receipt key gone: after %d, sold %v, %v; want sold from the ledger, 9 left", after, sold, err)
			}
		})
	}
}
