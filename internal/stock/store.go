package stock

import (
	"context"
	"strconv"
	"time"
)

// store.go: what the sale keeps, as the Service sells from it. The
// Service sees the store through Store and Segment; package redisstore
// keeps them in Redis.

// DefaultIdempotencyTTL is how long an idempotency key's record is kept
// when ServiceConfig.IdempotencyTTL is zero.
const DefaultIdempotencyTTL = 24 * time.Hour

// Fence identifies the lease a read or write is made under.
type Fence struct {
	// Lock names the token space: the backend and its lock key (and, where a
	// backend knows it, its cluster), e.g. "redis/stock:lock". Tokens of
	// different locks never compare: the store refuses a lock other than the
	// one its fence recorded.
	Lock  string
	Token uint64 // the lease's fencing token
	// Lease is unique per acquisition (the sale's attempt id). Two leases
	// with one token mean the lock service handed the token out twice; the
	// store refuses both. It also names the write's receipt.
	Lease string
	// Quiet, if positive, lets a read that would be refused as stale or as
	// another lock's restart the fence at its token, once no read at all
	// has been accepted for that long (about one lock TTL): how the sale
	// recovers by itself from a lock service that lost its state. Zero
	// keeps the fence strict forever.
	Quiet time.Duration
}

// Reading is the outcome of an accepted Read.
type Reading struct {
	Stock int64
	// Restarted: the fence had been quiet and this read restarted it at its
	// own token (see Fence.Quiet) — a lock service lost state, or another
	// lock took over.
	Restarted bool
}

// Status is a snapshot of the sale.
type Status struct {
	Stock int64 `json:"stock"`
	Lucky int64 `json:"lucky"`
	// Returned is the units reservations gave back (0 without them):
	// lucky counts units taken, so stock + lucky - returned = initial.
	Returned int64 `json:"returned,omitempty"`
}

// SegmentKey names segment i's copy of a key (the stock key, the fence key,
// the lock key): the key itself for segment 0, so that one segment is the
// unsegmented store, key+":i" for the others. An auditor summing the
// segments derives their keys from it.
func SegmentKey(key string, i int) string {
	if i == 0 {
		return key
	}
	return key + ":" + strconv.Itoa(i)
}

// SegmentShares splits n units over segments: each gets n/segments, and the
// first n%segments one more, so shares differ by at most one and sum to n.
func SegmentShares(n int64, segments int) []int64 {
	segments = max(segments, 1)
	shares := make([]int64, segments)
	base, extra := n/int64(segments), n%int64(segments)
	for i := range shares {
		shares[i] = base
		if int64(i) < extra {
			shares[i]++
		}
	}
	return shares
}

// Verdict kinds: what one member of a ledger write got (ledger.lua).
const (
	VerdictSold    = "sold"
	VerdictReplay  = "replay"
	VerdictLimit   = "limit"
	VerdictSoldOut = "soldout"
	VerdictEnded   = "ended" // the sale's window ended (window.lua)
)

// Verdict is one member's outcome of a ledger write.
type Verdict struct {
	Kind  string
	Order string // sold, replay: the order id (the original one for a replay)
	After int64  // sold, replay: the stock after that order
	Token uint64 // sold, replay: that order's fencing token
	Ends  int64  // ended: the window's ends_at, unix ms
	PayBy int64  // sold with a payment window: the order is reserved until then, unix ms
}

// Member is one buyer of a ledger write and the order id its unit gets.
type Member struct {
	Buyer
	ID string
}

// LedgerArgs are the sale's settings the ledger scripts need besides the
// members.
type LedgerArgs struct {
	Limit   int           // per-user limit, 0 none
	TTL     time.Duration // idempotency record TTL
	Replica string
	Now     time.Time
	// PaymentWindow, when positive, reserves every unit sold until a
	// payment, a cancel or this long after the sale (reservations).
	PaymentWindow time.Duration
}

// Store is the sale's stock as the Service sells from it: one Segment
// per stock segment (ServiceConfig.Store; *redisstore.Store is one).
type Store interface {
	// Segments is how many segments the stock is split over; at least 1.
	Segments() int
	// Segment is segment i's store, 0 <= i < Segments().
	Segment(i int) Segment
	// SegmentStocks reads every segment's stock at one instant: a sale
	// is sold out only when all are 0 then (segmented.go).
	SegmentStocks(ctx context.Context) ([]int64, error)
	// Ledger reports whether sales write the order ledger; a named buyer
	// or an idempotency key needs it.
	Ledger() bool
}

// Segment is one stock segment's store. Each write is exactly-once per
// lease or attempt id: a retry of one whose answer was lost answers as the
// first did and sells nothing more (confirm.go retries on that).
type Segment interface {
	// Read is the fenced read under f; replays says a buyer of the sale
	// has an idempotency key the ledger may replay, so a sale whose
	// window ended is read as usual and its write answers each buyer.
	Read(ctx context.Context, f Fence, replays bool) (Reading, error)
	// Write sets the stock to newStock under f and counts units sales
	// (units 0: one sale, as a single buyer's write has always been
	// sent), without the ledger.
	Write(ctx context.Context, f Fence, newStock int64, units int) error
	// WriteLedger is the fenced write with the ledger: each member's
	// verdict, with the stock read as read.
	WriteLedger(ctx context.Context, f Fence, read int64, members []Member, la LedgerArgs) ([]Verdict, error)
	// ReadUnfenced and WriteUnfenced are the articles' plain GET and SET,
	// for a lock whose tokens cannot be trusted: how they oversell.
	ReadUnfenced(ctx context.Context) (int64, error)
	WriteUnfenced(ctx context.Context, newStock int64, units int) error
	// SellAtomic sells one unit under attempt id in one script, no lock:
	// the stock after it. SellLedger is it with the ledger.
	SellAtomic(ctx context.Context, id string) (int64, error)
	SellLedger(ctx context.Context, id string, b Buyer, la LedgerArgs) (Verdict, error)
	// Peek reads the stock without the lock (peek.go), and whether b's
	// idempotency record exists (b without a key: false).
	Peek(ctx context.Context, b Buyer) (stock int64, record bool, err error)
	// AwaitWitness holds a sold answer until the witness has recorded
	// the sale's ceiling; nil at once without a witness.
	AwaitWitness(ctx context.Context) error
	// HaltWitnessLost halts the sale for every replica because the
	// witness lost it (err wraps ErrWitnessLost).
	HaltWitnessLost(ctx context.Context, err error) error
}
