// Package stock is the inventory of the flash sale: a Store over Redis with
// fenced read/write primitives for the locked mode and a one-script sale for
// the atomic mode, and a Service that runs one sale end to end.
//
// The rule of this package: a reply that never came back does not mean the
// command did not run. Every script that changes the stock is idempotent by
// the identity it carries — the sale's attempt id, as the lease id in the
// fence and as the name of its receipt — and answers a second run with the
// first run's result. The Redis client must not retry on its own (stockd
// sets MaxRetries -1); the Service retries its own calls with the same
// identity until a definite answer or ServiceConfig.ConfirmTimeout, and then
// reports ErrUnconfirmed, never a sale it could not confirm. A combined sale
// (ServiceConfig.Combine) is one write for a batch of buyers under the
// batch's attempt id; each buyer's attempt id names its place in the batch
// (MemberAttempt), and its receipt is read from the batch's.
//
// The fence (fenced_read.lua, fenced_write.lua) compares identities, not
// only numbers: the write is a compare-and-set on the lease that made the
// read, so two holders with equal tokens cannot both write, and tokens of
// another lock identity are refused. A lock service that lost its state is
// followed again by moving its tokens past the fence (lock.TokenAdvancer) or,
// once the fence has been quiet for a lock TTL, by restarting it.
//
// Segmented stock (Keys.Segments) splits the stock over N keys, each with
// its own fence and lock key, so N critical sections sell at once; a sale
// answers sold out only when one read of every segment finds them all empty
// (segmented.go).
//
// Design notes follow the package clause.
package redisstore

// Design notes.
//
// The order ledger (Keys.Orders) is written by the same script that
// takes the unit — the fenced write, or the atomic sale — never by a
// second call, so a unit sold without its order, or an order without its
// unit, cannot exist; the per-user limit and the idempotency key are
// checked there too, against everything earlier runs wrote, so no lock
// (or lack of one) and no segment or batch boundary can let a buyer past
// the limit or a key sell twice (ledger.lua, ledger.go). The unfenced
// write, the articles' oversell kept as the lab's control, writes none.
//
// Items (items.go) are sales beside the default one, each with keys of
// its own under one hash tag (ItemKeys), settings in a registry every
// replica reads, and a window the selling scripts check by Redis's clock
// (window.lua); the default sale has no window, and its scripts read no
// key for one.
//
// Replica acks (Store.WithReplicaAcks) make the selling scripts
// wait for replicas with WAIT on the same connection, so a sale answered
// sold survives a failover to a replica that acknowledged it; one not
// acknowledged in time is unconfirmed, never sold (replicas.go).

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

var (
	//go:embed lua/snapshot.lua
	snapshotSrc string
	//go:embed lua/orders.lua
	ordersSrc string
	//go:embed lua/trim.lua
	trimSrc string

	// The scripts that sell, or read to sell, are each a file of lua/run,
	// sent as it is written, so the line a Redis error names is that
	// file's. Each is generated from its parts (scripts_test.go, make
	// docs): the results table (results.go), int.lua's readInt, guard.lua,
	// lifeclock.lua, ledger.lua's sellTo, window.lua in two variants
	// (scriptSet), and the script's own file; a test fails when one
	// differs. lifecycle.lua (reservations.go) is lifeclock.lua and itself.
	//go:embed lua/run/read.lua
	runRead string
	//go:embed lua/run/write.lua
	runWrite string
	//go:embed lua/run/atomic.lua
	runAtomic string
	//go:embed lua/run/peek.lua
	runPeek string
	//go:embed lua/run/read_windowed.lua
	runReadWindowed string
	//go:embed lua/run/write_windowed.lua
	runWriteWindowed string
	//go:embed lua/run/atomic_windowed.lua
	runAtomicWindowed string
	//go:embed lua/run/peek_windowed.lua
	runPeekWindowed string
	//go:embed lua/run/lifecycle.lua
	runLifecycle string

	plainScripts    = scriptSet{read: redis.NewScript(runRead), write: redis.NewScript(runWrite), atomic: redis.NewScript(runAtomic), peek: redis.NewScript(runPeek)}
	windowedScripts = scriptSet{read: redis.NewScript(runReadWindowed), write: redis.NewScript(runWriteWindowed), atomic: redis.NewScript(runAtomicWindowed), peek: redis.NewScript(runPeekWindowed)}
	snapshot        = redis.NewScript(snapshotSrc)
	ordersScript    = redis.NewScript(ordersSrc)
	trimScript      = redis.NewScript(trimSrc)
	lifecycleScript = redis.NewScript(runLifecycle)
)

