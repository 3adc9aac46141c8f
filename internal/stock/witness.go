package stock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// witness.go: the sale's memory outside the stock Redis. rewind.go's
// ceilings live in each stockd's memory, so a Redis that went back in time
// while every stockd restarted with it (a crash of the host, a deploy) or
// that now holds a snapshot of another sale would be believed. The witness
// keeps, in a store that does not roll back with Redis (a Register: etcd or
// MySQL), each recent sale's epoch and per segment the least stock a sale
// was answered sold with; a process learning the sale reads it first:
//
//   - Redis's epoch is one the witness recorded: the ceilings recorded for
//     it seed this process's, so the guard halts a rewound Redis at once.
//   - Redis's epoch is unknown to the witness: another sale's data (or a
//     reset the witness never saw): halted, as a rewind.
//   - Redis holds no epoch while the witness does: the sale is lost
//     (ErrStoreLost), and stays refused until a reset.
//
// A sale is answered sold only once the witness holds a ceiling at or below
// its stock-after (Service: witnessed, after the lock is released); the
// writes of concurrent sales share one register write (group commit). A
// Reset records its epoch in the witness before Redis gets it, so a reset
// that fails halfway leaves the previous sale's epoch still recorded (the
// record keeps the last witnessKeep epochs), never an unknown one.

// witnessKeep is how many recent epochs the record keeps: the current one
// and those of resets that may not have reached Redis.
const witnessKeep = 4

// DefaultWitnessTimeout bounds one register round of the witness.
const DefaultWitnessTimeout = 2 * time.Second

// witnessRecord is the register's value, JSON.
type witnessRecord struct {
	// Sales lists recent epochs, oldest first.
	Sales []witnessSale `json:"sales"`
}

// witnessSale is one epoch and its ceilings per segment (-1: none yet).
type witnessSale struct {
	Epoch    string  `json:"epoch"`
	Ceilings []int64 `json:"ceilings"`
}

func (r *witnessRecord) find(epoch string) *witnessSale {
	for i := range r.Sales {
		if r.Sales[i].Epoch == epoch {
			return &r.Sales[i]
		}
	}
	return nil
}

// begin records a new epoch with no sale seen; false if it is there.
func (r *witnessRecord) begin(epoch string, segments int) bool {
	if r.find(epoch) != nil {
		return false
	}
	c := make([]int64, segments)
	for i := range c {
		c[i] = -1
	}
	r.Sales = append(r.Sales, witnessSale{Epoch: epoch, Ceilings: c})
	if n := len(r.Sales); n > witnessKeep {
		r.Sales = slices.Clone(r.Sales[n-witnessKeep:])
	}
	return true
}

// lower merges ceilings into epoch's (the least of each, -1 meaning none);
// false if nothing changed or the epoch is not recorded (a sale of an
// epoch since replaced: nothing left to protect).
func (r *witnessRecord) lower(epoch string, ceilings []int64) bool {
	s := r.find(epoch)
	if s == nil {
		return false
	}
	changed := false
	for i, c := range ceilings {
		if c < 0 {
			continue
		}
		for len(s.Ceilings) <= i {
			s.Ceilings = append(s.Ceilings, -1)
		}
		if old := s.Ceilings[i]; old < 0 || c < old {
			s.Ceilings[i], changed = c, true
		}
	}
	return changed
}

// witness is a Store's link to its register, shared by the segments.
type witness struct {
	reg     Register
	timeout time.Duration
	mark    *watermark

	// cache is the record as last read or written, at cacheVer (0: none).
	cacheMu  sync.Mutex
	cache    witnessRecord
	cacheVer int64

	mu       sync.Mutex
	flushed  uint64 // the watermark's noted count last made durable
	flushing bool
	waiters  []witnessWaiter
}

type witnessWaiter struct {
	seq uint64
	ch  chan error
}

// WithWitness returns a store over the same client and keys whose sales
// are witnessed in r (witness.go): its learning of the sale checks r's
// record, its resets record their epoch there first, and Service answers
// a sale sold only once r holds its ceiling. timeout bounds one register
// round (0: DefaultWitnessTimeout). A nil r returns a store without one.
func (s *Store) WithWitness(r Register, timeout time.Duration) *Store {
	if timeout <= 0 {
		timeout = DefaultWitnessTimeout
	}
	return s.with(s.acks, r, timeout)
}

