package redisstore

import (
	"fmt"
	"strings"

	"seckill/internal/stock"
)

// keys.go: the one rule that names every Redis key of a sale from its base
// names, and the check that no two of them (with anything else kept in the
// same Redis) can name the same key. Two roles on one key sell wrongly
// without a single error: a lucky key that is also a segment's stock
// counts sales as stock.

// Derive fills every name of the sale that is left empty from its base
// names, Stock and Fence, as stockd names them: the initial stock is
// Stock+":initial", and with ledger the order ledger is Stock+":orders"
// (without it the ledger's names stay empty: no ledger). Then the names a
// Store derives itself (withDefaults).
func (k Keys) Derive(ledger bool) Keys {
	if k.Initial == "" {
		k.Initial = k.Stock + ":initial"
	}
	if ledger && k.Orders == "" {
		k.Orders = k.Stock + ":orders"
	}
	return k.withDefaults()
}

// withDefaults fills the names a Store derives from the ones set: the
// receipts from Fence, the ledger's keys from Orders; and Segments is at
// least 1.
func (k Keys) withDefaults() Keys {
	if k.Receipts == "" {
		k.Receipts = k.Fence + ":receipt:"
	}
	if k.Epoch == "" {
		k.Epoch = k.Stock + ":epoch"
	}
	if k.Halt == "" {
		k.Halt = k.Stock + ":halt"
	}
	if k.Format == "" {
		k.Format = k.Stock + ":format"
	}
	if k.Returned == "" {
		k.Returned = k.Stock + ":returned"
	}
	k.Segments = max(k.Segments, 1)
	if k.Orders == "" {
		return k
	}
	def := func(v *string, suffix string) {
		if *v == "" {
			*v = k.Orders + suffix
		}
	}
	def(&k.Sale, ":sale")
	def(&k.Buyers, ":buyers")
	def(&k.OrderIndex, ":index")
	def(&k.ByUser, ":by-user")
	def(&k.Trimmed, ":trimmed")
	def(&k.Idempotency, ":idem:")
	def(&k.States, ":states")
	def(&k.Due, ":due")
	def(&k.Payments, ":payments")
	def(&k.Refunds, ":refunds")
	def(&k.LifeNow, ":clock")
	def(&k.Ended, ":ended")
	return k
}

// KeyName is one Redis key, or with Prefix a family of keys made at run
// time (receipts, idempotency records): every key that starts with Name.
type KeyName struct {
	Name   string
	Prefix bool
	// Of names where the key comes from: the Keys field it derives from
	// ("Stock", "Lucky", "Fence", "Receipts", "Initial", "Orders"), or the
	// owner a caller gives it (a lock, the audit).
	Of string
	// What it holds, for messages: "segment 1's stock", "receipts".
	What string
}

func (n KeyName) String() string {
	if n.Prefix {
		return fmt.Sprintf("%q* (%s)", n.Name, n.What)
	}
	return fmt.Sprintf("%q (%s)", n.Name, n.What)
}

// All lists every Redis key a sale of k touches, by the names the Store
// uses (withDefaults): the stock and fence of every segment, lucky, the
// receipts, and, when set, the initial stock, the order ledger's keys and
// the window.
// Segments are listed by number up to k.Segments.
func (k Keys) All() []KeyName {
	k = k.withDefaults()
	var out []KeyName
	add := func(name, of, what string) { out = append(out, KeyName{Name: name, Of: of, What: what}) }
	add(k.Stock, "Stock", "the stock")
	for i := 1; i < k.Segments; i++ {
		add(stock.SegmentKey(k.Stock, i), "Stock", fmt.Sprintf("segment %d's stock", i))
	}
	if k.Initial != "" {
		add(k.Initial, "Initial", "the initial stock")
	}
	if k.Orders != "" {
		add(k.Orders, "Orders", "the order ledger")
		add(k.Sale, "Orders", "the sale id")
		add(k.Buyers, "Orders", "the buyers")
		add(k.OrderIndex, "Orders", "the order index")
		add(k.ByUser, "Orders", "the orders by user")
		add(k.Trimmed, "Orders", "the trimmed orders' count")
		out = append(out, KeyName{Name: k.Idempotency, Prefix: true, Of: "Orders", What: "the idempotency records"})
		add(k.States, "Orders", "the orders' states")
		add(k.Due, "Orders", "the reservations' deadlines")
		add(k.Payments, "Orders", "the payments")
		add(k.Refunds, "Orders", "the refunds owed")
		add(k.LifeNow, "Orders", "the reservations' clock")
		add(k.Ended, "Orders", "the ended orders MySQL does not hold yet")
	}
	add(k.Epoch, "Stock", "the sale's epoch")
	add(k.Halt, "Stock", "the sale's halt mark")
	add(k.Format, "Stock", "the sale's format")
	add(k.Returned, "Stock", "the units returned")
	if k.Window != "" {
		add(k.Window, "Stock", "the sale's window")
	}
	add(k.Lucky, "Lucky", "the units sold")
	add(k.Fence, "Fence", "the fence")
	for i := 1; i < k.Segments; i++ {
		add(stock.SegmentKey(k.Fence, i), "Fence", fmt.Sprintf("segment %d's fence", i))
	}
	out = append(out, KeyName{Name: k.Receipts, Prefix: true, Of: "Receipts", What: "the receipts"})
	return out
}