// scriptSet is the scripts that check a sale's window (window.lua): the
// plain variant, for a sale without one (Keys.Window empty, the default
// sale, whose scripts read no window key), or the windowed one, which
// takes the window key last of its KEYS.
type scriptSet struct {
	read, write, atomic, peek *redis.Script
}

// scripts is the variant of s's sale.
func (s *Store) scripts() scriptSet {
	if s.keys.Window != "" {
		return windowedScripts
	}
	return plainScripts
}

// receiptKept appends what a selling script needs to keep its receipt by
// the sales' clock (salesclock.lua), last before a window's: the
// receipts' index and this process's clock.
func (s *Store) receiptKept(keys []string, args []any) ([]string, []any) {
	return append(keys, s.receiptIndex()), append(args, s.clock.now().UnixMilli())
}

// receiptIndex names the receipts' index (salesclock.lua): under their
// prefix, and with a '-', which no attempt or lease id holds.
func (s *Store) receiptIndex() string { return s.keys.Receipts + "by-time" }

// windowed appends, when the sale has a window, its key to a script's keys
// and this process's clock and the skew bound to its args (window.lua:
// they are the last).
func (s *Store) windowed(keys []string, args []any) ([]string, []any) {
	if s.keys.Window == "" {
		return keys, args
	}
	return append(keys, s.keys.Window), append(args, s.clock.now().UnixMilli(), s.clock.MaxSkew.Milliseconds())
}

// ReceiptTTL is how long a write's receipt outlives it: far longer than any
// retry of that write (Service.ConfirmTimeout), so a late retry still finds
// it and sells nothing twice. It is measured by the sales' clock, not by a
// Redis TTL (salesclock.lua): a later sale removes a receipt older than it.
const ReceiptTTL = 10 * time.Minute

// MaxStock is the largest stock a sale can hold, 2^53-1. The scripts read
// the stock as a Lua number, a double, exact only up to 2^53 (above it
// 2^63-1 reads as -2^63 and every sale answered sold out), and a JSON
// client reading the stock in an answer holds a double too. Reset refuses
// more, and the scripts refuse a stock key holding more (ErrNotInteger).
const MaxStock = 1<<53 - 1

// Keys names the Redis keys of one sale. All must be non-empty; in a Redis
// Cluster they would need a common hash tag, since the scripts touch several.
// Derive names them all from the base names by one rule, and All lists
// them, for the check that none collides with another (keys.go).
type Keys struct {
	Stock string // remaining units, an integer
	Lucky string // units sold, an integer
	Fence string // hash {lock, token, lease}: the highest token seen and its reader
	// Receipts prefixes the per-attempt receipt keys that make writes
	// exactly-once; default Fence + ":receipt:".
	Receipts string
	// Epoch holds the sale's epoch, new on every Reset, and Halt exists
	// once a selling script found the Redis rewound (rewind.go); defaults
	// Stock + ":epoch" and Stock + ":halt", shared by every segment.
	Epoch, Halt string
	// Format holds the sale's format, written with every Reset and read
	// with the epoch (formats.go); default Stock + ":format".
	Format string
	// Returned counts the units reservations gave back to the stock
	// (reservations.go), only rising within a sale; default Stock +
	// ":returned". Missing reads 0: a sale without reservations.
	Returned string
	// Initial, if set, receives the stock each Reset starts from, so an
	// auditor can check stock + lucky == initial.
	Initial string
	// Window, if set, is the sale's window: a hash of starts_at and
	// ends_at (unix ms, 0 = no bound) that the selling scripts check by
	// Redis's clock, refusing a sale outside it (ErrNotStarted, ErrEnded;
	// window.lua). A missing key is always open; Store.Reset leaves it as
	// it is. Empty, as for the default sale: no window, and the scripts
	// read no key for it. Items have one (ItemKeys), written with their
	// reset (Items.Create, Items.Reset).
	Window string
	// Segments splits the stock over that many keys, each with its own
	// fence (and, in the Service, its own lock key); 0 means 1. Segment 0
	// is Stock and Fence themselves, so one segment is exactly the
	// unsegmented store; segment i > 0 is Stock+":i" fenced by Fence+":i".
	// Lucky, Receipts, Initial and the ledger keys are shared by every
	// segment.
	Segments int

	// Orders is the order ledger's stream: every unit sold leaves an entry
	// (fields id, sale, user, key, token, replica, stock_after, time),
	// written by the script that takes the unit. Empty: no ledger, sales
	// exactly as before, and a sale to a named buyer or with a key is
	// refused (ErrNoLedger). Unfenced sales (fencing off) write no order
	// even when it is set: they are the articles' oversell, kept as the
	// lab's control.
	Orders string
	// The other ledger keys; each defaults to Orders plus the suffix shown.
	Sale        string // the current sale's id, new on every Reset (":sale")
	Buyers      string // hash: user -> units bought (":buyers")
	OrderIndex  string // hash: order id -> stream entry id (":index")
	ByUser      string // sorted set listing each user's orders (":by-user")
	Trimmed     string // entries trimmed from the stream once stored (":trimmed"; TrimLedger)
	Idempotency string // prefix of the idempotency records (":idem:")
	// The reservations' keys (reservations.go), used only with a payment
	// window. A Reset deletes the states and the due set; the payments,
	// the refunds owed, the clock and the ended orders not yet in MySQL
	// outlive it.
	States   string // hash: order id -> its state (":states")
	Due      string // sorted set: reserved order id -> pay_by (":due")
	Payments string // hash: payment id -> order id (":payments")
	Refunds  string // hash: payment id -> order and state it met (":refunds")
	LifeNow  string // the reservations' clock, forward only (":clock"; lifeclock.lua)
	// Ended: sorted set of the ends MySQL does not hold yet, with durable
	// states only (WithDurableStates; ":ended").
	Ended string
}

