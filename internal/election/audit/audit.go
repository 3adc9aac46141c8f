// Package audit is the leader-only job of seckill: every interval the elected
// replica checks the sale's invariants in Redis — stock never negative, and
// stock + lucky equal to what the last reset put in — and records the result
// in a capped Redis stream, together with the replica's name and its
// election term.
//
// The record is fenced by the term: a Lua script keeps the highest term it
// has recorded and refuses an entry with a lower one, so a leader that was
// paused past its session TTL and wakes up still believing it leads cannot
// add a run after its successor has.
package audit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/election"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

//go:embed lua/record.lua
var recordSrc string

var recordScript = redis.NewScript(recordSrc)

// Defaults for Config.
const (
	DefaultStream  = "seckill:audit"
	DefaultTermKey = "seckill:audit:term"
	DefaultMaxLen  = 1000
)

var (
	// ErrFenced: a leader with a higher term has already recorded a run;
	// the caller has been deposed. It wraps election.ErrNotLeader.
	ErrFenced = fmt.Errorf("audit: term fenced: %w", election.ErrNotLeader)

	// ErrRedis: Redis could not be read or written.
	ErrRedis = errors.New("audit: redis")
)

// Config names the keys and identity of one auditor.
type Config struct {
	// Stock and Lucky are the sale's keys (stock.key, stock.lucky_key);
	// Fence is the stock fence hash (stock.fence_key), recorded as seen.
	Stock, Lucky, Fence string
	// Segments is stock.segments: the stock is the sum of that many keys
	// (stock.SegmentKey), each of which must stay non-negative. 0 or 1
	// means the one key Stock.
	Segments int
	// Initial, if set, is a key holding the stock the last reset started
	// with. When it is empty or missing, the auditor learns the initial
	// stock instead: stock+lucky when first seen, and again whenever
	// lucky is 0 (a reset, or a sale not started yet).
	Initial string
	// Stream is the audit stream. The default is "seckill:audit".
	Stream string
	// TermKey is the hash of highest recorded terms per election backend.
	// The default is "seckill:audit:term".
	TermKey string
	// MaxLen caps the stream (approximately, XADD MAXLEN ~). The default
	// is 1000.
	MaxLen int64
	// Replica and Backend identify who records: the replica name and the
	// election backend whose terms are recorded. Required.
	Replica, Backend string
	// Ledger, if set, is the order ledger (stock.ledger on): its orders
	// must equal lucky. Nil: not checked.
	Ledger Ledger
	// Durable, if set with Ledger, is the ledger's copy in MySQL
	// (orders.durable): with no lag, its rows for the sale must equal the
	// ledger's orders. Nil: not checked.
	Durable DurableOrders
	// Items, if set, are the sale's items (docs/items.md): each item's
	// books must balance as the default sale's do, and with the ledger on
	// its orders equal its lucky. Nil: not checked.
	Items ItemsSurveyor
	// ItemLedgers, if set with Items, is an item's ledger and durable
	// copy (orders.durable): each run reconciles one item's, the next in
	// id order, as Durable is the default sale's. Nil: not checked.
	ItemLedgers ItemLedgers
	// Reservations, if set, is the sale's reservations
	// (orders.payment_window): their census must name no broken
	// invariant (docs/reservations.md). Nil: not checked.
	Reservations Reservations
	// Logger receives the durable comparisons skipped for a MySQL or
	// Redis failure. The default is slog.Default().
	Logger *slog.Logger
}

// Reservations counts every order by state beside the counters;
// *redisstore.Store implements it.
type Reservations interface {
	Census(ctx context.Context) (redisstore.Census, error)
}

// ItemsSurveyor reads every item's books at one reading; *redisstore.Items
// implements it.
type ItemsSurveyor interface {
	Survey(ctx context.Context) (redisstore.ItemsSurvey, error)
}

// Record is one audit run.
type Record struct {
	ID      string    `json:"id,omitempty"` // stream entry id, "" if not recorded
	Replica string    `json:"replica"`
	Backend string    `json:"backend"`
	Term    uint64    `json:"term"`
	At      time.Time `json:"at"`
	Stock   int64     `json:"stock"`
	Lucky   int64     `json:"lucky"`
	Initial int64     `json:"initial"`
	// Returned is the units reservations gave back (docs/reservations.md):
	// the books judged are stock + lucky - returned = initial. Recorded
	// only when not 0.
	Returned int64  `json:"returned,omitempty"`
	Learned  bool   `json:"learned"` // Initial was learned, not read from Config.Initial
	Fence    string `json:"fence"`   // the stock fence as seen, "<lock>:<token>" (e.g. "redis/seckill:lock:7") or ""
	// Ledger is the order ledger as checked (Config.Ledger); nil when not.
	Ledger *LedgerRecord `json:"ledger,omitempty"`
	// Items is how many items were checked (Config.Items), -1 when none
	// were; an item whose books do not balance is a problem named for it.
	Items int `json:"items"`
	// ItemLedger is the item ledger this run reconciled with its durable
	// copy (Config.ItemLedgers), nil when none.
	ItemLedger *LedgerRecord `json:"item_ledger,omitempty"`
	OK         bool          `json:"ok"`
	Problems   []string      `json:"problems,omitempty"`
}

// Client is the part of a go-redis client the Auditor needs (a
// *redis.Client satisfies it), narrow so tests can inject faults.
type Client interface {
	redis.Scripter
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
}

// Auditor runs audits. It is safe for concurrent use.
type Auditor struct {
	rdb Client
	cfg Config

	initial api.InitialLearner // the initial stock, when no key holds it

	mu sync.Mutex
	// nextItem: the item whose durable copy the next run reconciles is
	// the first whose id is not below it (checkItemDurable).
	nextItem string
}

