package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// The default sale's names, derived from "stock", "lucky" and
// "stock:fence" by the one rule: the articles' "stock" and "lucky" stay.
func TestDeriveDefaultNames(t *testing.T) {
	k := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Segments: 2}.Derive(true)
	var got []string
	for _, n := range k.All() {
		s := n.Name
		if n.Prefix {
			s += "*"
		}
		got = append(got, s)
	}
	want := []string{
		"stock", "stock:1", "stock:initial",
		"stock:orders", "stock:orders:sale", "stock:orders:buyers", "stock:orders:index", "stock:orders:by-user", "stock:orders:trimmed", "stock:orders:idem:*",
		"stock:orders:states", "stock:orders:due", "stock:orders:payments", "stock:orders:refunds", "stock:orders:clock", "stock:orders:ended",
		"stock:epoch", "stock:halt", "stock:format", "stock:returned",
		"lucky", "stock:fence", "stock:fence:1", "stock:fence:receipt:*",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got names\n%v\nwant\n%v", got, want)
	}
	if o := redisstore.Overlaps(k.All()); len(o) != 0 {
		t.Fatalf("the default names overlap: %v", o)
	}
	if k := (redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}).Derive(false); k.Orders != "" || k.Initial != "stock:initial" {
		t.Fatalf("without the ledger: orders %q, initial %q; want none and stock:initial", k.Orders, k.Initial)
	}
}

func TestOverlaps(t *testing.T) {
	exact := func(s string) redisstore.KeyName { return redisstore.KeyName{Name: s} }
	prefix := func(s string) redisstore.KeyName { return redisstore.KeyName{Name: s, Prefix: true} }
	for _, tc := range []struct {
		a, b redisstore.KeyName
		want bool
	}{
		{exact("stock:1"), exact("stock:1"), true},
		{exact("stock"), exact("stock:1"), false},
		{prefix("stock:fence:receipt:"), exact("stock:fence:receipt:x"), true},
		{exact("stock:fence:receipt:x"), prefix("stock:fence:receipt:"), true},
		{prefix("stock:fence:receipt:"), exact("stock:fence"), false},
		{prefix("a:"), prefix("a:b:"), true},
		{prefix("a:b:"), prefix("a:"), true},
		{prefix("a:b:"), prefix("a:c:"), false},
	} {
		if got := len(redisstore.Overlaps([]redisstore.KeyName{tc.a, tc.b})) == 1; got != tc.want {
			t.Errorf("%v and %v: overlap %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// All is the whole list: after locked and atomic sales by named buyers
// with idempotency keys over two segments, every key in Redis is one of
// its names or under one of its prefixes. A key a sale makes and All does
// not list could collide unseen.
func TestAllNamesEveryKeyASaleWrites(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	keys := redisstore.Keys{Stock: "s", Lucky: "l", Fence: "f", Segments: 2}.Derive(true)
	s := redisstore.NewStore(rdb, keys)
	ctx := t.Context()
	if err := s.Reset(ctx, 20); err != nil {
		t.Fatal(err)
	}
	var tokens atomic.Uint64
	locker := fakeLocker(func(context.Context) (lock.Lease, error) { return newFakeLease(tokens.Add(1)), nil })
	for _, mode := range []stock.Mode{stock.ModeLocked, stock.ModeAtomic} {
		svc := newService(s, locker, func(c *stock.ServiceConfig) { c.Fencing, c.Mode = true, mode })
		for i := range 3 {
			b := stock.Buyer{User: fmt.Sprintf("u%d", i), Key: fmt.Sprintf("%s-%d", mode, i)}
			if _, err := svc.ReduceFor(ctx, b); err != nil {
				t.Fatalf("%s sale %d: %v", mode, i, err)
			}
		}
		if _, err := svc.Reduce(ctx); err != nil {
			t.Fatalf("%s anonymous sale: %v", mode, err)
		}
		// Segments are picked at random: sell on until segment 1 has a
		// fence (at the latest once segment 0's 10 units are gone), so the
		// test does not depend on the draws.
		for mode == stock.ModeLocked && rdb.Exists(ctx, "f:1").Val() == 0 {
			if _, err := svc.Reduce(ctx); err != nil {
				t.Fatalf("locked sale to reach segment 1: %v", err)
			}
		}
	}
	inRedis, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	names := keys.All()
	var kinds []string
	for _, key := range inRedis {
		i := slices.IndexFunc(names, func(n redisstore.KeyName) bool {
			return key == n.Name || (n.Prefix && strings.HasPrefix(key, n.Name))
		})
		if i < 0 {
			t.Errorf("Redis holds %q, which All does not name", key)
			continue
		}
		kinds = append(kinds, names[i].What)
	}
	// The test made every kind of key, or it proves little.
	for _, want := range []string{"segment 1's stock", "the receipts", "the idempotency records", "the order ledger", "segment 1's fence"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("no key of %s in Redis %v", want, inRedis)
		}
	}
}

// The Redis Cluster rule, as CLUSTER KEYSLOT applies it.
func TestHashTag(t *testing.T) {
	for key, want := range map[string]string{
		"stock": "", "{s1}:stock": "s1", "a{b}c{d}": "b", "{}x{y}": "", "x{": "", "x{y": "", "{s1}": "s1",
	} {
		if got := redisstore.HashTag(key); got != want {
			t.Errorf("HashTag(%q) = %q, want %q", key, got, want)
		}
	}
}