// Overlap is two names that can name the same key.
type Overlap struct{ A, B KeyName }

// Overlaps returns every pair of names that can name one key, A listed
// before B: two equal names, a name under a family's prefix, or two
// families one of whose prefixes starts the other.
func Overlaps(names []KeyName) []Overlap {
	var out []Overlap
	for i, a := range names {
		for _, b := range names[i+1:] {
			if overlap(a, b) {
				out = append(out, Overlap{A: a, B: b})
			}
		}
	}
	return out
}

func overlap(a, b KeyName) bool {
	switch {
	case a.Name == b.Name:
		return true
	case a.Prefix && strings.HasPrefix(b.Name, a.Name):
		return true
	case b.Prefix && strings.HasPrefix(a.Name, b.Name):
		return true
	}
	return false
}

// HashTag is the part of key a Redis Cluster hashes to pick its slot: the
// text between the first '{' and the next '}' when it is not empty, else
// "" (the whole key is hashed). A sale's scripts touch all its keys at
// once, which a Cluster allows only within one slot; since every derived
// name appends to a base name, base names that share one tag make every
// key of the sale share it ("{s1}:stock", "{s1}:lucky", "{s1}:fence").
func HashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return ""
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return ""
	}
	return key[open+1 : open+1+end]
}

// Items: sales beside the default one, each named by an id (ItemKeys).
const (
	// ItemKeyPrefix starts every key of every item: the family that no
	// configured key may enter (stockd checks it at start).
	ItemKeyPrefix = "{item:"
	// ItemRegistry is the hash of items, id -> settings (Item, as JSON)
	// as last written: the list every replica reads (items are created
	// through the API, not configured); each item's own settings are in
	// its slot (ItemMetaKey), which is what a sale reads.
	ItemRegistry = "seckill:items"
	// ItemArchive is the hash of archived items, id -> settings as
	// archived (Items.Archive): out of the registry and its bound, kept
	// so that their ids, books and orders stay findable.
	ItemArchive = "seckill:items:archived"
	// MaxItemIDLen bounds an item id (CheckItemID).
	MaxItemIDLen = 32
)

// ItemKeys names item id's keys by the rule of Derive, from base names
// that carry one hash tag of their own, so that a Redis Cluster can place
// the whole item on one slot: stock "{item:<id>}:stock", lucky
// "{item:<id>}:lucky", fence "{item:<id>}:stock:fence", and its window
// "{item:<id>}:stock:window". They do not depend on the default sale's
// names, nor on a hash tag those carry ("{s1}:stock" gives the same item
// keys as "stock"): base gives only whether the order ledger is on
// (base.Orders set). An item is one segment. id must pass CheckItemID.
func ItemKeys(base Keys, id string) Keys {
	tag := ItemKeyPrefix + id + "}"
	return Keys{
		Stock: tag + ":stock", Lucky: tag + ":lucky", Fence: tag + ":stock:fence", Window: tag + ":stock:window",
	}.Derive(base.Orders != "")
}

// ItemMetaKey holds item id's settings (Item and its reset's epoch, as
// JSON), in the item's slot: written with its sale's keys in one MULTI.
func ItemMetaKey(id string) string { return ItemKeyPrefix + id + "}:meta" }

// ItemLockKey is the lock key of item id's sale, under the default sale's
// lock key: "<lock.key>:item:<id>".
func ItemLockKey(lockKey, id string) string { return lockKey + ItemNameInfix + id }

// ItemWitnessName is the name of item id's witness register (its etcd key
// or MySQL row), under the default sale's: "<name>:item:<id>".
func ItemWitnessName(name, id string) string { return name + ItemNameInfix + id }

// ItemNameInfix joins the default sale's lock key or witness name to an
// item's id (ItemLockKey, ItemWitnessName). Those live on servers other
// deployments may share, so stockd refuses a stock.key or lock.key that
// holds it: "shop:item:a" would be deployment "shop"'s item a.
const ItemNameInfix = ":item:"

// CheckItemID refuses an item id that is not 1..32 characters of a-z, 0-9
// and '-', starting with a letter or digit: ids name Redis keys and URL
// paths, and never need escaping in either. The error wraps ErrBadItem.
func CheckItemID(id string) error {
	ok := id != "" && len(id) <= MaxItemIDLen && id[0] != '-'
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'
	}
	if !ok {
		return fmt.Errorf("%w: id %q: want 1..%d of a-z, 0-9 and '-', not starting with '-'", stock.ErrBadItem, truncate(id, 40), MaxItemIDLen)
	}
	return nil
}
