package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"seckill/internal/stock"
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
//   - Redis holds a sale the witness has no record of, or the record
//     went back (ErrWitnessLost): halted, reason witness_lost. The
//     witness forgot (a wiped or new store) or was restored from a
//     backup; Redis alone cannot say which acknowledged sales it still
//     holds, and one process's memory is not every replica's, so nothing
//     is adopted without an operator (AdoptWitness).
//
// Unknown means halt, and the record cannot go back unseen: it carries a
// generation that rises with every write, each process remembers the
// highest it has seen and refuses a lower one (a restored etcd snapshot or
// MySQL backup, caught at the next read or write), and the register
// compares bytes, not a server-side version a restore would take back too
// (register.go).
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

// witnessFormat is the record's format version. A reader that finds a
// newer one refuses it (ErrWitnessFormat) rather than drop the fields it
// does not know and write the record back without them. 0 is a record
// written before formats and generations (an older stockd during a
// rolling upgrade): read as format 1, generation unknown.
const witnessFormat = 1

// witnessRecord is the register's value, JSON.
type witnessRecord struct {
	Format int `json:"format"`
	// Gen rises by one with every write (update), from the highest the
	// writer has seen: a record below a generation a process saw went
	// back, and no two records share their bytes.
	Gen int64 `json:"gen"`
	// Sales lists recent epochs, oldest first.
	Sales []witnessSale `json:"sales"`
	// Adopted is the last operator adoption of a sale from Redis, if any.
	Adopted *WitnessAdoption `json:"adopted,omitempty"`
}