// New returns an Auditor over rdb. The caller owns rdb.
func New(rdb Client, cfg Config) *Auditor {
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if cfg.TermKey == "" {
		cfg.TermKey = DefaultTermKey
	}
	if cfg.MaxLen <= 0 {
		cfg.MaxLen = DefaultMaxLen
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Auditor{rdb: rdb, cfg: cfg}
}

// Check reads the sale and evaluates its invariants, without recording.
func (a *Auditor) Check(ctx context.Context, term uint64) (Record, error) {
	r := Record{Replica: a.cfg.Replica, Backend: a.cfg.Backend, Term: term, At: time.Now()}
	segs := max(a.cfg.Segments, 1)
	// The sale's own reader (redisstore.ReadBooks): every segment, lucky
	// and the initial stock at one instant.
	keys := redisstore.Keys{Stock: a.cfg.Stock, Lucky: a.cfg.Lucky, Initial: a.cfg.Initial, Segments: segs}
	books, err := redisstore.ReadBooks(ctx, a.rdb, keys)
	var bad []string
	switch {
	case errors.Is(err, stock.ErrNotInteger):
		// A counter no sale can use is the audit's finding, not its
		// failure: recorded, with the books it could not sum.
		bad = append(bad, err.Error())
	case err != nil:
		return r, fmt.Errorf("%w: read sale: %w", ErrRedis, err)
	}
	fence, err := a.rdb.HGetAll(ctx, a.cfg.Fence).Result()
	if err != nil {
		return r, fmt.Errorf("%w: read fence: %w", ErrRedis, err)
	}
	if len(fence) > 0 {
		r.Fence = fence["lock"] + ":" + fence["token"]
	}
	if len(bad) == 0 { // the books could be read: judge them
		more, err := a.checkBooks(ctx, &r, books, segs)
		if err != nil {
			return r, err
		}
		bad = append(bad, more...)
	}
	r.Items = -1
	if a.cfg.Items != nil {
		sv, err := a.cfg.Items.Survey(ctx)
		if err != nil {
			return r, fmt.Errorf("%w: read items: %w", ErrRedis, err)
		}
		r.Items = sv.Items
		bad = append(bad, sv.Problems()...)
		_, l, more, err := a.checkItemDurable(ctx, sv.IDs)
		if err != nil {
			return r, err
		}
		r.ItemLedger = l
		bad = append(bad, more...)
	}
	r.OK, r.Problems = len(bad) == 0, bad
	return r, nil
}

// checkBooks judges the default sale's books as read (and, with the
// ledger, its orders against lucky), filling r.
func (a *Auditor) checkBooks(ctx context.Context, r *Record, books redisstore.Books, segs int) ([]string, error) {
	r.Stock, r.Lucky, r.Returned = books.Stock, books.Lucky, books.Returned
	r.Initial = books.Initial
	if !books.HaveInitial {
		r.Initial, r.Learned = a.initial.Learn(r.Stock, r.Lucky-r.Returned), true
	}
	judged := api.Books{Stock: r.Stock, Lucky: r.Lucky, Returned: r.Returned, Initial: r.Initial}
	if segs > 1 {
		judged.Segments = books.Segments
	}
	bad := judged.Problems()
	if a.cfg.Reservations != nil {
		c, err := a.cfg.Reservations.Census(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: reservations' census: %w", ErrRedis, err)
		}
		bad = append(bad, c.Problems()...)
	}
	if a.cfg.Ledger != nil {
		more, err := a.checkLedger(ctx, r)
		if err != nil {
			return nil, err
		}
		bad = append(bad, more...)
	}
	return bad, nil
}

// Run checks the sale and records the result under term. It returns the
// record and ErrFenced if a higher term has recorded already.
func (a *Auditor) Run(ctx context.Context, term uint64) (Record, error) {
	r, err := a.Check(ctx, term)
	if err != nil {
		return r, err
	}
	return a.Write(ctx, r)
}

// Write records r in the stream if r.Term is not lower than the highest
// term recorded for r.Backend. It is Run's second half, exported so a test
// can play a deposed leader writing late.
func (a *Auditor) Write(ctx context.Context, r Record) (Record, error) {
	args := []any{r.Backend, strconv.FormatUint(r.Term, 10), a.cfg.MaxLen,
		"replica", r.Replica, "backend", r.Backend, "term", r.Term,
		"at", r.At.UnixMilli(), "stock", r.Stock, "lucky", r.Lucky, "initial", r.Initial,
		"learned", r.Learned, "fence", r.Fence, "ok", r.OK, "problems", fmt.Sprint(r.Problems), "items", r.Items}
	if r.Returned != 0 {
		args = append(args, "returned", r.Returned)
	}
	args = append(args, r.Ledger.fields()...)
	if l := r.ItemLedger; l != nil {
		args = append(args, "item_ledger", l.Item, "item_lag", l.Lag)
		if l.Durable != nil {
			args = append(args, "item_durable", *l.Durable)
		}
	}
	res, err := recordScript.Run(ctx, a.rdb, []string{a.cfg.TermKey, a.cfg.Stream}, args...).Slice()
	if err != nil {
		return r, fmt.Errorf("%w: record: %w", ErrRedis, err)
	}
	if len(res) != 2 {
		return r, fmt.Errorf("%w: record: unexpected reply %v", ErrRedis, res)
	}
	if code, _ := res[0].(int64); code != 0 {
		return r, fmt.Errorf("%w: term %d < recorded %v", ErrFenced, r.Term, res[1])
	}
	r.ID = fmt.Sprint(res[1])
	return r, nil
}
