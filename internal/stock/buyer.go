package stock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// buyer.go: who buys, and the order each sale leaves in the ledger.
//
// A sale may name its buyer and carry an idempotency key. The per-user
// limit, the key's record and the order are checked and written by the
// same script that takes the unit, so a sale without its order, an order
// without its sale, a buyer past the limit or a key with two sales cannot
// exist, whatever the lock did. A sale without either is the articles'
// sale, as before (it still leaves an order when the ledger is on).

// Limits of a buyer's identity; the handler refuses longer ones (400).
const (
	MaxUserLen = 64  // printable ASCII, no space
	MaxKeyLen  = 255 // printable ASCII, no space (Stripe's bound)
)

// Buyer identifies who buys and the request. Both may be empty.
type Buyer struct {
	// User is the buyer's id: what the per-user limit counts and
	// OrdersByUser lists. Empty: anonymous (no limit applies).
	User string
	// Key is the request's idempotency key: a second sale with the same key
	// returns the first one's order (Sale.Replayed) and sells nothing. A
	// key is the buyer's own: the same key from another User (or from an
	// anonymous buyer) is another purchase, so no buyer can squat on
	// another's keys. Kept for ServiceConfig.IdempotencyTTL.
	Key string
}

// Order is one entry of the ledger: a unit sold. Its ID is the sale's
// attempt id (Sale.Attempt), unique across replicas and retries.
type Order struct {
	ID         string `json:"id"`
	Sale       string `json:"sale"`           // the sale (reset) it belongs to
	User       string `json:"user,omitempty"` // empty: anonymous
	Key        string `json:"key,omitempty"`  // idempotency key, if any
	Token      uint64 `json:"token"`          // fencing token (0 in atomic mode)
	Replica    string `json:"replica"`
	StockAfter int64  `json:"stock_after"`
	// Unit is the unit's number in the sale: the lucky count its sale made
	// (ledger.lua), unique across segments. 0 for an entry written before
	// units were numbered.
	Unit int64     `json:"unit,omitempty"`
	Time time.Time `json:"time"`
	// Entry is the order's stream entry id (what the durable consumer
	// acknowledges).
	Entry string `json:"entry"`
}

// Sentinel errors of buyer-aware sales; nothing was sold when they are
// returned.
var (
	// ErrLimitReached: the buyer already bought ServiceConfig.PerUserLimit
	// units of this sale.
	ErrLimitReached = errors.New("stock: per-user limit reached")
	// ErrNoOrder: no order with that id in the ledger.
	ErrNoOrder = errors.New("stock: no such order")
	// ErrNoLedger: the ledger is off (Keys.Orders empty).
	ErrNoLedger = errors.New("stock: ledger off")
)

// LedgerStats is the ledger at one instant.
type LedgerStats struct {
	Sale string // the current sale's id (changes on every Reset)
	// Orders is the units sold with an order: the stream's entries and
	// the ones trimmed from it once stored (TrimLedger).
	Orders  int64
	Trimmed int64 // of Orders: trimmed from the stream (their copy is durable)
	Buyers  int64 // distinct named buyers
	Lucky   int64 // units sold (read in the same round trip)
}

// OrderReader reads the ledger; *Store implements it.
type OrderReader interface {
	Order(ctx context.Context, id string) (Order, error)
	OrdersByUser(ctx context.Context, user string, offset, limit int) (orders []Order, total int64, err error)
	LedgerStats(ctx context.Context) (LedgerStats, error)
}

// ErrBadBuyer: a Buyer's User or Key breaks the limits above; nothing was
// sold. The handler refuses such values first (400); the service checks
// again because the ledger's records separate fields with spaces.
var ErrBadBuyer = errors.New("stock: bad buyer")

// Check reports whether b's User and Key are within MaxUserLen and
// MaxKeyLen and printable ASCII without spaces (either may be empty).
func (b Buyer) Check() error {
	for _, f := range []struct {
		name, v string
		max     int
	}{{"user", b.User, MaxUserLen}, {"key", b.Key, MaxKeyLen}} {
		if len(f.v) > f.max {
			return fmt.Errorf("%w: %s longer than %d", ErrBadBuyer, f.name, f.max)
		}
		for i := 0; i < len(f.v); i++ {
			if c := f.v[i]; c <= ' ' || c > '~' {
				return fmt.Errorf("%w: %s must be printable ASCII without spaces", ErrBadBuyer, f.name)
			}
		}
	}
	return nil
}

// Trimmed reports whether o is an order the stream no longer holds
// (OrdersByUser): only its ID and Sale are known.
func (o Order) Trimmed() bool { return o.Entry == "" }