// WitnessAdoption is an operator's decision to take Redis's sale as the
// truth after the witness lost it: who, when, and the books then.
type WitnessAdoption struct {
	ID string `json:"id"` // new with each adoption, as an epoch with each reset
	// Kind is "reconcile" for a Reconcile's record (Redis's counts
	// rebuilt), "" for an adoption of Redis's as they were.
	Kind   string    `json:"kind,omitempty"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Epoch  string    `json:"epoch"`
	Stocks []int64   `json:"stocks"` // per segment, as Redis held them (with reservations, less the units returned)
	Lucky  int64     `json:"lucky"`
	// Why is the halt the adoption lifted ("" when there was none).
	Why string `json:"why,omitempty"`
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
	reg     stock.Register
	timeout time.Duration
	mark    *watermark
	// note says what the witness itself does not survive (NoteWitness);
	// set before the first sale.
	note string

	// cache is the record as last read or written, and raw its bytes in
	// the register (nil: nothing stored); none while !cacheOK. high is
	// the highest generation this process has seen.
	cacheMu  sync.Mutex
	cache    witnessRecord
	cacheRaw []byte
	cacheOK  bool
	high     int64
	seen     map[string]bool // every epoch and adoption id read or written

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
func (s *Store) WithWitness(r stock.Register, timeout time.Duration) *Store {
	if timeout <= 0 {
		timeout = DefaultWitnessTimeout
	}
	return s.with(s.acks, r, timeout)
}

// with is a store over the same client and keys whose every segment waits
// for acks a and is witnessed in reg (nil: none), with a memory of the
// sale of its own.
func (s *Store) with(a ReplicaAcks, reg stock.Register, timeout time.Duration) *Store {
	n := NewStore(s.rdb, s.keys)
	// What the store is keeps (reservations, durable states); only its
	// memory of the sale is new.
	s.mark.mu.Lock()
	n.mark.rising = s.mark.rising
	s.mark.mu.Unlock()
	var w *witness
	if reg != nil {
		w = &witness{reg: reg, timeout: timeout, mark: n.mark}
	}
	for _, seg := range n.segs {
		seg.acks, seg.wit, seg.clock, seg.units, seg.durableStates = a, w, s.clock, s.units, s.durableStates
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
var ErrNotWitnessed = fmt.Errorf("%w: the witness did not record the sale", stock.ErrUnavailable)

// load reads the record. Unless back is set (a reset, an adoption: the
// operator's new start), a record whose generation is below the highest
// this process has seen is a witness that went back: ErrWitnessLost.
func (w *witness) load(ctx context.Context, back bool) (witnessRecord, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	// The generation to compare with is the highest seen before the read
	// began: this process's own write may land while the read is out, and
	// the record read is then older than that write, not gone back.
	w.cacheMu.Lock()
	before := w.high
	w.cacheMu.Unlock()
	raw, err := w.reg.Get(ctx)
	if err != nil {
		return witnessRecord{}, nil, fmt.Errorf("stock: read the witness (%s): %w: %w", w.reg.Name(), stock.ErrUnavailable, err)
	}
	var rec witnessRecord
	if raw != nil {
		if err := json.Unmarshal(raw, &rec); err != nil {
			return rec, nil, fmt.Errorf("stock: the witness (%s) holds no record of ours: %w", w.reg.Name(), err)
		}
		if rec.Format > witnessFormat {
			return rec, nil, fmt.Errorf("%w: the witness (%s) holds format %d, this stockd reads up to %d", stock.ErrWitnessFormat, w.reg.Name(), rec.Format, witnessFormat)
		}
	}
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	// A format-0 record is an older stockd's, which writes no generation:
	// nothing to compare until every replica runs this one. A record
	// whose newest epoch or adoption this process never saw is a new
	// start (another process's reset or adoption, from the generation it
	// knew): no backup holds an id made after it was taken.
	legacy := raw != nil && rec.Format == 0
	if rec.Gen < before && !back && !legacy && !w.novel(rec) {
		w.cacheOK = false
		return rec, nil, fmt.Errorf("%w: the witness (%s) holds generation %d, below the %d this process saw: it went back (a restored backup, a wiped store)",
			stock.ErrWitnessLost, w.reg.Name(), rec.Gen, before)
	}
	w.see(rec)
	if w.high != before {
		// Newer than this read was seen (written) meanwhile: keep that,
		// and the cache that goes with it.
		w.high = max(w.high, rec.Gen)
		return rec, raw, nil
	}
	// The record is the truth as of now; a new start (reset, adoption)
	// may take the generation below the one seen.
	w.high = rec.Gen
	w.cache, w.cacheRaw, w.cacheOK = rec.clone(), raw, true
	return rec, raw, nil
}

// novel reports whether rec's newest epoch or its adoption is one this
// process has not seen; under cacheMu.
func (w *witness) novel(rec witnessRecord) bool {
	if n := len(rec.Sales); n > 0 && !w.seen[rec.Sales[n-1].Epoch] {
		return true
	}
	return rec.Adopted != nil && !w.seen[rec.Adopted.ID]
}

// see notes rec's epochs and adoption as seen; under cacheMu.
func (w *witness) see(rec witnessRecord) {
	if w.seen == nil {
		w.seen = map[string]bool{}
	}
	for _, s := range rec.Sales {
		w.seen[s.Epoch] = true
	}
	if rec.Adopted != nil {
		w.seen[rec.Adopted.ID] = true
	}
}

// update applies change to the record until a Put of the result lands,
// or change says nothing changed (or fails); it returns the record as
// stored. It starts from the record this process last read or wrote, so
// a round with no other writer is one Put; a Put refused because the
// register holds other bytes reads the record again and merges into it.
// back is load's.
func (w *witness) update(ctx context.Context, back bool, change func(*witnessRecord) (bool, error)) (witnessRecord, error) {
	for range 16 {
		rec, raw, high, ok := w.cached()
		if !ok {
			var err error
			if rec, raw, err = w.load(ctx, back); err != nil {
				return rec, err
			}
			_, _, high, _ = w.cached()
		}
		changed, err := change(&rec)
		if err != nil || !changed {
			return rec, err
		}
		rec.Format, rec.Gen = witnessFormat, max(rec.Gen, high)+1
		v, err := json.Marshal(&rec)
		if err != nil {
			return rec, err
		}
		pctx, cancel := context.WithTimeout(ctx, w.timeout)
		stored, err := w.reg.Put(pctx, v, raw)
		cancel()
		if err != nil {
			w.forget()
			return rec, fmt.Errorf("stock: write the witness (%s): %w: %w", w.reg.Name(), stock.ErrUnavailable, err)
		}
		if stored {
			w.remember(rec.clone(), v)
			return rec, nil
		}
		w.forget() // the register holds other bytes than ours: read them, merge into them
	}
	return witnessRecord{}, fmt.Errorf("stock: write the witness (%s): %w: too many concurrent writers", w.reg.Name(), stock.ErrUnavailable)
}

// cached is a deep copy of the record last read or written, its bytes,
// and the highest generation seen, if a record is cached.
func (w *witness) cached() (witnessRecord, []byte, int64, bool) {
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	if !w.cacheOK {
		return witnessRecord{}, nil, w.high, false
	}
	return w.cache.clone(), w.cacheRaw, w.high, true
}

// clone is a deep copy of r.
func (r witnessRecord) clone() witnessRecord {
	c := r
	c.Sales = make([]witnessSale, len(r.Sales))
	for i, s := range r.Sales {
		c.Sales[i] = witnessSale{Epoch: s.Epoch, Ceilings: slices.Clone(s.Ceilings)}
	}
	if r.Adopted != nil {
		a := *r.Adopted
		a.Stocks = slices.Clone(a.Stocks)
		c.Adopted = &a
	}
	return c
}

// remember caches rec, stored as raw, and raises the highest generation.
func (w *witness) remember(rec witnessRecord, raw []byte) {
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	w.cache, w.cacheRaw, w.cacheOK = rec, raw, true
	w.high = max(w.high, rec.Gen)
	w.see(rec)
}

func (w *witness) forget() {
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	w.cache, w.cacheRaw, w.cacheOK = witnessRecord{}, nil, false
}

// begin records a reset's epoch before Redis gets it. A reset is the
// operator's new start, so it writes over a record that went back.
func (w *witness) begin(ctx context.Context, epoch string, segments int) error {
	_, err := w.update(ctx, true, func(r *witnessRecord) (bool, error) { return r.begin(epoch, segments), nil })
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
			_, err = w.update(ctx, false, func(r *witnessRecord) (bool, error) {
				// A record without the sale this process sells in forgot
				// it (a new etcd, an emptied table, a backup from before
				// the reset): writing this process's ceilings into it
				// would "record" one replica's sales, not every one's.
				if r.find(epoch) == nil {
					return false, fmt.Errorf("%w: the witness (%s) has no record of sale %s, in which this process sold", stock.ErrWitnessLost, w.reg.Name(), epoch)
				}
				return r.lower(epoch, ceilings), nil
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

// check compares the epoch Redis holds with the record, has verify hold
// Redis's stocks against the record's ceilings for it, and seeds the
// watermark with them. A record with no sale
// while Redis holds one (a wiped or new witness, one added to a running
// sale) is ErrWitnessLost: only an operator adopts Redis's sale
// (AdoptWitness).
func (w *witness) check(ctx context.Context, redisEpoch string, verify func(ceilings []int64) error) error {
	// Read fresh, never from the cache: another replica's reset since
	// this process last wrote is exactly what must be seen here.
	rec, _, err := w.load(ctx, false)
	if err != nil {
		return err
	}
	if len(rec.Sales) == 0 {
		if redisEpoch != "" {
			return fmt.Errorf("%w: redis holds sale %s, the witness (%s) holds no record of any sale: it forgot, or never had it",
				stock.ErrWitnessLost, redisEpoch, w.reg.Name())
		}
		w.mark.reset(redisEpoch)
		return nil
	}
	latest := rec.Sales[len(rec.Sales)-1].Epoch
	if redisEpoch == "" {
		return fmt.Errorf("stock: %w: the sale's epoch is missing from redis, the witness (%s) recorded %s", stock.ErrStoreLost, w.reg.Name(), latest)
	}
	sale := rec.find(redisEpoch)
	if sale == nil {
		return fmt.Errorf("%w: redis holds sale epoch %s, the witness (%s) last recorded %s: another sale's data", errEpochUnknown, redisEpoch, w.reg.Name(), latest)
	}
	if err := verify(sale.Ceilings); err != nil {
		return err
	}
	w.mark.learn(redisEpoch, sale.Ceilings)
	return nil
}

// PingWitness reads the witness's record: nil when it answers and holds
// one of ours (or none yet), or without a witness.
func (s *Store) PingWitness(ctx context.Context) error {
	if s.wit == nil {
		return nil
	}
	_, _, err := s.wit.load(ctx, false)
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
	claim := "caught whichever processes restart: every sale answered 200 is recorded in " + s.wit.reg.Name() + " first"
	if s.wit.note != "" {
		claim += "; but the witness is " + s.wit.note
	}
	return claim
}

// NoteWitness adds to Rewind's claim what the witness itself does not
// survive, as stockd surveyed it at start ("" when nothing is amiss).
// Call it before the first sale.
func (s *Store) NoteWitness(note string) {
	if s.wit != nil {
		s.wit.note = note
	}
}

// superseded reports whether the register now holds, for epoch, an
// operator's new start (an adoption, a reconcile) that this process had
// not seen: a witness_lost verdict it reached was about the record before
// it.
func (w *witness) superseded(ctx context.Context, epoch string) bool {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	raw, err := w.reg.Get(ctx)
	if err != nil || raw == nil {
		return false
	}
	var rec witnessRecord
	if json.Unmarshal(raw, &rec) != nil || rec.Adopted == nil || rec.Adopted.Epoch != epoch || rec.find(epoch) == nil {
		return false
	}
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	return !w.seen[rec.Adopted.ID]
}

// haltLost halts the sale of epoch for a witness that lost it (why starts
// with witness_lost), then reads the record again: an operator's adoption
// or reconcile that landed after this process read the record it judged
// (and lifted the halts it found) must not be undone by this halt, which
// is then taken back, if it is still this one.
func (s *Store) haltLost(ctx context.Context, op, epoch, why string) error {
	wrote, err := s.rdb.SetNX(ctx, s.keys.Halt, why, 0).Result()
	if err != nil {
		return WrapRedis(ctx, "write halt", err)
	}
	// Only a halt this call wrote is taken back: another process's, even
	// of the same words, is the operator's to lift (a reconcile in
	// progress compares it).
	if !wrote || s.wit == nil || epoch == "" || !s.wit.superseded(ctx, epoch) {
		return s.halted(ctx, op)
	}
	if err := liftHalt.Run(ctx, s.rdb, []string{s.keys.Halt}, why).Err(); err != nil {
		return WrapRedis(ctx, "lift the halt", err)
	}
	s.wit.forget()
	s.mark.forget()
	return fmt.Errorf("stock: %s: %w: the witness was adopted or reconciled meanwhile", op, stock.ErrUnavailable)
}

// witnessLostReason is err's text from ErrWitnessLost's on: the halt's
// reason, which starts with witness_lost however deep err wraps it.
func witnessLostReason(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, stock.ErrWitnessLost.Error()); i >= 0 {
		return msg[i:]
	}
	return stock.ErrWitnessLost.Error() + ": " + msg
}

// haltReason is the halt's reason for a refusal of check.
func haltReason(err error) string {
	if errors.Is(err, stock.ErrWitnessLost) {
		return witnessLostReason(err)
	}
	return err.Error()
}

// WitnessBackupBefore is the record raw as a backup of the witness taken
// before epoch's reset holds it: without epoch's sale (nor those after
// it), and of an older generation (half raw's). The fault lab's witness-restore cell writes it back while the
// replicas sell, as an operator restoring last night's etcd snapshot or
// MySQL dump would; here, so that the record's format lives in one place.
func WitnessBackupBefore(raw []byte, epoch string) ([]byte, error) {
	var rec witnessRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("stock: not a witness record: %w", err)
	}
	i := slices.IndexFunc(rec.Sales, func(s witnessSale) bool { return s.Epoch == epoch })
	if i < 0 {
		return nil, fmt.Errorf("stock: the witness record holds no sale %s", epoch)
	}
	rec.Sales = slices.Delete(rec.Sales, i, len(rec.Sales))
	rec.Gen = max(rec.Gen/2, 1)
	if rec.Adopted != nil && rec.Adopted.Epoch == epoch {
		rec.Adopted = nil
	}
	return json.Marshal(&rec)
}
