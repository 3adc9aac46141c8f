package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/lab/loadgen"
	"seckill/internal/stock/redisstore"
)

// items.go: the items' cells (docs/items.md), on redis. Each item is sold
// by a loadgen run of its own (Config.Item), its books read from GET
// /items/:id and its answers checked as a history, as `seckill run` does.
// item-halt sells two items at once and halts one mid-sale: the other
// must not notice. item-window sells one through its window, buyers
// arriving before, during and after it. item-restore-all
// (itemstoreloss.go) rewinds two items' Redis under the witness.

// itemScenarios are the items' cells' scenarios: redis only, fenced (the
// unfenced sale sells no item).
var itemScenarios = []string{"item-halt", "item-window", "item-restore-all"}

// isItems reports whether scenario is an items' cell.
func isItems(scenario string) bool { return slices.Contains(itemScenarios, scenario) }

// The item-halt cell: two items of haltStock units, each sold by
// haltRequests requests at haltConcurrency in flight; the first is halted
// once it has sold haltAfter.
const (
	haltStock       = 150
	haltRequests    = 250
	haltConcurrency = 6
	haltAfter       = 30
)

// windowTries are the windows a window cell tries, in turn: the next only
// when the last sold nothing and misplaced nothing, which on a loaded
// machine (every try inside the window unanswered in time) leaves its
// edges untested; the check is then made again on a longer window, not
// dropped.
var windowTries = []time.Duration{windowLasts, 4 * windowLasts}

// The item-window cell: windowRate buyers a second for windowFor, the
// window opening windowOpens after they start and lasting windowLasts,
// over more stock than the window can sell (its edges are then sales
// and refusals, not sold_out).
const (
	windowRate   = 200
	windowFor    = 4 * time.Second
	windowOpens  = time.Second
	windowLasts  = 2 * time.Second
	windowStock  = 1000
	labItemHalt  = "lab-halted"
	labItemOther = "lab-bystander"
	labItemWin   = "lab-window"
)

// ItemResult is one item's books in an items' cell (Result.Items): its
// loadgen run's counts and verdict.
type ItemResult struct {
	ID   string `json:"id"`
	Role string `json:"role"` // "halted", "bystander" or "window"
	// Initial is the item's stock at its reset; Sold its sold answers,
	// StoreLost its 503 store_lost answers, NotStarted and Ended its
	// answers outside the window, Errors every answer that is an error
	// (store_lost included).
	Initial    int             `json:"initial"`
	Sold       int             `json:"sold"`
	SoldOut    int             `json:"sold_out"`
	StoreLost  int             `json:"store_lost,omitempty"`
	NotStarted int             `json:"not_started,omitempty"`
	Ended      int             `json:"ended,omitempty"`
	Errors     int             `json:"errors"`
	Stock      int64           `json:"stock"`
	Lucky      int64           `json:"lucky"`
	Oversold   int64           `json:"oversold"`
	Consistent bool            `json:"consistent"`
	Window     *loadgen.Window `json:"window,omitempty"` // when it has one
	Verdict    string          `json:"verdict"`          // loadgen's (Report.Verdict)
}

// runOwnSale runs a cell whose scenario sells by itself (sc.run): the
// items' cells, the reservation cells; no load on the default sale runs.
// Then the judge.
func runOwnSale(x *run, sc scenario, start time.Time) (_ Result, err error) {
	defer func() {
		for _, undo := range slices.Backward(x.undo) {
			if uerr := undo(); uerr != nil {
				err = errors.Join(err, fmt.Errorf("lab: %s: undo: %w", x.cell, uerr))
			}
		}
	}()
	if err := sc.run(x); err != nil {
		return *x.res, fmt.Errorf("lab: %s: %w\n%s", x.cell, err, x.c.Logs(10))
	}
	x.judge()
	x.res.DurationMS = time.Since(start).Milliseconds()
	x.res.Note, x.res.Slow = strings.Join(x.notes, "; "), x.slow
	return *x.res, nil
}

// itemRun is the loadgen run of item id, for the cell's books.
func (x *run) itemRun(id string, cfg loadgen.Config) loadgen.Config {
	cfg.URL, cfg.AdminToken, cfg.Item, cfg.HistoryDir = x.c.URL(), x.c.AdminToken(), id, historyDir(x.c.Dir())
	cfg.Timeout = time.Minute
	return cfg
}

