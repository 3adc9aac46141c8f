package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

// reconcile.go: the operator's way back when the stock Redis is the one
// behind (a rewind caught by a replica's memory, the witness, or the
// durable orders), which keeps the sale and every unit it acknowledged.
//
// Three witnesses of what was sold survive a Redis that went back, each
// short of the truth in its own way:
//
//   - Redis's own lucky (and its ledger): what it still remembers.
//   - The durable orders (MySQL): every order the consumer stored; orders
//     reach MySQL after the 200, so a consumer that was behind when Redis
//     went back missed the last ones.
//   - The witness: per segment the least stock answered sold, recorded
//     before each 200, so every acknowledged unit (and maybe a few answered
//     unconfirmed) is below it; unless the witness went back too.
//
// The sale resumes counting the most any of them (and the operator, from
// the buyers' answers) says was sold. A unit counted that no order holds,
// neither in MySQL nor in Redis's ledger, is held back: never sold again,
// listed as held so that the buyers' receipts can account for it. Units
// Redis's ledger holds and MySQL does not yet are pending: the consumer,
// behind, stores them. So the 200 does not wait for the durable order;
// the price is that a lost order leaves its unit held, unsold to anyone
// else, until a person settles it.

// ErrNotReconcilable: Reconcile refused; nothing was written. The error
// says why.
var ErrNotReconcilable = errors.New("stock: the sale cannot be reconciled")

// Reconciliation is what Reconcile found and wrote.
type Reconciliation struct {
	ID      string    `json:"id"` // new with each reconciliation, kept in the witness as an adoption's
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Epoch   string    `json:"epoch"`
	Sale    string    `json:"sale,omitempty"` // the ledger's sale id
	Lifted  string    `json:"lifted"`         // the halt it lifted
	Initial int64     `json:"initial"`

	// What it found. -1: that source is not there (no durable orders, no
	// witness record of the sale).
	RedisStocks []int64 `json:"redis_stocks"`
	RedisLucky  int64   `json:"redis_lucky"`
	DurableUnit int64   `json:"durable_unit"` // the highest unit MySQL committed
	WitnessSold int64   `json:"witness_sold"` // units sold by the witness's ceilings
	AtLeast     int64   `json:"at_least"`     // the operator's count (0: none given)

	// What it wrote: lucky counts every unit any source says was sold,
	// and each segment's stock is at or below Redis's and the witness's.
	Stocks []int64 `json:"stocks"`
	Lucky  int64   `json:"lucky"`
	// Held: units counted sold that no order holds (above the durable
	// orders' highest and Redis's ledger): never sold again; the buyers'
	// receipts account for them.
	Held int64 `json:"held"`
	// Pending: units Redis's ledger holds that MySQL does not yet; the
	// consumer stores them.
	Pending int64 `json:"pending"`
}

