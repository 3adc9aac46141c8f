package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

// rewind.go: what this process has seen of the sale, so that a Redis that
// went back in time (an older snapshot loaded, a failover to a replica that
// lagged) is refused inside the selling scripts rather than noticed after
// it sold a unit twice (guard.lua).
//
// Every Reset writes a fresh epoch (Keys.Epoch). A Store remembers the
// epoch it last saw and, per segment, its ceiling: the least fresh stock
// (the stock less the units returned, Keys.Returned) it saw left after a
// sale it answered sold. Within an epoch the fresh stock only falls (a
// return raises the stock and the returned count together), so a script
// that finds more than the ceiling halts the sale (Keys.Halt) for every
// replica, until an operator reconciles. Without reservations nothing is
// returned and the fresh stock is the stock. The
// ceilings live in this process: a Redis rewound while every stockd
// restarted with it is not caught here (nor a snapshot of another sale,
// which carries its own epoch). A missing stock key is (int.lua).

// watermark is one Store's memory of the sale, shared by its segments.
type watermark struct {
	mu       sync.Mutex
	learned  bool    // epoch read from Redis (or set by a Reset) at least once
	epoch    string  // "" until learned, or when Redis holds none
	ceilings []int64 // per segment; -1: no sale answered yet
	noted    uint64  // how many times a ceiling fell: what the witness must catch up with
	// rising: units can come back (WithReservations), so a ceiling needs
	// the units returned when its sale read the stock: reads holds, per
	// segment, the last read's lease and what it found returned.
	rising bool
	reads  []leaseRead
}

// leaseRead is what a fenced read under lease found returned. A return
// moves the fence (lifecycle.lua), so a write under that lease that is not
// refused came with no return since: its fresh stock is the stock it left
// less this.
type leaseRead struct {
	lease    string
	returned int64
}

func newWatermark(segments int) *watermark {
	w := &watermark{ceilings: make([]int64, segments), reads: make([]leaseRead, segments)}
	for i := range w.ceilings {
		w.ceilings[i] = -1
	}
	return w
}

// known reports whether the epoch was learned (or set by a Reset).
func (w *watermark) known() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.learned
}

// reset starts epoch with no sale seen.
func (w *watermark) reset(epoch string) { w.learn(epoch, nil) }

// forget makes the next guarded call learn the sale again (learnEpoch),
// as a new process would.
func (w *watermark) forget() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.learned = false
}

// args are the guard's epoch and ceiling arguments for segment seg.
func (w *watermark) args(seg int) (epoch string, ceiling int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.epoch == "" {
		return "", -1
	}
	return w.epoch, w.ceilings[seg]
}

// sold lowers segment seg's ceiling to after, a stock left by a sale about
// to be answered sold under epoch (ignored if the epoch moved on since).
//
// after is the fresh stock (stock less returned): with reservations the
// caller takes the returned count from the sale's own read (readAt,
// returnedAt) or script.
//
// With reservations the fresh stock goes below 0 once more units were
// taken than the sale started with (units sold again after returns), and a
// ceiling below 0 would read as none (-1, here, in guard.lua and in the
// witness's record): the ceiling stays at 0 then, so a Redis that went
// back to a fresh stock above 0 is still caught.
func (w *watermark) sold(epoch string, seg int, after int64) {
	after = max(after, 0)
	w.mu.Lock()
	defer w.mu.Unlock()
	if epoch == "" || epoch != w.epoch {
		return
	}
	if c := w.ceilings[seg]; c < 0 || after < c {
		w.ceilings[seg] = after
		w.noted++
	}
}

// learn starts epoch with ceilings seeded, in one step: a concurrent sale
// sees the epoch learned only with its ceilings.
func (w *watermark) learn(epoch string, ceilings []int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.epoch, w.learned = epoch, true
	for i := range w.ceilings {
		w.ceilings[i] = -1
		if i < len(ceilings) && ceilings[i] >= 0 {
			w.ceilings[i] = ceilings[i]
		}
	}
}

