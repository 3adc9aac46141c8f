package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

// ledger.go: the store's side of the order ledger (Keys.Orders).
//
// The ledger is written by the scripts that take the units (ledger.lua,
// shared by fenced_write.lua and sell_atomic.lua), never by a second call:
// a sale and its order are one script run, so neither can exist without the
// other, and the per-user limit and the idempotency key are checked against
// what every earlier run wrote, across segments, batches and replicas,
// because Redis runs one script at a time. The stream is what the durable
// consumer (internal/orders) reads; the index, buyer counts and per-user
// set are there to answer Order, OrdersByUser and the limit without
// scanning it.

// Order reading limits (OrdersByUser).
const (
	DefaultOrdersLimit = 50
	MaxOrdersLimit     = 500
)

// A Reset sweeps the idempotency records of the sale it ends with at most
// resetSweepCalls SCANs of resetSweepCount keys each (a million keys
// looked at). The records are harmless (a record names its sale, and one
// of another sale reads as absent) and expire by their TTL, so the sweep
// only frees memory early; a Reset must not take unbounded time for it.
const (
	resetSweepCalls = 1000
	resetSweepCount = 1000
)

// freshSale is the sale id this process offers a script that finds none
// (a stock never reset): the first script to find it missing sets it, and
// every later one, of any process, reads that.
var freshSale = newSaleID()

func ledgerArgv(a stock.LedgerArgs) []any {
	ttl := a.TTL
	if ttl <= 0 {
		ttl = stock.DefaultIdempotencyTTL
	}
	return []any{a.Limit, ttl.Milliseconds(), a.Replica, a.Now.UnixMilli(), freshSale}
}

// ledgerMembers appends the members' arguments to args, then the payment
// window (ledger.lua: after the members, in ms; 0 none).
func ledgerMembers(args []any, members []stock.Member, a stock.LedgerArgs) []any {
	return append(memberArgs(args, members), a.PaymentWindow.Milliseconds())
}

// Ledger reports whether sales write the order ledger (Keys.Orders set).
func (s *Store) Ledger() bool { return s.keys.Orders != "" }

// ledgerKeys are the ledger keys of a script run (ledger.lua's KEYS[kb..]):
// the fixed ones, then each member's idempotency record.
func (s *Store) ledgerKeys(keys []string, members []stock.Member) []string {
	k := s.keys
	keys = append(keys, k.Orders, k.Sale, k.Buyers, k.OrderIndex, k.ByUser, s.idemIndex())
	for _, m := range members {
		keys = append(keys, s.idemKey(m.User, m.Key))
	}
	return append(keys, k.States, k.Due, k.LifeNow)
}

// idemIndex names the idempotency records' index (ledger.lua): under
// their prefix, so a reset's sweep takes it with them, and with no digit
// first, so no record can have its name.
func (s *Store) idemIndex() string { return s.keys.Idempotency + "by-time" }

// idemKey names the idempotency record of key sent by user: a key is its
// buyer's own (as Stripe scopes keys to the account), so another buyer
// sending the same key makes a purchase of its own and cannot squat on
// it. Anonymous keys share one scope of their own. The user's length
// comes first, so no user and key can name another pair's record (both
// may hold ':'). With no key it is the prefix alone: never read.
func (s *Store) idemKey(user, key string) string {
	if key == "" {
		return s.keys.Idempotency
	}
	return s.keys.Idempotency + strconv.Itoa(len(user)) + ":" + user + ":" + key
}

func memberArgs(args []any, members []stock.Member) []any {
	for _, m := range members {
		args = append(args, m.User, m.Key, m.ID)
	}
	return args
}

// writeLedger is the fenced write's ledger form: under f, which read the
// stock as read, it sells to members in order (ledger.lua) and returns what
// each got. Exactly-once per lease like Write: a retry returns the first
// run's verdicts.
func (s *Store) writeLedger(ctx context.Context, f stock.Fence, read int64, members []stock.Member, la stock.LedgerArgs) ([]stock.Verdict, error) {
	args := []any{f.Lock, strconv.FormatUint(f.Token, 10), f.Lease, read, ReceiptTTL.Milliseconds(), len(members)}
	keys, args := s.windowed(s.receiptKept(s.ledgerKeys([]string{s.keys.Stock, s.keys.Lucky, s.keys.Fence, s.keys.Receipts + f.Lease}, members),
		ledgerMembers(append(args, ledgerArgv(la)...), members, la)))
	cmd, wait := s.eval(ctx, s.scripts().write, keys, args...)
	res, err := cmd.Slice()
	if err != nil {
		return nil, WrapRedis(ctx, "fenced write", err)
	}
	code, outcomes, bound, _, err := ledgerReply(res)
	if err != nil {
		return nil, fmt.Errorf("stock: fenced write: %w", err)
	}
	if werr := windowCode(code, bound); werr != nil {
		return nil, fmt.Errorf("stock: fenced write: %w", werr)
	}
	if code == resultNotInt {
		return nil, fmt.Errorf("stock: fenced write: %w", notInt(s.keys.Lucky))
	}
	if code == resultLost {
		return nil, fmt.Errorf("stock: fenced write: %w", lost(s.keys.Stock))
	}
	if err := fenceStatus(code, f, ""); err != nil {
		return nil, fmt.Errorf("stock: fenced write: %w", err)
	}
	vs, err := parseVerdicts(outcomes, len(members))
	if err != nil {
		return nil, err
	}
	if answersSale(vs...) {
		if err := s.acked(ctx, "fenced write", wait); err != nil {
			return vs, err // a replay's original order names its unconfirmed answer
		}
	}
	// Written under the lease's read, so under the current epoch (a reset
	// deletes the fence): each unit sold lowers the ceiling.
	for _, v := range vs {
		if v.Kind == stock.VerdictSold {
			s.mark.soldUnder(s.segIndex, f.Lease, v.After)
		}
	}
	return vs, nil
}