// addItem adds item id's report to the cell's books: its row in
// Result.Items, its counts to the cell's, its history to the cell's.
func (x *run) addItem(id, role string, rep *loadgen.Report) *ItemResult {
	r := x.res
	ir := ItemResult{
		ID: id, Role: role, Initial: rep.Initial, Sold: rep.Sold, SoldOut: rep.SoldOut, NotStarted: rep.NotStarted,
		Ended: rep.Ended, Errors: rep.Errors, Stock: rep.Stock, Lucky: rep.Lucky, Oversold: rep.Oversold,
		Consistent: rep.Consistent, Verdict: rep.Verdict(),
	}
	if w := rep.Window; w != nil && (w.StartsAt > 0 || w.EndsAt > 0) {
		ir.Window = w
	}
	for _, a := range rep.Answers {
		if a.Result == api.StoreLost {
			ir.StoreLost++
		}
	}
	if len(r.Items) == 0 {
		r.Initial, r.Consistent = 0, true
	}
	r.Items = append(r.Items, ir)
	r.Initial += rep.Initial
	r.Sold += rep.Sold
	r.Busy += rep.Busy
	r.Fenced += rep.Fenced
	r.LockLost += rep.LockLost
	r.Errors += rep.Errors
	r.Unconfirmed += rep.Unconfirmed
	r.UnconfirmedSold += rep.UnconfirmedSold
	r.Stock += rep.Stock
	r.Lucky += rep.Lucky
	r.Oversold += rep.Oversold
	r.Consistent = r.Consistent && rep.Consistent
	if h := rep.History; h != nil {
		if r.History == nil {
			r.History = &Linear{OK: true}
		}
		l := r.History
		l.OK, l.Unknown = l.OK && h.Passed(), l.Unknown || h.Unknown
		l.Ops, l.InFlight, l.CheckMS = l.Ops+h.Ops, max(l.InFlight, h.InFlight), l.CheckMS+h.CheckMS
		if h.Picture != "" {
			l.Picture = h.Picture
		}
		if !h.Passed() {
			x.historyWhy = append(x.historyWhy, fmt.Sprintf("item %s: history %s", id, h.Text()))
		}
	}
	return &r.Items[len(r.Items)-1]
}

// runItemHalt sells two items at once, each by its own run, and halts the
// first once it has sold haltAfter: it sets its halt key, as a replica
// does when it finds the item's Redis went back in time. The halted
// item's sales sent after it must all be refused (store_lost), none sold,
// and its books must balance: what it sold before the halt, it sold
// once. The other item must sell out exactly, as if nothing happened,
// still selling after the halt.
func runItemHalt(x *run) error {
	ids := []string{labItemHalt, labItemOther}
	rdb := redis.NewClient(&redis.Options{Addr: x.c.Redis().Addr()})
	defer rdb.Close()
	if err := x.dropItems(ids...); err != nil {
		return err
	}
	x.undo = append(x.undo, func() error { return x.dropItems(ids...) })

	reports, errs := make([]*loadgen.Report, len(ids)), make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		cfg := x.itemRun(id, loadgen.Config{Requests: haltRequests, Concurrency: haltConcurrency, Stock: haltStock})
		wg.Go(func() { reports[i], errs[i] = loadgen.Run(x.ctx, cfg) })
	}
	haltAt, soldBefore, herr := haltItem(x.ctx, rdb, labItemHalt, haltAfter)
	wg.Wait()
	if err := errors.Join(append(errs, herr)...); err != nil {
		return err
	}
	halted := x.addItem(labItemHalt, "halted", reports[0])
	other := x.addItem(labItemOther, "bystander", reports[1])

	// The halted item: by send time, as in stockdown; a sale sent before
	// the halt may read before it and sell.
	after := map[api.Result]int{}
	sold := 0
	for _, a := range reports[0].Answers {
		if a.Sent.After(haltAt) {
			after[resultOf(a.Result, a.Status)]++
			if a.Outcome == loadgen.OutcomeSold {
				sold++
			}
		}
	}
	if sold > 0 {
		x.problemf("%s sold %d unit(s) to requests sent after its halt", labItemHalt, sold)
	}
	if after[api.StoreLost] == 0 {
		x.problemf("%s answered no request sent after its halt store_lost (%v): the halt was not felt", labItemHalt, after)
	}
	if halted.Lucky >= haltStock {
		x.problemf("%s sold out (lucky %d) before its halt was felt", labItemHalt, halted.Lucky)
	}
	// The bystander: every unit sold, once, with no error, and still
	// selling after the halt (or the two sales did not overlap).
	otherAfter := 0
	for _, a := range reports[1].Answers {
		if a.Sent.After(haltAt) && a.Outcome == loadgen.OutcomeSold {
			otherAfter++
		}
	}
	if !reports[1].OK() || other.Sold != haltStock || other.Lucky != haltStock || other.Stock != 0 || other.Errors != 0 {
		x.problemf("%s did not sell out exactly: verdict %q, sold %d, lucky %d, stock %d, errors %d",
			labItemOther, other.Verdict, other.Sold, other.Lucky, other.Stock, other.Errors)
	}
	if otherAfter == 0 {
		x.problemf("%s sold nothing after %s's halt: the two sales did not overlap", labItemOther, labItemHalt)
	}
	x.notef("%s halted at lucky %d: %d sold, lucky %d + stock %d, after the halt %v; %s sold out %d/%d, %d of them after the halt",
		labItemHalt, soldBefore, halted.Sold, halted.Lucky, halted.Stock, after, labItemOther, other.Lucky, haltStock, otherAfter)
	return nil
}

// resultOf is an answer's result, or its status when it is not stockd's.
func resultOf(r api.Result, status int) api.Result {
	if r != "" {
		return r
	}
	return api.Result(fmt.Sprintf("status %d", status))
}