// notedCount is how many times a ceiling fell so far.
func (w *watermark) notedCount() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.noted
}

// snapshot is the epoch, a copy of the ceilings, and the noted count they
// include.
func (w *watermark) snapshot() (string, []int64, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.epoch, slices.Clone(w.ceilings), w.noted
}

// readAt records what segment seg's read under lease found returned.
func (w *watermark) readAt(seg int, lease string, returned int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reads[seg] = leaseRead{lease, returned}
}

// returnedAt is the units returned that segment seg's read under lease
// found, for the ceiling after its write. When that read is not the last
// one recorded (another section's came in between), 0 without
// reservations, where the stock is a ceiling no lower than the fresh stock
// (a replica of this sale without them); with them false: the ceiling is
// skipped, which can miss a rewind but never halts a sale that was not
// rewound.
func (w *watermark) returnedAt(seg int, lease string) (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.reads[seg]; r.lease == lease && lease != "" {
		return r.returned, true
	}
	return 0, !w.rising
}

// soldUnder lowers segment seg's ceiling after a write under lease that
// left the stock at after (soldNow, with returnedAt's fresh stock).
func (w *watermark) soldUnder(seg int, lease string, after int64) {
	if returned, ok := w.returnedAt(seg, lease); ok {
		w.soldNow(seg, after-returned)
	}
}

// soldNow is sold under the epoch known now.
func (w *watermark) soldNow(seg int, after int64) {
	w.mu.Lock()
	epoch := w.epoch
	w.mu.Unlock()
	w.sold(epoch, seg, after)
}

// learnEpoch reads the sale's epoch from Redis, first thing and after a
// script said it is not the one this process knew: a reset by another
// replica. Missing (a sale set up before epochs existed) leaves the check
// off. With a witness, the epoch must be one it recorded, and its
// ceilings seed this process's (witness.go); one it never recorded halts
// the sale. A sale of a newer format than this process reads is refused
// (formats.go). With durable orders, Redis must count every unit they hold
// (orderscheck.go).
func (s *Store) learnEpoch(ctx context.Context) error {
	v, err := s.readEpoch(ctx, true)
	if err != nil {
		return err
	}
	if s.pin != "" && v != s.pin {
		// An item reset since its service was built: the service's
		// settings (the per-user limit) are of the old sale.
		return stock.ErrItemChanged
	}
	// Before the epoch is marked learned: a concurrent call sells as soon
	// as it is, so every check comes first.
	if v != "" {
		if err := s.checkUnits(ctx); err != nil {
			return err
		}
	}
	if s.wit == nil {
		s.mark.reset(v)
		return nil
	}
	err = s.wit.check(ctx, v, func(ceilings []int64) error { return s.checkSegments(ctx, v, ceilings) })
	switch {
	case errors.Is(err, stock.ErrWitnessLost):
		return s.haltLost(ctx, "learn the sale", v, haltReason(err))
	case errors.Is(err, errEpochUnknown) || errors.Is(err, errSegmentRewound):
		return s.halt(ctx, "learn the sale", haltReason(err))
	}
	return err
}

// errSegmentRewound: a segment holds more stock than the witness recorded
// a sale of the epoch answered with. Its text is the halt's reason.
var errSegmentRewound = errors.New("rewound")