// Store is the stock in Redis. It is safe for concurrent use.
type Store struct {
	rdb  redis.UniversalClient
	keys Keys
	// segs are the segments' stores, segs[0] this one; a segment's own
	// store is a one-segment store of its keys (see segment).
	segs []*Store
	// acks makes sales wait for replicas (replicas.go); zero: they do not.
	acks ReplicaAcks
	// mark is what this process saw of the sale (rewind.go), shared by
	// the segments; segIndex is this store's segment.
	mark     *watermark
	segIndex int
	// root is the whole store, whose segs are every segment (itself for
	// the whole store): a segment learning the sale checks them all.
	root *Store
	// wit, if set, keeps the sale's epoch and ceilings where they do not
	// roll back with Redis (witness.go), shared by the segments.
	wit *witness
	// pin, if set, is the only epoch the store sells in (pinEpoch).
	pin string
	// clock is what a windowed sale's scripts check Redis's clock
	// against (WithWindowClock).
	clock WindowClock
	// units, if set, are the durable orders learning the sale checks
	// Redis against (orderscheck.go).
	units DurableUnits
	// durableStates: every end of a reservation also goes into
	// Keys.Ended for MySQL (WithDurableStates).
	durableStates bool
}

// NewStore returns a Store over rdb using keys. The caller owns rdb.
func NewStore(rdb redis.UniversalClient, keys Keys) *Store {
	keys = keys.withDefaults()
	s := &Store{rdb: rdb, keys: keys, mark: newWatermark(keys.Segments)}
	s.root = s
	s.segs = make([]*Store, keys.Segments)
	s.segs[0] = s
	for i := 1; i < keys.Segments; i++ {
		k := keys
		k.Stock, k.Fence, k.Segments = stock.SegmentKey(keys.Stock, i), stock.SegmentKey(keys.Fence, i), 1
		seg := &Store{rdb: rdb, keys: k, mark: s.mark, segIndex: i, root: s}
		seg.segs = []*Store{seg}
		s.segs[i] = seg
	}
	return s
}

// Ping checks that the stock Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return WrapRedis(ctx, "ping", s.rdb.Ping(ctx).Err())
}

// LoadScripts loads the store's scripts into Redis, so that the first sale
// runs its script at once instead of learning NOSCRIPT and sending it whole.
// Optional: a script missing later (a restarted Redis) is sent again by
// go-redis; tests use it so a fault lands on the script itself.
func (s *Store) LoadScripts(ctx context.Context) error {
	sc := s.scripts()
	for _, sc := range []*redis.Script{sc.read, sc.write, sc.atomic, snapshot, ordersScript, sc.peek} {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return WrapRedis(ctx, "load scripts", err)
		}
	}
	return nil
}