// haltItem waits until item id has sold at least n units, then sets its
// halt key; it returns when the key was set and the units sold by then.
func haltItem(ctx context.Context, rdb *redis.Client, id string, n int64) (time.Time, int64, error) {
	lucky, err := waitSold(ctx, rdb, id, n)
	if err != nil {
		return time.Time{}, 0, err
	}
	if err := rdb.Set(ctx, redisstore.ItemKeys(redisstore.Keys{}, id).Halt, "lab: item-halt", 0).Err(); err != nil {
		return time.Time{}, 0, fmt.Errorf("halt %s: %w", id, err)
	}
	return time.Now(), lucky, nil
}

// waitSold waits until item id has sold at least n units, and returns its
// lucky then: a must-happen wait, bounded by ctx (the cell's, waits.go).
// Redis is polled: its keys have no event to wait on from outside.
func waitSold(ctx context.Context, rdb redis.UniversalClient, id string, n int64) (int64, error) {
	keys := redisstore.ItemKeys(redisstore.Keys{}, id)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		lucky, err := rdb.Get(ctx, keys.Lucky).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("read %s: %w", keys.Lucky, err)
		}
		if lucky >= n {
			return lucky, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return 0, fmt.Errorf("%s never sold %d units: %w", id, n, ctx.Err())
		}
	}
}

// dropItems removes the lab's items from the stock Redis: their registry
// entries and every key of theirs, the halt key included (what an
// operator removes once reconciled), so a cell starts from none and
// leaves none.
func (x *run) dropItems(ids ...string) error {
	rdb := redis.NewClient(&redis.Options{Addr: x.c.Redis().Addr()})
	defer rdb.Close()
	// Not x.ctx: the undo runs however the cell ended.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range ids {
		var keys []string
		iter := rdb.Scan(ctx, 0, redisstore.ItemKeyPrefix+id+"}:*", 100).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("drop item %s: %w", id, err)
		}
		if len(keys) > 0 {
			if err := rdb.Del(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("drop item %s: %w", id, err)
			}
		}
		if err := rdb.HDel(ctx, redisstore.ItemRegistry, id).Err(); err != nil {
			return fmt.Errorf("drop item %s: %w", id, err)
		}
	}
	return nil
}

// runItemWindow sells one item through its window: buyers arrive
// windowRate a second for windowFor (an open loop), the window opening
// windowOpens after the first and lasting windowLasts, by Redis's clock.
// Every sold answer must lie inside it, every not_started before it and
// every ended after it (loadgen's Window: the lab's clock is Redis's
// machine's), and the books balance; all three answers must be seen.
func runItemWindow(x *run) error {
	if err := x.dropItems(labItemWin); err != nil {
		return err
	}
	x.undo = append(x.undo, func() error { return x.dropItems(labItemWin) })
	var rep *loadgen.Report
	lasts := windowLasts
	for i, try := range windowTries {
		if i > 0 {
			x.notef("%s: the %v window sold nothing (every try inside it unanswered in time: a loaded machine), so its edges went untested: redone with a %v window",
				labItemWin, lasts, try)
			if err := x.dropItems(labItemWin); err != nil {
				return err
			}
		}
		lasts = try
		now := time.Now()
		cfg := x.itemRun(labItemWin, loadgen.Config{Stock: windowStock, Rate: windowRate, Duration: windowFor + lasts - windowLasts,
			StartsAt: now.Add(windowOpens), EndsAt: now.Add(windowOpens + lasts)})
		var err error
		if rep, err = loadgen.Run(x.ctx, cfg); err != nil {
			return err
		}
		if rep.Sold > 0 || !rep.OK() {
			break
		}
	}
	it := x.addItem(labItemWin, "window", rep)
	w := rep.Window
	if !rep.OK() {
		x.problemf("%s: verdict %q: %s", labItemWin, it.Verdict, w.Text())
	}
	if it.Sold == 0 || it.NotStarted == 0 || it.Ended == 0 {
		x.problemf("%s: %d sold, %d not_started, %d ended: want some of each (the window's both edges tried)",
			labItemWin, it.Sold, it.NotStarted, it.Ended)
	}
	o := rep.Open
	x.notef("%s: %d buyers over %v, window %v after the first for %v: %d not_started, %d sold (the first %.0fms after the opening, the last sent %.0fms before the close), %d ended, %d other; lucky %d + stock %d; misplaced: sold %d, not_started %d, ended %d (clock bound %.1fms)",
		labItemWin, o.Sent, windowFor+lasts-windowLasts, windowOpens, lasts, it.NotStarted, it.Sold, w.FirstSaleMS, w.LastSaleMS, it.Ended,
		o.Sent-it.NotStarted-it.Sold-it.Ended, it.Lucky, it.Stock, w.SoldOutside, w.NotStartedLate, w.EndedEarly, w.OffsetMaxMS-w.OffsetMinMS)
	return nil
}

// historyDir is where a violation's picture goes: $SECKILL_HISTORY_DIR,
// else the cluster's directory.
func historyDir(clusterDir string) string {
	if dir := os.Getenv("SECKILL_HISTORY_DIR"); dir != "" {
		return dir
	}
	return filepath.Join(clusterDir, "histories")
}
