package stockd

import (
	"strings"
	"testing"
)

// Configurations whose keys collide once the derived names are counted
// (segments, the initial stock, the ledger, receipts, the lock's own keys)
// were accepted, since only the three base names were compared: stockd
// then sold with two roles on one key (segments 2 with lucky "stock:1"
// sold 200 units of a stock of 10). Each is now refused at start, exit
// status 2, naming both keys; the default sale keeps "stock" and "lucky".
// The items' family ("{item:"), registry and locks are reserved the same
// way: no configured key may enter them.
func TestKeyCollisionsAreRefused(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		want string // "" = accepted
	}{
		{"defaults", nil, ""},
		{"segments 2, lucky_key stock:1", []string{"STOCKD_STOCK_SEGMENTS=2", "STOCKD_STOCK_LUCKY_KEY=stock:1"},
			`config: stock.lucky_key: Redis key "stock:1" (the units sold) collides with "stock:1" (segment 1's stock) from stock.key`},
		{"lock.key stock", []string{"STOCKD_LOCK_KEY=stock"},
			`config: lock.key: Redis key "stock" (the lock key) collides with "stock" (the stock) from stock.key`},
		{"fence_key stock:orders", []string{"STOCKD_STOCK_FENCE_KEY=stock:orders"},
			`config: stock.fence_key: Redis key "stock:orders" (the fence) collides with "stock:orders" (the order ledger) from stock.key`},
		{"lucky_key stock:initial", []string{"STOCKD_STOCK_LUCKY_KEY=stock:initial"},
			`config: stock.lucky_key: Redis key "stock:initial" (the units sold) collides with "stock:initial" (the initial stock) from stock.key`},
		{"redisson, lock.key stock", []string{"STOCKD_LOCK_BACKEND=redisson", "STOCKD_LOCK_KEY=stock"},
			`config: lock.key: Redis key "stock:fence" (the lock of backend redisson) collides with "stock:fence" (the fence) from stock.fence_key`},
		{"lucky_key a receipt", []string{"STOCKD_STOCK_LUCKY_KEY=stock:fence:receipt:x"},
			`config: stock.fence_key: Redis key "stock:fence:receipt:"* (the receipts) collides with "stock:fence:receipt:x" (the units sold) from stock.lucky_key`},
		{"lucky_key an idempotency record", []string{"STOCKD_STOCK_LUCKY_KEY=stock:orders:idem:k1"},
			`config: stock.lucky_key: Redis key "stock:orders:idem:k1" (the units sold) collides with "stock:orders:idem:"* (the idempotency records) from stock.key`},
		{"segment 3's lock on lucky", []string{"STOCKD_STOCK_SEGMENTS=4", "STOCKD_LOCK_KEY=l", "STOCKD_STOCK_LUCKY_KEY=l:3"},
			`config: lock.key: Redis key "l:3" (segment 3's lock key) collides with "l:3" (the units sold) from stock.lucky_key`},
		{"stock.key on the audit stream", []string{"STOCKD_STOCK_KEY=seckill:audit", "STOCKD_ELECTION_BACKEND=etcd"},
			`config: election.backend: Redis key "seckill:audit" (the audit stream) collides with "seckill:audit" (the stock) from stock.key`},
		{"hash tag on stock.key only", []string{"STOCKD_STOCK_KEY={s1}:stock"},
			`config: stock.lucky_key: hash tag {} differs from stock.key's {s1}`},
		{"two hash tags", []string{"STOCKD_STOCK_KEY={s1}:stock", "STOCKD_STOCK_LUCKY_KEY={s1}:lucky", "STOCKD_STOCK_FENCE_KEY={s2}:fence"},
			`config: stock.fence_key: hash tag {s2} differs from stock.key's {s1}`},
		{"one hash tag for the sale", []string{"STOCKD_STOCK_KEY={s1}:stock", "STOCKD_STOCK_LUCKY_KEY={s1}:lucky", "STOCKD_STOCK_FENCE_KEY={s1}:stock:fence"}, ""},
		// The items' keys, their registry and their locks are reserved.
		{"stock.key in the items' family", []string{"STOCKD_STOCK_KEY={item:x}:stock", "STOCKD_STOCK_LUCKY_KEY={item:x}:lucky", "STOCKD_STOCK_FENCE_KEY={item:x}:stock:fence"},
			`config: stock.key: Redis key "{item:x}:stock" (the stock) collides with "{item:"* (the items' keys) from the items (docs/items.md)`},
		{"lucky_key the item registry", []string{"STOCKD_STOCK_LUCKY_KEY=seckill:items"},
			`config: stock.lucky_key: Redis key "seckill:items" (the units sold) collides with "seckill:items" (the item registry) from the items (docs/items.md)`},
		{"lock.key item", []string{"STOCKD_LOCK_KEY=item"},
			`config: lock.key: Redis key "{item:item:"* (the items' locks of backend redis) collides with "{item:"* (the items' keys) from the items (docs/items.md)`},
		{"stock.key under the items' locks", []string{"STOCKD_STOCK_KEY=seckill:lock:item:a"},
			`config: lock.key: Redis key "seckill:lock:item:"* (the items' lock keys) collides with "seckill:lock:item:a" (the stock) from stock.key`},
		// Not in the stock Redis, or not used: no collision.
		// Refused on any backend: ":item:" names items' registers and locks.
		{"etcd lock, stock.key under the items' locks", []string{"STOCKD_LOCK_BACKEND=etcd", "STOCKD_STOCK_KEY=seckill:lock:item:a"}, "stock.key"},
		{"etcd lock, lock.key stock", []string{"STOCKD_LOCK_BACKEND=etcd", "STOCKD_LOCK_KEY=stock"}, ""},
		{"lock on its own Redis, lock.key stock", []string{"STOCKD_LOCK_REDIS_ADDR=127.0.0.1:6380", "STOCKD_LOCK_KEY=stock"}, ""},
		{"atomic, lock.key stock", []string{"STOCKD_STOCK_MODE=atomic", "STOCKD_LOCK_KEY=stock"}, ""},
		{"lucky_key stock:1, one segment", []string{"STOCKD_STOCK_LUCKY_KEY=stock:1"}, ""},
		{"ledger off, fence_key stock:orders", []string{"STOCKD_STOCK_LEDGER=false", "STOCKD_STOCK_FENCE_KEY=stock:orders"}, ""},
		{"256 segments, redisson, election", []string{"STOCKD_STOCK_SEGMENTS=256", "STOCKD_LOCK_BACKEND=redisson", "STOCKD_ELECTION_BACKEND=etcd"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{"STOCKD_ADMIN_TOKEN=" + testAdminToken, "STOCKD_REPLICA=keys-test"}, tc.env...)
			if tc.want == "" {
				c, err := Load("", env)
				if err != nil {
					t.Fatal(err)
				}
				if err := Validate(c); err != nil {
					t.Fatalf("got %v, want accepted", err)
				}
				if tc.env == nil && (c.Stock.Key != "stock" || c.Stock.LuckyKey != "lucky") {
					t.Fatalf("default keys %q and %q, want stock and lucky", c.Stock.Key, c.Stock.LuckyKey)
				}
				return
			}
			c, err := Load("", env)
			if err == nil {
				err = Validate(c)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with\n%s", err, tc.want)
			}
		})
	}
}

// A bad name with many segments is reported a few times, not 256.
func TestKeyCollisionsAreBounded(t *testing.T) {
	c := validConfig(t)
	c.Stock.Segments, c.Lock.Backend, c.Lock.Key = 256, "redisson", c.Stock.Key
	err := Validate(c)
	if err == nil {
		t.Fatal("accepted lock.key = stock.key")
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != maxKeyCollisions+1 || !strings.Contains(err.Error(), "more Redis key collisions") {
		t.Fatalf("got %d lines, want %d and a count of the rest:\n%v", n, maxKeyCollisions+1, err)
	}
}