// Reset starts a new sale: stock = n, lucky = 0, and the fence is deleted so
// the lock backend's token sequence (or the backend itself) may start over.
// With segments, n is split over them (SegmentShares) and every fence is
// deleted. With the ledger, the sale gets a new id and its orders, buyer
// counts, index and per-user set are deleted; the idempotency records are
// swept first (sweepIdempotency), and any left name the old sale, so they
// no longer count. All but the sweep happens in one MULTI/EXEC: no reader
// sees half a reset. n must be in 0..MaxStock; anything else returns
// ErrStockRange and writes nothing. With replica acks (WithReplicaAcks) the
// reset returns only once the replicas hold it, else ErrNotReplicated (and
// ErrUnavailable: reset again), see resetAcked.
func (s *Store) Reset(ctx context.Context, n int64) error {
	epoch, err := s.beginReset(ctx, n)
	if err != nil {
		return err
	}
	tx := func(p redis.Pipeliner) error {
		s.queueReset(ctx, p, n, epoch)
		return nil
	}
	if s.acks.Replicas > 0 {
		err = s.resetAcked(ctx, tx)
	} else {
		_, err = s.rdb.TxPipelined(ctx, tx)
		err = WrapRedis(ctx, "reset", err)
	}
	if err == nil {
		s.mark.reset(epoch)
	}
	return err
}

// beginReset is what a reset to n does before its MULTI: it checks n and
// that the sale is not halted, sweeps the idempotency records, and names
// the new sale's epoch (recorded in the witness, if any).
func (s *Store) beginReset(ctx context.Context, n int64) (epoch string, err error) {
	if n < 0 || n > MaxStock {
		return "", fmt.Errorf("%w: %d", stock.ErrStockRange, n)
	}
	// A halted sale lost acknowledged sales: a reset would start the next
	// one over them as if nothing happened. The operator reconciles first
	// and removes the halt (the README's runbook).
	if why, err := s.Halted(ctx); err != nil {
		return "", err
	} else if why != "" {
		return "", fmt.Errorf("stock: reset: %w: %s (reconcile the acknowledged orders, then DEL %s)", stock.ErrStoreRewound, why, s.keys.Halt)
	}
	if err := s.sweepIdempotency(ctx); err != nil {
		return "", err
	}
	epoch = newSaleID()
	if s.wit != nil {
		// First, so that Redis never holds an epoch the witness does not
		// know: a reset that fails after this leaves the old sale in Redis,
		// whose epoch the witness still keeps.
		if err := s.wit.begin(ctx, epoch, len(s.segs)); err != nil {
			return "", err
		}
	}
	return epoch, nil
}

// queueReset queues the reset's MULTI body on p: the new sale of n units
// in epoch.
func (s *Store) queueReset(ctx context.Context, p redis.Pipeliner, n int64, epoch string) {
	shares := stock.SegmentShares(n, len(s.segs))
	s.resetLedger(ctx, p)
	for i, seg := range s.segs {
		p.Set(ctx, seg.keys.Stock, shares[i], 0)
	}
	p.Set(ctx, s.keys.Lucky, 0, 0)
	p.Del(ctx, s.keys.Returned)
	for _, seg := range s.segs {
		p.Del(ctx, seg.keys.Fence)
	}
	if s.keys.Initial != "" {
		p.Set(ctx, s.keys.Initial, n, 0)
	}
	p.Set(ctx, s.keys.Format, s.format(), 0)
	p.Set(ctx, s.keys.Epoch, epoch, 0)
}

// Status reads stock (the sum of the segments) and lucky in one round trip.
// A missing stock key is ErrStoreLost, as every sale answers it: a sale
// lost, or never reset, has no units left to show, not 0. A missing lucky
// reads as 0 (a sale's first unit writes it).
func (s *Store) Status(ctx context.Context) (stock.Status, error) {
	st, _, err := s.StatusBySegment(ctx)
	return st, err
}

// StatusBySegment is Status with every segment's stock, all read at one
// instant (one MGET): what a verifier needs to check that no segment went
// negative.
func (s *Store) StatusBySegment(ctx context.Context) (stock.Status, []int64, error) {
	b, err := s.Books(ctx)
	if err != nil {
		return stock.Status{}, nil, err
	}
	if b.Missing != "" {
		return stock.Status{}, nil, fmt.Errorf("stock: status: %w", lost(b.Missing))
	}
	return stock.Status{Stock: b.Stock, Lucky: b.Lucky, Returned: b.Returned}, b.Segments, nil
}