// answersSale reports whether any verdict tells its buyer of a sale (sold,
// or a replay of one): those are what replica acks must cover. A refusal
// or sold out needs none; at worst a failover makes it a refusal the
// replica's state would not have given.
func answersSale(vs ...stock.Verdict) bool {
	for _, v := range vs {
		if v.Kind == stock.VerdictSold || v.Kind == stock.VerdictReplay {
			return true
		}
	}
	return false
}

// sellLedger is SellAtomic's ledger form for one buyer, order id id.
func (s *Store) sellLedger(ctx context.Context, id string, b stock.Buyer, la stock.LedgerArgs) (stock.Verdict, error) {
	members := []stock.Member{{Buyer: b, ID: id}}
	var (
		code     int64
		outcomes string
		wait     *redis.Cmd
		epoch    string
		returned int64 = -1 // unknown: answered from a receipt
	)
	err := s.guarded(ctx, func(gkeys []string, gargs []any, e string) error {
		keys, args := s.windowed(s.receiptKept(s.ledgerKeys(append([]string{s.keys.Stock, s.keys.Lucky, s.keys.Receipts + id}, gkeys...), members),
			ledgerMembers(append(append([]any{ReceiptTTL.Milliseconds()}, gargs...), ledgerArgv(la)...), members, la)))
		var cmd *redis.Cmd
		cmd, wait = s.eval(ctx, s.scripts().atomic, keys, args...)
		res, err := cmd.Slice()
		if err != nil {
			return WrapRedis(ctx, "atomic sell", err)
		}
		var bound int64
		if code, outcomes, bound, returned, err = ledgerReply(res); err != nil {
			return fmt.Errorf("stock: atomic sell: %w", err)
		}
		epoch = e
		return s.atomicRefusal(ctx, code, bound)
	})
	switch {
	case err != nil:
		return stock.Verdict{}, err
	case code != 0:
		return stock.Verdict{}, fmt.Errorf("stock: atomic sell: unexpected status %d", code)
	}
	vs, err := parseVerdicts(outcomes, 1)
	if err != nil {
		return stock.Verdict{}, fmt.Errorf("stock: atomic sell: %w", err)
	}
	if answersSale(vs[0]) {
		if err := s.acked(ctx, "atomic sell", wait); err != nil {
			return vs[0], err // a replay's original order names its unconfirmed answer
		}
	}
	if vs[0].Kind == stock.VerdictSold && returned >= 0 {
		// The fresh stock (rewind.go), by what this run's guard read; a
		// retry answered from the receipt lowers no ceiling, since a
		// return may have come since the sale.
		s.mark.sold(epoch, s.segIndex, vs[0].After-returned)
	}
	return vs[0], nil
}

// anonymous are n anonymous members of the batch under lease (one: the
// lease itself), for the public Write, WriteBatch and SellAtomic when the
// ledger is on: their units get orders like any other.
func anonymous(lease string, n int) []stock.Member {
	if n == 1 {
		return []stock.Member{{ID: lease}}
	}
	ms := make([]stock.Member, n)
	for i := range ms {
		ms[i].ID = stock.MemberAttempt(lease, i)
	}
	return ms
}

// ledgerReply splits a ledger script's {status, outcomes} reply, or the
// {status, "", bound} of a closed window (window.lua).
//
// returned is sell_atomic.lua's units returned as its guard read them
// (its fourth element), -1 when the reply has none.
func ledgerReply(res []any) (code int64, outcomes string, bound, returned int64, err error) {
	if len(res) < 2 || len(res) > 4 {
		return 0, "", 0, -1, fmt.Errorf("unexpected reply %v", res)
	}
	code, ok1 := res[0].(int64)
	outcomes, ok2 := res[1].(string)
	ok3, ok4 := true, true
	if len(res) >= 3 {
		bound, ok3 = res[2].(int64)
	}
	returned = -1
	if len(res) == 4 {
		returned, ok4 = res[3].(int64)
	}
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return 0, "", 0, -1, fmt.Errorf("unexpected reply %v", res)
	}
	return code, outcomes, bound, returned, nil
}