// Reconcile rebuilds a halted sale's counts from what survived (above),
// records the decision in the witness (the sale's ceilings lowered to the
// new stocks, and who, when, the books: an adoption of kind reconcile, so
// that every replica takes the record as a new start, not a witness gone
// back), then, in one script, writes the stocks and lucky and lifts the
// halt it found, only if the halt and the epoch are still those it read.
// by names who decides; atLeast is the operator's own count of units
// answered sold (the buyers' answers), 0 for none.
//
// It refuses a sale that is not halted (nothing to reconcile), a Redis
// without the sale or its initial stock (reset, and settle the orders by
// hand: the runbook), and, with durable orders, a MySQL that does not
// answer: counting without the one source that survives a Redis restored
// together with its witness could sell a unit twice.
func (s *Store) Reconcile(ctx context.Context, by string, atLeast int64) (Reconciliation, error) {
	if strings.TrimSpace(by) == "" {
		return Reconciliation{}, fmt.Errorf("%w: name who decides (by)", ErrNotReconcilable)
	}
	why, err := s.Halted(ctx)
	if err != nil {
		return Reconciliation{}, err
	}
	if why == "" {
		return Reconciliation{}, fmt.Errorf("%w: the sale is not halted: nothing to reconcile", ErrNotReconcilable)
	}
	// A sale with reservations (format 2): its books count the units
	// returned and its orders' states, which the counts below do not;
	// they would write a stock short of the returned units and break
	// stock + lucky - returned = initial. Whichever replica is asked.
	if f, err := s.rdb.Get(ctx, s.keys.Format).Result(); err != nil && err != redis.Nil {
		return Reconciliation{}, WrapRedis(ctx, "reconcile: read the format", err)
	} else if f == strconv.Itoa(saleFormatReturns) {
		return Reconciliation{}, fmt.Errorf("%w: a sale with reservations (%s %s) is not reconciled yet: reset it, and settle its orders by hand (the runbook)", ErrNotReconcilable, s.keys.Format, f)
	}
	r := Reconciliation{ID: newSaleID(), By: by, At: time.Now().UTC(), Lifted: why, DurableUnit: -1, WitnessSold: -1, AtLeast: atLeast}
	if err := s.readBooks(ctx, &r); err != nil {
		return Reconciliation{}, err
	}
	if atLeast < 0 || atLeast > r.Initial {
		return Reconciliation{}, fmt.Errorf("%w: at_least %d is outside 0..%d (the initial stock)", ErrNotReconcilable, atLeast, r.Initial)
	}
	if s.units != nil && r.Sale != "" {
		u, err := s.units.HighestUnit(ctx, r.Sale)
		if err != nil {
			return Reconciliation{}, fmt.Errorf("stock: reconcile: read the durable orders: %w: %w", stock.ErrUnavailable, err)
		}
		r.DurableUnit = u
	}
	var ceilings []int64
	if s.wit != nil {
		rec, _, err := s.wit.load(ctx, true)
		if err != nil {
			return Reconciliation{}, err
		}
		if ws := rec.find(r.Epoch); ws != nil {
			ceilings = ws.Ceilings
			r.WitnessSold = witnessSold(stock.SegmentShares(r.Initial, len(s.segs)), ceilings)
		}
	}
	r.Stocks = reconciledStocks(r.RedisStocks, ceilings, r.Initial-max(r.RedisLucky, r.DurableUnit, r.WitnessSold, atLeast))
	var left int64
	for _, n := range r.Stocks {
		left += n
	}
	r.Lucky = r.Initial - left
	known := max(r.DurableUnit, r.RedisLucky)
	r.Held = max(r.Lucky-known, 0)
	if r.DurableUnit >= 0 {
		r.Pending = max(min(r.RedisLucky, r.Lucky)-r.DurableUnit, 0)
	}

	if s.wit != nil {
		// First, as a reset records its epoch first: a reconciliation that
		// fails after this leaves the witness at or below Redis, halted.
		ad := WitnessAdoption{ID: r.ID, Kind: "reconcile", By: by, At: r.At, Epoch: r.Epoch, Stocks: r.Stocks, Lucky: r.Lucky, Why: why}
		if _, err := s.wit.update(ctx, true, func(rec *witnessRecord) (bool, error) {
			rec.begin(r.Epoch, len(s.segs))
			rec.lower(r.Epoch, r.Stocks)
			rec.Adopted = &ad
			return true, nil
		}); err != nil {
			return Reconciliation{}, err
		}
	}
	keys := []string{s.keys.Halt, s.keys.Epoch, s.keys.Lucky}
	args := []any{why, r.Epoch, r.Lucky}
	for i, seg := range s.segs {
		keys = append(keys, seg.keys.Stock)
		args = append(args, r.Stocks[i])
	}
	n, err := reconcileScript.Run(ctx, s.rdb, keys, args...).Int64()
	if err != nil {
		return Reconciliation{}, WrapRedis(ctx, "reconcile", err)
	}
	if n == 0 {
		return Reconciliation{}, fmt.Errorf("%w: the halt or the sale changed while reconciling (was %q, epoch %s): read the books again", ErrNotReconcilable, why, r.Epoch)
	}
	// This process learns the sale again at its next call, as a new one
	// would, and checks it as one would.
	s.mark.forget()
	return r, nil
}