// Read returns the stock and records f as the fence's current reader, so
// that no earlier reader can write any more. It is refused with a
// *FencedError (wrapping ErrFenced) for a token below the highest seen, or
// equal to it under another lease (a collision: both are then refused), and
// with ErrMixedBackends when the fence belongs to another lock — unless the
// fence has been quiet for f.Quiet, when it restarts at f (Reading.Restarted).
// A second Read of the same lease answers as the first did. Outside the
// sale's window (Keys.Window) it is refused with a *WindowError.
func (s *Store) Read(ctx context.Context, f stock.Fence) (stock.Reading, error) {
	return s.read(ctx, f, false)
}

// read is Read; replays says a buyer of the sale has an idempotency key
// the ledger may replay, so a sale whose window ended is read as usual and
// its write answers each buyer (fenced_read.lua's ARGV[7]).
func (s *Store) read(ctx context.Context, f stock.Fence, replays bool) (stock.Reading, error) {
	var out stock.Reading
	err := s.guarded(ctx, func(gkeys []string, gargs []any, _ string) error {
		args := append([]any{f.Lock, strconv.FormatUint(f.Token, 10), f.Lease, f.Quiet.Milliseconds()}, gargs...)
		if s.keys.Window != "" {
			args = append(args, boolArg(replays))
		}
		keys, args := s.windowed(append([]string{s.keys.Stock, s.keys.Fence}, gkeys...), args)
		res, err := s.scripts().read.Run(ctx, s.rdb, keys, args...).Slice()
		if err != nil {
			return WrapRedis(ctx, "fenced read", err)
		}
		if len(res) != 4 && len(res) != 5 {
			return fmt.Errorf("stock: fenced read: unexpected reply %v", res)
		}
		code, _ := res[0].(int64)
		left, _ := res[1].(int64)
		highest, _ := res[2].(string)
		restarted, _ := res[3].(int64)
		if len(res) == 5 && code == resultOK {
			returned, _ := res[4].(int64)
			s.mark.readAt(s.segIndex, f.Lease, returned)
		}
		if err := s.readRefusal(ctx, "fenced read", code, left); err != nil {
			return err
		}
		if err := fenceStatus(code, f, highest); err != nil {
			return fmt.Errorf("stock: fenced read: %w", err)
		}
		out = stock.Reading{Stock: left, Restarted: restarted == 1}
		return nil
	})
	return out, err
}

// readRefusal is the error a script that reads the stock to sell from it
// (fenced_read.lua, peek.lua) answers with its code, for op: a broken, lost
// or halted sale, an epoch to learn (guarded), a closed window (bound: its
// edge); nil for any other code.
func (s *Store) readRefusal(ctx context.Context, op string, code, bound int64) error {
	switch code {
	case resultNotInt:
		return fmt.Errorf("stock: %s: %w", op, notInt(s.keys.Stock))
	case resultLost:
		return fmt.Errorf("stock: %s: %w", op, lost(s.keys.Stock))
	case resultHalted:
		return s.halted(ctx, op)
	case resultEpoch:
		return errEpochMoved
	case resultEarly, resultEnded, resultSkewed:
		return fmt.Errorf("stock: %s: %w", op, windowCode(code, bound))
	}
	return nil
}

// Write sets the stock to newStock and counts one sale, only if f is still
// the fence's current reader — i.e. no one has read since f's own Read.
// Otherwise nothing is written and a *FencedError (or ErrMixedBackends) is
// returned. It is exactly-once per lease: a second Write of the same lease
// (a retry whose first reply was lost) finds the first one's receipt and
// returns nil without selling again. With the ledger on, the unit gets an
// anonymous order whose id is f.Lease. Outside the sale's window
// (Keys.Window) it is refused with a *WindowError: the window is checked
// here, where the unit is taken, not only at the read.
func (s *Store) Write(ctx context.Context, f stock.Fence, newStock int64) error {
	if s.Ledger() {
		return s.writeAnonymous(ctx, f, newStock+1, 1)
	}
	return s.write(ctx, f, newStock)
}

// WriteBatch is Write for a combined sale of units units to the members of
// one batch (see MemberAttempt): it sets the stock to newStock and counts
// units sales in one fenced, exactly-once script run under f, whose receipt
// records how many members sold, so each member's receipt can be answered.
// units must be at least 1. With the ledger on, member i's unit gets an
// anonymous order whose id is MemberAttempt(f.Lease, i).
func (s *Store) WriteBatch(ctx context.Context, f stock.Fence, newStock int64, units int) error {
	if units < 1 {
		return fmt.Errorf("stock: fenced write: %d units", units)
	}
	if s.Ledger() {
		return s.writeAnonymous(ctx, f, newStock+int64(units), units)
	}
	return s.write(ctx, f, newStock, units)
}