// checkSegments holds every segment's stock against the witness's
// ceilings of epoch when a process learns the sale: the guard checks
// only the segment a call sells in, and a sale in a segment that did not
// go back would number its unit from a lucky that did.
func (s *Store) checkSegments(ctx context.Context, epoch string, ceilings []int64) error {
	all := s.root.segs
	if len(all) == 1 {
		return nil // the guard checks the one segment before any sale
	}
	keys := make([]string, len(all))
	for i, seg := range all {
		keys[i] = seg.keys.Stock
	}
	// With the epoch, at one instant: a reset since the epoch was read
	// refills the stocks, which are then not this sale's.
	var now *redis.StringCmd
	var vals *redis.SliceCmd
	if _, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Get(ctx, s.keys.Epoch)
		vals = p.MGet(ctx, keys...)
		return nil
	}); err != nil && err != redis.Nil {
		return WrapRedis(ctx, "read the segments' stocks", err)
	}
	if now.Val() != epoch {
		return nil // the guard finds the epoch moved, and the sale is learned again
	}
	for i, c := range ceilings {
		if i >= len(keys) || c < 0 {
			continue
		}
		v, _ := vals.Val()[i].(string)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue // missing or not a number: the guard's to refuse
		}
		if n > c {
			return fmt.Errorf("%w: segment %d's stock %d above the %d the witness recorded a sale of epoch %s answered with",
				errSegmentRewound, i, n, c, epoch)
		}
	}
	return nil
}

// halt stops the sale for every replica: the halt key, which every
// guarded script reads first (guard.lua), and which only an operator
// removes.
func (s *Store) halt(ctx context.Context, op, why string) error {
	if err := s.rdb.SetNX(ctx, s.keys.Halt, why, 0).Err(); err != nil {
		return WrapRedis(ctx, "write halt", err)
	}
	return s.halted(ctx, op)
}

// guardArgs are the epoch and halt keys and this segment's guard
// arguments, and the epoch they were taken under.
func (s *Store) guardArgs() (keys []string, args []any, epoch string) {
	epoch, ceiling := s.mark.args(s.segIndex)
	return []string{s.keys.Epoch, s.keys.Halt, s.keys.Returned}, []any{epoch, ceiling}, epoch
}

// guarded runs call, which sends a guarded script with the arguments it
// is given, and follows a reset this process has not seen yet: on
// errEpochMoved it learns the epoch and calls once more. A script that
// answered errEpochMoved wrote nothing.
func (s *Store) guarded(ctx context.Context, call func(keys []string, args []any, epoch string) error) error {
	if !s.mark.known() {
		if err := s.learnEpoch(ctx); err != nil {
			return err
		}
	}
	for range 2 {
		err := call(s.guardArgs())
		if !errors.Is(err, errEpochMoved) {
			return err
		}
		if err := s.learnEpoch(ctx); err != nil {
			return err
		}
	}
	return fmt.Errorf("stock: the sale's epoch changed twice during one call: %w", stock.ErrUnavailable)
}

// errEpochMoved is a guarded script's answer that the caller's epoch is
// not the sale's; guarded handles it.
var errEpochMoved = errors.New("stock: the sale was reset since this process last sold")

// Halted returns the reason the sale is halted, or "" when it is not: for
// /readyz, so that every replica says so where probes and people look.
func (s *Store) Halted(ctx context.Context) (string, error) {
	v, err := s.rdb.Get(ctx, s.keys.Halt).Result()
	if err == redis.Nil {
		return "", nil
	}
	if err != nil {
		return "", WrapRedis(ctx, "read halt", err)
	}
	return v, nil
}

// halted is the error for a guarded script that found the sale halted.
func (s *Store) halted(ctx context.Context, op string) error {
	why, err := s.Halted(ctx)
	if err != nil || why == "" {
		why = "key " + s.keys.Halt + " is set"
	}
	return fmt.Errorf("stock: %s: %w: %s", op, stock.ErrStoreRewound, why)
}

// pinEpoch binds the store to the sale of epoch: a script that finds
// another (a reset since) answers ErrItemChanged rather than learning it,
// so that an item's service, built with the settings of that sale, never
// sells in the next one (items.go). With a witness the epoch is left to
// learn: learnEpoch then checks Redis's against the witness and seeds the
// ceilings it recorded, without which a new process would believe a
// rewound item.
func (s *Store) pinEpoch(epoch string) {
	s.pin = epoch
	if s.wit == nil {
		s.mark.reset(epoch)
	}
}