// parseVerdicts reads ledger.lua's outcomes, n of them.
func parseVerdicts(s string, n int) ([]stock.Verdict, error) {
	parts := strings.Split(s, ",")
	if len(parts) != n {
		return nil, fmt.Errorf("got %d outcomes for %d buyers: %q", len(parts), n, truncate(s, 80))
	}
	vs := make([]stock.Verdict, n)
	for i, p := range parts {
		v, err := parseVerdict(p)
		if err != nil {
			return nil, err
		}
		vs[i] = v
	}
	return vs, nil
}

func parseVerdict(p string) (stock.Verdict, error) {
	f := strings.Fields(p)
	if len(f) == 0 {
		return stock.Verdict{}, fmt.Errorf("empty outcome")
	}
	v := stock.Verdict{Kind: f[0]}
	switch v.Kind {
	case stock.VerdictLimit, stock.VerdictSoldOut:
		if len(f) == 1 {
			return v, nil
		}
	case stock.VerdictEnded:
		if len(f) == 2 {
			var err error
			if v.Ends, err = strconv.ParseInt(f[1], 10, 64); err == nil {
				return v, nil
			}
		}
	case stock.VerdictSold, stock.VerdictReplay:
		// A sold unit of a sale with a payment window carries its pay_by.
		if len(f) == 4 || (len(f) == 5 && v.Kind == stock.VerdictSold) {
			var err1, err2, err3 error
			v.Order = f[1]
			v.After, err1 = strconv.ParseInt(f[2], 10, 64)
			v.Token, err2 = strconv.ParseUint(f[3], 10, 64)
			if len(f) == 5 {
				v.PayBy, err3 = strconv.ParseInt(f[4], 10, 64)
			}
			if err1 == nil && err2 == nil && err3 == nil {
				return v, nil
			}
		}
	}
	return stock.Verdict{}, fmt.Errorf("bad outcome %q", truncate(p, 80))
}

// isLedgerReceipt tells a ledger write's receipt (outcomes, starting with
// a letter) from the older "<after>[:<units>]" form.
func isLedgerReceipt(v string) bool {
	return v != "" && v[0] >= 'a' && v[0] <= 'z'
}

// newSaleID is a fresh random sale id: 16 hex digits, never a space.
func newSaleID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// resetLedger queues the ledger's part of a Reset on p: a new sale id, and
// the stream, counts, index, trimmed count and per-user set gone (a
// consumer group on the stream goes with it and must be recreated).
func (s *Store) resetLedger(ctx context.Context, p redis.Pipeliner) {
	if !s.Ledger() {
		return
	}
	p.Set(ctx, s.keys.Sale, newSaleID(), 0)
	p.Del(ctx, s.keys.Orders, s.keys.Buyers, s.keys.OrderIndex, s.keys.ByUser, s.keys.Trimmed, s.keys.States, s.keys.Due)
}

// sweepIdempotency unlinks the idempotency records of the sale a Reset
// ends, within the bound above. It runs before the Reset's
// MULTI, so it never unlinks a record of the new sale; a record written
// between the sweep and the MULTI names the old sale, reads as absent from
// then on, and expires by its TTL.
func (s *Store) sweepIdempotency(ctx context.Context) error {
	if !s.Ledger() {
		return nil
	}
	match := globEscape(s.keys.Idempotency) + "*"
	rdb, err := scanner(ctx, s.rdb, s.keys.Idempotency)
	if err != nil {
		return WrapRedis(ctx, "reset: sweep idempotency records", err)
	}
	var cursor uint64
	for range resetSweepCalls {
		keys, next, err := rdb.Scan(ctx, cursor, match, resetSweepCount).Result()
		if err != nil {
			return WrapRedis(ctx, "reset: sweep idempotency records", err)
		}
		if len(keys) > 0 {
			if err := s.rdb.Unlink(ctx, keys...).Err(); err != nil {
				return WrapRedis(ctx, "reset: sweep idempotency records", err)
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
	return nil
}

// scanner is the client whose SCAN finds the keys named like key: on a
// Redis Cluster, where SCAN walks one node, the master of key's slot (a
// sale's keys share one hash tag, so its records are all there); else
// rdb itself.
func scanner(ctx context.Context, rdb redis.UniversalClient, key string) (redis.UniversalClient, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return rdb, nil
	}
	if HashTag(key) == "" {
		return nil, fmt.Errorf("stock: %s has no hash tag: on a Redis Cluster its family spans every node", key)
	}
	return cc.MasterForKey(ctx, key)
}

// globEscape quotes the glob characters of a SCAN MATCH pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ledgerReceipt answers Receipt from a ledger write's receipt v: member i's
// verdict (0 for a lone sale).
func ledgerReceipt(id, v string, i int) (int64, bool, error) {
	parts := strings.Split(v, ",")
	if i >= len(parts) {
		return 0, false, nil
	}
	vd, err := parseVerdict(parts[i])
	if err != nil {
		return 0, false, fmt.Errorf("stock: receipt %s: %w", id, err)
	}
	if vd.Kind != stock.VerdictSold {
		return 0, false, nil
	}
	return vd.After, true, nil
}