// writeAnonymous is Write and WriteBatch with the ledger on: units
// anonymous members under f, which read the stock as read.
func (s *Store) writeAnonymous(ctx context.Context, f stock.Fence, read int64, units int) error {
	_, err := s.writeLedger(ctx, f, read, anonymous(f.Lease, units), stock.LedgerArgs{Now: time.Now()})
	return err
}

// write runs fenced_write.lua; extra, if given, is its units argument
// (omitted for one unit, as every single sale has always sent it).
func (s *Store) write(ctx context.Context, f stock.Fence, newStock int64, extra ...any) error {
	keys, args := s.windowed(s.receiptKept([]string{s.keys.Stock, s.keys.Lucky, s.keys.Fence, s.keys.Receipts + f.Lease},
		append([]any{f.Lock, strconv.FormatUint(f.Token, 10), f.Lease, newStock, ReceiptTTL.Milliseconds()}, extra...)))
	cmd, wait := s.eval(ctx, s.scripts().write,
		keys, args...)
	code, bound, rerr, err := codeReply(cmd)
	if rerr != nil {
		return WrapRedis(ctx, "fenced write", rerr)
	}
	if err != nil {
		return fmt.Errorf("stock: fenced write: %w", err)
	}
	if werr := windowCode(code, bound); werr != nil {
		return fmt.Errorf("stock: fenced write: %w", werr)
	}
	if code == resultNotInt {
		return fmt.Errorf("stock: fenced write: %w", notInt(s.keys.Lucky))
	}
	if code == resultLost {
		return fmt.Errorf("stock: fenced write: %w", lost(s.keys.Stock))
	}
	if err := fenceStatus(code, f, ""); err != nil {
		return fmt.Errorf("stock: fenced write: %w", err)
	}
	if err := s.acked(ctx, "fenced write", wait); err != nil {
		return err
	}
	// Written, so no reset came between this lease's read and now (a
	// reset deletes the fence): the current epoch is the read's.
	s.mark.soldUnder(s.segIndex, f.Lease, newStock)
	return nil
}

// Receipt reports whether the write or atomic sale of attempt id took
// effect, and the stock it left: how a sale answered "unconfirmed" is
// settled afterwards. A member of a combined sale (MemberAttempt) is
// answered from its batch's receipt. Receipts live ReceiptTTL. With the
// ledger, sold means this attempt sold a unit (its order id is the attempt
// id); a replayed key sold nothing, and is not sold here. With replica
// acks (WithReplicaAcks), a receipt the replicas do not hold yet is
// ErrNotReplicated (and ErrUnavailable: ask again): not settled until they
// do, or a failover drops it.
func (s *Store) Receipt(ctx context.Context, id string) (stockAfter int64, sold bool, err error) {
	key, member, isMember := stock.SplitMemberAttempt(id)
	get, wait := s.getAcked(ctx, s.keys.Receipts+key)
	v, err := get.Result()
	if err == redis.Nil {
		return s.receiptFromLedger(ctx, id)
	}
	if err != nil {
		return 0, false, WrapRedis(ctx, "receipt", err)
	}
	stockAfter, sold, err = s.readReceipt(id, v, member, isMember)
	if err == nil && sold {
		// With replica acks, sold is settled only once the replicas hold
		// it: until then a failover could still take it back. Ask again
		// later, as of a Redis that is down.
		if err = s.acked(ctx, "receipt", wait); errors.Is(err, ErrNotReplicated) {
			err = fmt.Errorf("%w: %w", stock.ErrUnavailable, err)
		}
	}
	if err != nil {
		return 0, false, err
	}
	return stockAfter, sold, nil
}