// with is a store over the same client and keys whose every segment waits
// for acks a and is witnessed in reg (nil: none), with a memory of the
// sale of its own.
func (s *Store) with(a ReplicaAcks, reg Register, timeout time.Duration) *Store {
	n := NewStore(s.rdb, s.keys)
	var w *witness
	if reg != nil {
		w = &witness{reg: reg, timeout: timeout, mark: n.mark}
	}
	for _, seg := range n.segs {
		seg.acks, seg.wit = a, w
	}
	return n
}

// Witness names the store's register, or "" without one.
func (s *Store) Witness() string {
	if s.wit == nil {
		return ""
	}
	return s.wit.reg.Name()
}

// ErrNotWitnessed: a sale sold in Redis, but the witness could not record
// its ceiling in time; the service answers it unconfirmed (its receipt
// says it sold). It wraps ErrUnavailable.
var ErrNotWitnessed = fmt.Errorf("%w: the witness did not record the sale", ErrUnavailable)

// load reads the record.
func (w *witness) load(ctx context.Context) (witnessRecord, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	v, ver, err := w.reg.Get(ctx)
	if err != nil {
		return witnessRecord{}, 0, fmt.Errorf("stock: read the witness (%s): %w: %w", w.reg.Name(), ErrUnavailable, err)
	}
	var rec witnessRecord
	if ver != 0 {
		if err := json.Unmarshal(v, &rec); err != nil {
			return rec, 0, fmt.Errorf("stock: the witness (%s) holds no record of ours: %w", w.reg.Name(), err)
		}
		w.remember(rec.clone(), ver)
	}
	return rec, ver, nil
}

// update applies change to the record until a Put of the result lands,
// or change says nothing changed; it returns the record as stored. It
// starts from the record this process last read or wrote, so a round
// with no other writer is one Put; a Put refused because another
// replica wrote since reads the record again and merges into it.
func (w *witness) update(ctx context.Context, change func(*witnessRecord) bool) (witnessRecord, error) {
	for range 16 {
		rec, ver, ok := w.cached()
		if !ok {
			var err error
			if rec, ver, err = w.load(ctx); err != nil {
				return rec, err
			}
		}
		if !change(&rec) {
			return rec, nil
		}
		v, err := json.Marshal(&rec)
		if err != nil {
			return rec, err
		}
		pctx, cancel := context.WithTimeout(ctx, w.timeout)
		nv, err := w.reg.Put(pctx, v, ver)
		cancel()
		if err != nil {
			w.forget()
			return rec, fmt.Errorf("stock: write the witness (%s): %w: %w", w.reg.Name(), ErrUnavailable, err)
		}
		if nv != 0 {
			w.remember(rec.clone(), nv)
			return rec, nil
		}
		w.forget() // another writer's record landed first: read it, merge into it
	}
	return witnessRecord{}, fmt.Errorf("stock: write the witness (%s): %w: too many concurrent writers", w.reg.Name(), ErrUnavailable)
}

// cached is a deep copy of the record last read or written, if any.
func (w *witness) cached() (witnessRecord, int64, bool) {
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	if w.cacheVer == 0 {
		return witnessRecord{}, 0, false
	}
	return w.cache.clone(), w.cacheVer, true
}

// clone is a deep copy of r.
func (r witnessRecord) clone() witnessRecord {
	c := witnessRecord{Sales: make([]witnessSale, len(r.Sales))}
	for i, s := range r.Sales {
		c.Sales[i] = witnessSale{Epoch: s.Epoch, Ceilings: slices.Clone(s.Ceilings)}
	}
	return c
}

func (w *witness) remember(rec witnessRecord, ver int64) {
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	w.cache, w.cacheVer = rec, ver
}

func (w *witness) forget() { w.remember(witnessRecord{}, 0) }

// begin records a reset's epoch before Redis gets it.
func (w *witness) begin(ctx context.Context, epoch string, segments int) error {
	_, err := w.update(ctx, func(r *witnessRecord) bool { return r.begin(epoch, segments) })
	return err
}

