package stockd

import (
	"fmt"
	"slices"
	"strings"

	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// saleKeys names the sale's Redis keys from stock.key, stock.lucky_key,
// stock.fence_key and stock.segments by the one rule (redisstore.Keys.Derive);
// ledger says whether the order ledger's keys are among them.
func saleKeys(cfg *Config, ledger bool) redisstore.Keys {
	return redisstore.Keys{
		Stock: cfg.Stock.Key, Lucky: cfg.Stock.LuckyKey, Fence: cfg.Stock.FenceKey, Segments: cfg.Stock.Segments,
	}.Derive(ledger)
}

// SaleKeys are the sale's Redis keys under cfg, the ledger's with it on:
// how a reader from outside stockd (the lab's census) opens the sale that
// cfg's replicas sell.
func SaleKeys(cfg *Config) redisstore.Keys { return saleKeys(cfg, cfg.Stock.Ledger) }

// initialKey holds the stock of the last reset, for the election's audit
// job (stock + lucky must equal it).
func initialKey(cfg *Config) string { return saleKeys(cfg, false).Initial }

// ordersKey is the ledger's stream, "" with the ledger off.
func ordersKey(cfg *Config) string { return saleKeys(cfg, cfg.Stock.Ledger).Orders }

// keyOrigins names the configuration key each redisstore.KeyName.Of comes from.
var keyOrigins = map[string]string{
	"Stock": "stock.key", "Initial": "stock.key", "Orders": "stock.key",
	"Lucky":    "stock.lucky_key",
	"Fence":    "stock.fence_key",
	"Receipts": "stock.fence_key",
	"lock":     "lock.key",
	"audit":    "election.backend",
	"items":    "the items (docs/items.md)",
}

// maxKeyCollisions bounds the collisions reported: one bad name with 256
// segments would otherwise fill the screen with its 256 copies.
const maxKeyCollisions = 5

// validateKeys refuses a configuration two of whose keys in the stock
// Redis can name the same key, derived names included: a lucky key that is
// also a segment's stock, a lock or fence on the ledger's stream. Each
// collision names both keys and where they come from.
func validateKeys(c *Config, bad func(key, format string, args ...any)) {
	if c.Stock.Key == "" || c.Stock.LuckyKey == "" || c.Stock.FenceKey == "" || c.Lock.Key == "" ||
		c.Stock.Segments < 1 || c.Stock.Segments > 256 {
		return // refused already, by name
	}
	// One hash tag for the sale's base names, or none: with one, every
	// key of the sale lands in one Redis Cluster slot, which its scripts
	// need; a sale half tagged would be refused by a Cluster at its first
	// script (CROSSSLOT), and on one Redis says a mistake was made.
	if tag := redisstore.HashTag(c.Stock.Key); tag != "" || redisstore.HashTag(c.Stock.LuckyKey) != "" || redisstore.HashTag(c.Stock.FenceKey) != "" {
		for _, k := range []struct{ name, val string }{{"stock.lucky_key", c.Stock.LuckyKey}, {"stock.fence_key", c.Stock.FenceKey}} {
			if t := redisstore.HashTag(k.val); t != tag {
				bad(k.name, "hash tag {%s} differs from stock.key's {%s}: a sale's keys must share one tag (e.g. {s1}:stock, {s1}:lucky, {s1}:stock:fence) or have none", t, tag)
			}
		}
	}
	overlaps := redisstore.Overlaps(stockRedisNames(c))
	for i, o := range overlaps {
		if i == maxKeyCollisions {
			bad(keyOrigins[o.B.Of], "and %d more Redis key collisions", len(overlaps)-i)
			break
		}
		bad(keyOrigins[o.B.Of], "Redis key %s collides with %s from %s: every key the sale keeps in Redis must be distinct, and none under another's prefix",
			o.B, o.A, keyOrigins[o.A.Of])
	}
}

// stockRedisNames lists every key stockd keeps in the stock Redis: the
// items' (first, so a configured key that enters their family is the one
// named), the sale's (with the ledger's when stock.ledger is on), a Redis
// lock's when it lives there too, the items' locks beside it, and the
// audit's when an election runs it.
func stockRedisNames(c *Config) []redisstore.KeyName {
	names := []redisstore.KeyName{
		{Name: redisstore.ItemKeyPrefix, Prefix: true, Of: "items", What: "the items' keys"},
		{Name: redisstore.ItemRegistry, Of: "items", What: "the item registry"},
		{Name: redisstore.ItemArchive, Of: "items", What: "the archived items"},
	}
	names = append(names, saleKeys(c, c.Stock.Ledger).All()...)
	spec, ok := backends[c.Lock.Backend]
	sameRedis := c.Lock.RedisAddr == "" || (c.Redis.Sentinel.Master == "" && !onCluster(c) && c.Lock.RedisAddr == c.Redis.Addr)
	if ok && spec.redisKeys != nil && sameRedis && c.Stock.Mode != string(stock.ModeAtomic) {
		for i := range c.Stock.Segments {
			key := stock.SegmentKey(c.Lock.Key, i)
			what := "the lock"
			if i > 0 {
				what = fmt.Sprintf("segment %d's lock", i)
			}
			// The configured name itself is reserved whatever the backend
			// derives from it: redisson's lock is that very key, and a
			// switch of lock.backend must not turn a configuration that
			// was accepted into a collision.
			names = append(names, redisstore.KeyName{Name: key, Of: "lock", What: what + " key"})
			for _, k := range spec.redisKeys(key) {
				if k != key {
					names = append(names, redisstore.KeyName{Name: k, Of: "lock", What: what + " of backend " + c.Lock.Backend})
				}
			}
		}
		names = append(names, itemLockNames(c.Lock.Key, c.Lock.Backend, spec.redisKeys)...)
	}
	if c.Election.Backend != "none" {
		stream, term := auditKeys(c)
		names = append(names,
			redisstore.KeyName{Name: stream, Of: "audit", What: "the audit stream"},
			redisstore.KeyName{Name: term, Of: "audit", What: "the audit's terms"})
	}
	return names
}

// itemLockNames are the families of the items' lock keys in the stock
// Redis (redisstore.ItemLockKey): "<lock.key>:item:" itself, reserved whatever
// the backend, and each name the backend derives from it, cut after the
// ":item:" all ids follow.
func itemLockNames(lockKey, backend string, derive func(string) []string) []redisstore.KeyName {
	p := redisstore.ItemLockKey(lockKey, "")
	names := []redisstore.KeyName{{Name: p, Prefix: true, Of: "lock", What: "the items' lock keys"}}
	for _, k := range derive(p) {
		i := strings.Index(k, p)
		if i < 0 {
			continue
		}
		fam := k[:i+len(p)]
		if !slices.ContainsFunc(names, func(n redisstore.KeyName) bool { return n.Name == fam }) {
			names = append(names, redisstore.KeyName{Name: fam, Prefix: true, Of: "lock", What: "the items' locks of backend " + backend})
		}
	}
	return names
}