// receiptFromLedger answers Receipt for an attempt with no receipt (none
// written, or past ReceiptTTL): with the ledger on, an order of that id
// is a sale that happened, kept as long as the sale. The idempotency
// records that replay it live longer than receipts, so a replay's
// unconfirmed answer (which names the original order) is settled here.
func (s *Store) receiptFromLedger(ctx context.Context, id string) (int64, bool, error) {
	if !s.Ledger() {
		return 0, false, nil
	}
	o, err := s.Order(ctx, id)
	if errors.Is(err, stock.ErrNoOrder) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if s.acks.Replicas > 0 {
		p := s.rdb.Pipeline()
		w := s.queueWait(ctx, p)
		_, _ = p.Exec(ctx)
		if err := s.acked(ctx, "receipt", w); err != nil {
			if errors.Is(err, ErrNotReplicated) {
				err = fmt.Errorf("%w: %w", stock.ErrUnavailable, err)
			}
			return 0, false, err
		}
	}
	return o.StockAfter, true, nil
}

// readReceipt is Receipt's reading of the receipt v of id.
func (s *Store) readReceipt(id, v string, member int, isMember bool) (int64, bool, error) {
	if isLedgerReceipt(v) {
		return ledgerReceipt(id, v, member)
	}
	after, units, err := parseReceipt(v)
	if err != nil {
		return 0, false, fmt.Errorf("stock: receipt %s: %w", id, err)
	}
	if !isMember {
		return after, true, nil
	}
	if member >= units {
		return 0, false, nil // in the batch, but past the units it sold
	}
	// Members are sold in order: member i left the stock the batch left
	// plus the units sold after it.
	return after + int64(units-1-member), true, nil
}

// ReadUnfenced is a plain GET, for backends without usable tokens (and for
// fencing switched off): it is what the articles do, and how they oversell.
func (s *Store) ReadUnfenced(ctx context.Context) (int64, error) {
	// The articles' race is the lesson here, not a lost or halted sale:
	// those stop this sale too (one round trip, as before).
	var get *redis.StringCmd
	var halted *redis.IntCmd
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, s.keys.Stock)
		halted = p.Exists(ctx, s.keys.Halt)
		return nil
	})
	if halted.Err() == nil && halted.Val() > 0 {
		return 0, s.halted(ctx, "read")
	}
	v, err := get.Result()
	switch {
	case err == redis.Nil:
		return 0, fmt.Errorf("stock: read: %w", lost(s.keys.Stock))
	case isWrongType(err):
		return 0, fmt.Errorf("stock: read: %w", notInt(s.keys.Stock))
	case err != nil:
		return 0, WrapRedis(ctx, "read", err)
	}
	n, err := checkInt(v)
	if err != nil {
		return 0, fmt.Errorf("stock: read: %w", notInt(s.keys.Stock))
	}
	return n, nil
}

// WriteUnfenced sets the stock and counts one sale in one MULTI/EXEC, with no
// check of who is writing.
func (s *Store) WriteUnfenced(ctx context.Context, newStock int64) error {
	return s.writeUnfenced(ctx, newStock, 1)
}

// writeUnfenced is WriteUnfenced for units sales at once (a combined batch).
func (s *Store) writeUnfenced(ctx context.Context, newStock int64, units int) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.keys.Stock, newStock, 0)
		if units == 1 {
			p.Incr(ctx, s.keys.Lucky)
		} else {
			p.IncrBy(ctx, s.keys.Lucky, int64(units))
		}
		return nil
	})
	return WrapRedis(ctx, "write", err)
}

// SellAtomic sells one unit in a single Lua script without any lock: it
// decrements the stock if positive and counts the sale, or returns
// ErrSoldOut. It returns the stock after the sale. It is exactly-once per
// attempt id: a second call with the same id returns the first one's result
// and sells nothing. With the ledger on, the unit gets an anonymous order
// whose id is id.
func (s *Store) SellAtomic(ctx context.Context, id string) (int64, error) {
	if s.Ledger() {
		v, err := s.sellLedger(ctx, id, stock.Buyer{}, stock.LedgerArgs{Now: time.Now()})
		if err != nil {
			return 0, err
		}
		if v.Kind != stock.VerdictSold {
			return 0, stock.ErrSoldOut // anonymous and keyless: sold out is all it can be
		}
		return v.After, nil
	}
	var (
		after, wait = int64(0), (*redis.Cmd)(nil)
		epoch       string
	)
	err := s.guarded(ctx, func(gkeys []string, gargs []any, e string) error {
		var cmd *redis.Cmd
		keys, args := s.windowed(s.receiptKept(append([]string{s.keys.Stock, s.keys.Lucky, s.keys.Receipts + id}, gkeys...),
			append([]any{ReceiptTTL.Milliseconds()}, gargs...)))
		cmd, wait = s.eval(ctx, s.scripts().atomic, keys, args...)
		var (
			bound     int64
			rerr, err error
		)
		if after, bound, rerr, err = codeReply(cmd); rerr != nil {
			return WrapRedis(ctx, "atomic sell", rerr)
		} else if err != nil {
			return fmt.Errorf("stock: atomic sell: %w", err)
		}
		epoch = e
		return s.atomicRefusal(ctx, after, bound)
	})
	if err != nil {
		return 0, err
	}
	if after == -resultSoldOut {
		return 0, stock.ErrSoldOut
	}
	if err := s.acked(ctx, "atomic sell", wait); err != nil {
		return 0, err
	}
	if returned, ok := s.mark.returnedAt(s.segIndex, ""); ok { // no reservations without the ledger
		s.mark.sold(epoch, s.segIndex, after-returned)
	}
	return after, nil
}