// await returns once the register holds every ceiling this process noted
// before the call, or the error of the round that should have.
func (w *witness) await(ctx context.Context) error {
	seq := w.mark.notedCount()
	w.mu.Lock()
	if w.flushed >= seq {
		w.mu.Unlock()
		return nil
	}
	ch := make(chan error, 1)
	w.waiters = append(w.waiters, witnessWaiter{seq: seq, ch: ch})
	if !w.flushing {
		w.flushing = true
		// One round at a time, for everyone waiting: it ends when no one
		// is (no goroutine outlives the waits that need it).
		go w.flush()
	}
	w.mu.Unlock()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotWitnessed, ctx.Err())
	}
}

// flush writes the watermark to the register while anyone waits.
func (w *witness) flush() {
	for {
		w.mu.Lock()
		if len(w.waiters) == 0 {
			w.flushing = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		epoch, ceilings, seq := w.mark.snapshot()
		var err error
		if epoch != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 2*w.timeout)
			_, err = w.update(ctx, func(r *witnessRecord) bool {
				// A witness that forgot everything (a new etcd, an
				// emptied table) takes this sale again: had it stayed
				// empty, every later sale would be "recorded" in nothing.
				// One that holds other epochs only was reset since.
				began := len(r.Sales) == 0 && r.begin(epoch, len(ceilings))
				return r.lower(epoch, ceilings) || began
			})
			cancel()
		}
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrNotWitnessed, err)
		}
		w.mu.Lock()
		if err == nil {
			w.flushed = max(w.flushed, seq)
		}
		rest := w.waiters[:0]
		for _, wt := range w.waiters {
			if wt.seq <= seq {
				wt.ch <- err
			} else {
				rest = append(rest, wt)
			}
		}
		w.waiters = rest
		w.mu.Unlock()
	}
}

// errEpochUnknown is learnEpoch's refusal of a Redis whose epoch the
// witness never recorded.
var errEpochUnknown = errors.New("epoch unknown to the witness")

// check compares the epoch Redis holds with the record, and seeds the
// watermark with the record's ceilings for it. A record with no sale yet
// (a witness added to a running sale, an upgrade) adopts Redis's epoch.
func (w *witness) check(ctx context.Context, redisEpoch string) error {
	// Read fresh, never from the cache: another replica's reset since
	// this process last wrote is exactly what must be seen here.
	rec, _, err := w.load(ctx)
	if err != nil {
		return err
	}
	if len(rec.Sales) == 0 && redisEpoch != "" {
		rec, err = w.update(ctx, func(r *witnessRecord) bool {
			return len(r.Sales) == 0 && r.begin(redisEpoch, len(w.mark.ceilings))
		})
		if err != nil {
			return err
		}
	}
	if len(rec.Sales) == 0 {
		w.mark.reset(redisEpoch)
		return nil
	}
	latest := rec.Sales[len(rec.Sales)-1].Epoch
	if redisEpoch == "" {
		return fmt.Errorf("stock: %w: the sale's epoch is missing from redis, the witness (%s) recorded %s", ErrStoreLost, w.reg.Name(), latest)
	}
	sale := rec.find(redisEpoch)
	if sale == nil {
		return fmt.Errorf("%w: redis holds sale epoch %s, the witness (%s) last recorded %s: another sale's data", errEpochUnknown, redisEpoch, w.reg.Name(), latest)
	}
	w.mark.reset(redisEpoch)
	w.mark.seed(sale.Ceilings)
	return nil
}

// PingWitness reads the witness's record: nil when it answers and holds
// one of ours (or none yet), or without a witness.
func (s *Store) PingWitness(ctx context.Context) error {
	if s.wit == nil {
		return nil
	}
	_, _, err := s.wit.load(ctx)
	return err
}

// Rewind says in one line when a Redis that went back in time (an older
// snapshot, a failover to a lagging replica, another sale's data) is
// caught: for GET /info.
func (s *Store) Rewind() string {
	if s.wit == nil {
		return "caught while a stockd that sold in this sale keeps running; missed if every stockd restarts with the Redis, " +
			"or if it loads another sale's data (stock.witness none)"
	}
	return "caught whichever processes restart: every sale answered 200 is recorded in " + s.wit.reg.Name() + " first"
}
