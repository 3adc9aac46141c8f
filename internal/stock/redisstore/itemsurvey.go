package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
)

// ItemsSurvey is every item's halt mark and books at one reading, for
// /readyz and the leader's audit.
type ItemsSurvey struct {
	Items  int      // items in the registry
	IDs    []string // their ids, sorted
	Halted []string // the ids of the halted items, sorted
	// Stock is the units left over all items (a stock key missing or not
	// an integer counts none).
	Stock int64
	// Books are every item's books at this reading, in id order (a key
	// missing or not an integer reads 0): the items' gauges, and the
	// audit's, which judges them (ItemBooks.Problems).
	Books []ItemBooks
}

// ItemBooks are one item's books, as one survey read them.
type ItemBooks struct {
	ID string
	api.Books
	// Judged: its stock and the stock of its reset were both read. An
	// item with no stock of its reset (created by hand, or lost) has no
	// books to judge here; /readyz and the sale say it is lost.
	Judged bool
	// Orders is the ledger's orders (XLEN plus trimmed), -1 with the
	// ledger off.
	Orders int64
}

// Problems are what is wrong with the item's books (api.Books.Problems)
// and, with the ledger on, with its ledger against them: none when it was
// not Judged.
func (b ItemBooks) Problems() []string {
	if !b.Judged {
		return nil
	}
	bad := b.Books.Problems()
	if b.Orders >= 0 {
		if p := api.LedgerProblem(b.Orders, b.Lucky); p != "" {
			bad = append(bad, p)
		}
	}
	return bad
}

// Problems are every item's (ItemBooks.Problems), each prefixed with
// "item <id>: ", in id order.
func (s ItemsSurvey) Problems() []string {
	var bad []string
	for _, it := range s.Books {
		for _, p := range it.Problems() {
			bad = append(bad, "item "+it.ID+": "+p)
		}
	}
	return bad
}

//go:embed lua/survey.lua
var surveySrc string

var surveyScript = redis.NewScript(surveySrc)

// Survey reads every item's halt mark and books: the registry's ids, then
// one pipeline of survey.lua per item (its halt, books and, with the
// ledger on, its orders, at one instant). Two round trips whatever the
// count, which MaxItems bounds; a script per item, not one for all,
// because a Redis Cluster runs a script on one slot and each item has a
// slot of its own (nor a MULTI per item: go-redis sends a cluster node's
// MULTIs as one, across its slots).
func (m *Items) Survey(ctx context.Context) (ItemsSurvey, error) {
	ids, err := m.cfg.Redis.HKeys(ctx, ItemRegistry).Result()
	if err != nil {
		return ItemsSurvey{}, WrapRedis(ctx, "item registry", err)
	}
	out := ItemsSurvey{Items: len(ids)}
	if len(ids) == 0 {
		return out, nil
	}
	slices.Sort(ids)
	out.IDs = ids
	ledger := m.cfg.Base.Orders != ""
	keys := make([][]string, len(ids))
	for i, id := range ids {
		k := ItemKeys(m.cfg.Base, id)
		keys[i] = []string{k.Halt, k.Stock, k.Lucky, k.Initial, k.Returned}
		if ledger {
			keys[i] = append(keys[i], k.Orders, k.Trimmed)
		}
	}
	run := func(eval func(p redis.Pipeliner, keys []string) *redis.Cmd) []*redis.Cmd {
		cmds := make([]*redis.Cmd, len(ids))
		_, _ = m.cfg.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range ids {
				cmds[i] = eval(p, keys[i])
			}
			return nil
		}) // each command carries its own error
		return cmds
	}
	cmds := run(func(p redis.Pipeliner, k []string) *redis.Cmd { return surveyScript.EvalSha(ctx, p, k) })
	if slices.ContainsFunc(cmds, func(c *redis.Cmd) bool { return redis.HasErrorPrefix(c.Err(), "NOSCRIPT") }) {
		cmds = run(func(p redis.Pipeliner, k []string) *redis.Cmd { return surveyScript.Eval(ctx, p, k) })
	}
	for i, c := range cmds {
		vals, err := c.Slice()
		if err == nil && len(vals) != 6 {
			err = fmt.Errorf("unexpected reply %v", vals)
		}
		if err != nil {
			return ItemsSurvey{}, WrapRedis(ctx, "item "+ids[i]+": books", err)
		}
		if h, _ := vals[0].(string); h != "" {
			out.Halted = append(out.Halted, ids[i])
		}
		var n [3]int64
		var have [3]bool
		for j, v := range vals[1:4] {
			if s, ok := v.(string); ok && s != "" {
				n[j], err = strconv.ParseInt(s, 10, 64)
				have[j] = err == nil
			}
		}
		if have[0] && n[0] > 0 {
			out.Stock += n[0]
		}
		b := ItemBooks{ID: ids[i], Books: api.Books{Stock: n[0], Lucky: n[1], Initial: n[2]}, Judged: have[0] && have[2], Orders: -1}
		if s, ok := vals[5].(string); ok && s != "" {
			b.Returned, _ = strconv.ParseInt(s, 10, 64) // not a number: none, as the others
		}
		if o, ok := vals[4].(int64); ok && ledger {
			b.Orders = o
		}
		out.Books = append(out.Books, b)
	}
	return out, nil
}