// atomicRefusal is the error of sell_atomic.lua's answer code (both
// forms: a refusal is its result negated), nil for a sale or sold out;
// bound is a closed window's.
func (s *Store) atomicRefusal(ctx context.Context, code, bound int64) error {
	switch -code {
	case resultEarly, resultEnded, resultSkewed:
		return fmt.Errorf("stock: atomic sell: %w", windowCode(-code, bound))
	case resultNotInt:
		return fmt.Errorf("stock: atomic sell: %w", notInt(s.keys.Stock))
	case resultLuckyNotInt:
		return fmt.Errorf("stock: atomic sell: %w", notInt(s.keys.Lucky))
	case resultLost:
		return fmt.Errorf("stock: atomic sell: %w", lost(s.keys.Stock))
	case resultHalted:
		return s.halted(ctx, "atomic sell")
	case resultEpoch:
		return errEpochMoved
	}
	return nil
}

// fenceStatus turns a script status into an error; highest is the fence's
// token as the script reported it (read only).
func fenceStatus(code int64, f stock.Fence, highest string) error {
	switch code {
	case resultOK:
		return nil
	case resultFenced, resultCollision, resultReturned:
		fe := &stock.FencedError{Lock: f.Lock, Token: f.Token, Collision: code == resultCollision, Returned: code == resultReturned}
		fe.Highest, _ = strconv.ParseUint(highest, 10, 64)
		return fe
	case resultMixed:
		return fmt.Errorf("%w: the fence was recorded by another lock than %q (backend, lock key or lock cluster differ)",
			stock.ErrMixedBackends, f.Lock)
	default:
		return fmt.Errorf("unexpected script status %d", code)
	}
}

// codeReply reads a script's integer answer, or the {code, bound} a
// closed window answers with (window.lua). A Redis error is the first
// error (for WrapRedis), a reply of another shape the second.
func codeReply(cmd *redis.Cmd) (code, bound int64, rerr, err error) {
	v, rerr := cmd.Result()
	if rerr != nil {
		return 0, 0, rerr, nil
	}
	switch v := v.(type) {
	case int64:
		return v, 0, nil, nil
	case []any:
		if len(v) == 2 {
			code, ok1 := v[0].(int64)
			bound, ok2 := v[1].(int64)
			if ok1 && ok2 {
				return code, bound, nil, nil
			}
		}
	}
	return 0, 0, nil, fmt.Errorf("unexpected reply %v", v)
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// checkInt is int.lua's readInt in Go: the value of a counter key, which
// must be a canonical decimal ("0", or no leading zero, sign or space
// other than a leading '-') within -MaxStock..MaxStock.
func checkInt(v string) (int64, error) {
	canonical := v == "0" || (len(v) > 0 && v[0] != '0' && v != "-" && !strings.HasPrefix(v, "-0") && !strings.HasPrefix(v, "+"))
	n, err := strconv.ParseInt(v, 10, 64)
	if !canonical || err != nil || n > MaxStock || n < -MaxStock {
		return 0, fmt.Errorf("%q is not an integer within ±(2^53-1)", truncate(v, 24))
	}
	return n, nil
}

// notInt is the error for a counter key that holds a non-integer (or a
// value of another type): it names the key, not the value.
func notInt(key string) error {
	return fmt.Errorf("%w: %q", stock.ErrNotInteger, key)
}

// lost is the error for a missing stock key: the sale is gone from Redis.
func lost(key string) error {
	return fmt.Errorf("%w: key %q is missing", stock.ErrStoreLost, key)
}

// isWrongType reports a WRONGTYPE reply: the key holds a hash, list, ...
func isWrongType(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