// readBooks reads, at one instant, the sale's epoch, ledger id, initial
// stock, lucky and per-segment stocks into r.
func (s *Store) readBooks(ctx context.Context, r *Reconciliation) error {
	keys := []string{s.keys.Epoch, s.keys.Initial, s.keys.Lucky}
	if s.keys.Sale != "" {
		keys = append(keys, s.keys.Sale)
	}
	for _, seg := range s.segs {
		keys = append(keys, seg.keys.Stock)
	}
	if s.keys.Initial == "" {
		return fmt.Errorf("%w: the store keeps no initial stock", ErrNotReconcilable)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return WrapRedis(ctx, "read the books", err)
	}
	str := func(i int) string {
		v, _ := vals[i].(string)
		return v
	}
	num := func(i int) (int64, error) {
		v := str(i)
		if v == "" {
			return 0, fmt.Errorf("%w: redis holds no %s: reset the sale, and settle its orders by hand (the runbook)", ErrNotReconcilable, keys[i])
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %s holds %q, not an integer", ErrNotReconcilable, keys[i], v)
		}
		return n, nil
	}
	if r.Epoch = str(0); r.Epoch == "" {
		return fmt.Errorf("%w: redis holds no sale (no %s): reset the sale, and settle its orders by hand (the runbook)", ErrNotReconcilable, keys[0])
	}
	if r.Initial, err = num(1); err != nil {
		return err
	}
	if r.RedisLucky, err = num(2); err != nil {
		return err
	}
	next := 3
	if s.keys.Sale != "" {
		r.Sale, next = str(3), 4
	}
	r.RedisStocks = make([]int64, len(s.segs))
	for i := range s.segs {
		if r.RedisStocks[i], err = num(next + i); err != nil {
			return err
		}
	}
	return nil
}

// witnessSold is how many units the ceilings say were sold: per segment
// its share less its ceiling (none recorded: none sold).
func witnessSold(shares, ceilings []int64) int64 {
	var sold int64
	for i, c := range ceilings {
		if c >= 0 && i < len(shares) {
			sold += max(shares[i]-c, 0)
		}
	}
	return sold
}

// reconciledStocks is each segment's stock at or below both Redis's and
// the witness's ceiling (-1: none), lowered further, the largest first,
// until they leave at most left units in all.
func reconciledStocks(redisStocks, ceilings []int64, left int64) []int64 {
	out := slices.Clone(redisStocks)
	var sum int64
	for i := range out {
		if i < len(ceilings) && ceilings[i] >= 0 {
			out[i] = min(out[i], ceilings[i])
		}
		out[i] = max(out[i], 0)
		sum += out[i]
	}
	for excess := sum - max(left, 0); excess > 0; {
		big := 0
		for i := range out {
			if out[i] > out[big] {
				big = i
			}
		}
		// Take from the largest down to the next largest (or all of
		// the excess), so that the segments end as even as they can.
		next := int64(0)
		for i := range out {
			if i != big && out[i] > next {
				next = out[i]
			}
		}
		take := min(excess, max(out[big]-next, 1))
		out[big] -= take
		excess -= take
	}
	return out
}

// reconcileScript writes a reconciliation: KEYS halt, epoch, lucky, then
// each segment's stock; ARGV the halt it lifts, the epoch, lucky, then
// the stocks. Only while the halt and epoch are still those read: 1, else
// 0 and nothing written.
var reconcileScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
	return 0
end
redis.call('SET', KEYS[3], ARGV[3])
for i = 4, #KEYS do
	redis.call('SET', KEYS[i], ARGV[i])
end
redis.call('DEL', KEYS[1])
return 1`)
