package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/lab/localcluster"
	"seckill/internal/servers"
	"seckill/internal/stock"
	"seckill/internal/stockd"
)

// storeloss.go: the stock Redis loses the sale. wipe starts it again empty
// (the lab runs it without persistence, so kill -9 and a start is exactly
// that); restore starts it again from a snapshot taken mid-sale, after
// more sales were answered 200: a Redis that went back in time. Either
// way the books are gone, so the cells are judged by the answers after
// the fault (ExpectHalt): read as "0 left", a lost sale would answer its
// buyers sold_out; read as it stood, a restored one would sell again units
// it had already sold.

// storeLossScenarios take the sale out of the stock Redis: their cells
// expect a halt (ExpectHalt), not consistent books.
var storeLossScenarios = []string{"wipe", "restore", "reserve-restore", "restore-all", "restore-both", "other-sale", "witness-wipe", "witness-restore"}

// witnessScenarios run with stock.witness etcd: what they stage is caught
// only by a memory that outlives every stockd (the witness), and their
// verdict is that every replica says store_rewound.
var witnessScenarios = []string{"restore-all", "restore-both", "other-sale", "witness-wipe", "witness-restore"}

// Rewinds reports whether scenario's cells must end with every replica's
// /readyz saying store_rewound (StoreLoss.Rewound).
func Rewinds(scenario string) bool {
	return scenario == "restore" || scenario == "reserve-restore" || slices.Contains(witnessScenarios, scenario)
}

// witnessDownWindow is how long witnessdown cuts every replica from etcd:
// twice stock.witness_timeout (2 s), so a sale that waits for its record
// runs out of time before the heal.
const witnessDownWindow = 4 * time.Second

// runWitnessDown cuts every replica from etcd, the witness (stock.witness
// etcd), for witnessDownWindow mid-sale, then heals. A sale whose record
// the witness cannot take is not answered sold (unconfirmed, settled by
// its receipt, or an error): the witness is what a rewound Redis is found
// by, and a 200 it never saw could be sold again unnoticed. After the heal
// the sale goes on (the judge's recovery bound), and the books, the
// answers and the history hold as in any safe cell.
func runWitnessDown(x *run) error {
	var restores []func() error
	for i := range x.c.Replicas() {
		r, err := x.c.Cut(i, localcluster.LinkEtcd)
		if err != nil {
			return errors.Join(err, restoreAll(restores))
		}
		restores = append(restores, r)
	}
	x.lagFrom = time.Now()
	herr := x.hold(x.lagFrom.Add(witnessDownWindow))
	if err := errors.Join(herr, restoreAll(restores)); err != nil {
		return err
	}
	x.faultEnd = time.Now()
	x.lagTo = x.faultEnd
	return nil
}

// checkWitnessDown judges the sales the cut touched (in flight at some
// instant of it), once all are answered: one answered sold got its record
// after all (a retry within witness_timeout that met the heal); the others
// ran out of time waiting for it and were not answered sold. Some must
// have, or the cut was not felt.
func checkWitnessDown(x *run) {
	var sold, held int
	var longest time.Duration
	for _, r := range x.load.answers() {
		if !r.Sent.Before(x.lagTo) || !r.At.After(x.lagFrom) {
			continue
		}
		longest = max(longest, r.At.Sub(r.Sent))
		switch {
		case r.sold() && !r.Replayed:
			sold++
		case r.Result != api.SoldOut:
			held++
		}
	}
	if held == 0 {
		x.problemf("every sale in flight while the witness was cut for %v (twice its timeout) was answered sold or sold out: the outage was not felt", witnessDownWindow)
	}
	x.notef("witness (etcd) cut for %v: of the sales in flight meanwhile %d sold, %d not (unconfirmed or an error); the longest took %dms",
		witnessDownWindow, sold, held, longest.Milliseconds())
}

// witnessEnv is the witness scenarios' setting.
func witnessEnv(c *stockd.Config) { c.Stock.Witness = "etcd" }

// losesStore reports whether scenario takes the sale out of the stock Redis.
// returnScenarios sell with a payment window nobody pays in, so units
// come back all along: a stock-after may repeat (the unit sold again),
// and the counter's history model, in which the stock only falls, does
// not apply (each order's lifecycle is checked instead where buyers pay:
// the reservation cells, reservecells.go).
var returnScenarios = []string{"reserve-restore"}

func returnsUnits(scenario string) bool { return slices.Contains(returnScenarios, scenario) }

func losesStore(scenario string) bool { return slices.Contains(storeLossScenarios, scenario) }

// StoreLoss is a wipe or restore cell's measure.
type StoreLoss struct {
	// DownMS is from the kill to the restarted stock Redis answering.
	DownMS int64 `json:"down_ms"`
	// After counts the answers to sales sent once the stock Redis was
	// back, by result ("status N" when stockd did not answer, "transport"
	// when nothing did).
	After map[string]int `json:"after"`
	// SoldTwice is how many stock-after values more than one 200 answer
	// of the cell carried: units sold twice.
	SoldTwice int `json:"sold_twice"`
	// SoldAfterSave is how many sales sent after the snapshot (restore)
	// were answered 200 before the kill: the sales it lost.
	SoldAfterSave int `json:"sold_after_save,omitempty"`
	// Rewound is how many replicas' /readyz said store_rewound (restore).
	Rewound int `json:"rewound,omitempty"`
	// Lifted is the halt the operator's way back lifted (the witness
	// cells: an adoption or a reconcile), "" when the cell leaves the
	// sale halted.
	Lifted string `json:"lifted,omitempty"`

	back time.Time // when the restarted stock Redis was ready
	// operator is when the operator's way back began: answers sent from
	// then on are not the fault's (zero: none).
	operator time.Time
}

// afterFault reports whether r was sent after the fault and answered
// before the operator's way back began (one answered after it may have
// been sold by the way back).
func (m *StoreLoss) afterFault(r response) bool {
	return !r.Sent.Before(m.back) && (m.operator.IsZero() || r.At.Before(m.operator))
}

// The stock Redis's keys as stockd names them by default (redisstore.Keys).
const (
	stockKeyName = "stock"
	luckyKeyName = "lucky"
	haltKeyName  = "stock:halt"
)

// soldAfterSave is how many 200 answers restore waits for after the
// snapshot: the sales the restart takes back.
const soldAfterSave = 10

// runWipe kills the stock Redis right after a sale's read (its write is
// on the way) and starts it empty.
func runWipe(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	p := x.c.Redis()
	// A snapshot a restore cell left would be loaded: this start must
	// find nothing.
	if err := removeSnapshot(p); err != nil {
		return err
	}
	if err := x.restartStore(ctx, p); err != nil {
		return err
	}
	return x.refusedEverywhere(ctx, false)
}

// runRestore SAVEs the stock Redis mid-sale, waits until every replica
// has answered a sale made after it, then kills the Redis right after a
// sale's read and starts it from the snapshot.
//
// What is guaranteed, and asserted: a replica that answered 200 to a sale
// sent after the SAVE remembers a stock below the snapshot's (the stock
// only falls within an epoch), so its first sale on the restored Redis
// finds more than that and halts the sale; since every replica did, no
// sale sent after the restart can be answered 200. What is not: a replica
// that sold nothing after the snapshot has nothing to compare with, and
// stops only because of the halt key another replica wrote; had it sold
// first on the restored Redis, it would have sold a unit twice. That is
// why the cell waits for every replica to sell after the SAVE, rather
// than leaving it to nginx's spreading.
func runRestore(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	p, rdb, saved, err := x.save(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	sellers := map[string]bool{}
	n := 0
	_, err = x.load.waitFor(ctx, saved, func(r response) bool {
		if r.sold() && !r.Sent.Before(saved) {
			n++
			sellers[r.Replica] = true
		}
		return n >= soldAfterSave && len(sellers) == x.c.Replicas()
	})
	if err != nil {
		return fmt.Errorf("after the SAVE, %d sales on %d of %d replicas: %w", n, len(sellers), x.c.Replicas(), err)
	}
	if err := x.restartStore(ctx, p); err != nil {
		return err
	}
	return x.restored(ctx, rdb, saved, x.res.Store.back, "")
}

// runReserveRestore is restore on a sale whose units come back (the
// payment window, nobody paying): the SAVE waits for the first return and
// for a sale on every replica after it, so that every replica's rewind
// ceiling was taken with units returned, the stock raised since its last
// one. A guard that held the stock alone to its ceiling halts the sale at
// that point; one that kept no ceilings sells again after the restore.
func runReserveRestore(x *run) error {
	keys, err := saleKeys()
	if err != nil {
		return err
	}
	ctx, cancel := x.until()
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: x.c.Redis().Addr()})
	defer rdb.Close()
	if err := x.stockCounter(rdb, keys.Returned, func(n int64) bool { return n >= 1 }); err != nil {
		return fmt.Errorf("the first return: %w", err)
	}
	back := time.Now()
	sellers := map[string]bool{}
	if _, err := x.load.waitFor(ctx, back, func(r response) bool {
		if r.sold() && !r.Sent.Before(back) {
			sellers[r.Replica] = true
		}
		return len(sellers) == x.c.Replicas()
	}); err != nil {
		return fmt.Errorf("after the first return, sales on %d of %d replicas: %w", len(sellers), x.c.Replicas(), err)
	}
	if err := runRestore(x); err != nil {
		return err
	}
	// The snapshot's, now loaded: what came back before the SAVE.
	n, err := rdb.Get(ctx, keys.Returned).Int64()
	if err != nil || n < 1 {
		x.problemf("the snapshot holds %d units returned (%v): no return before the SAVE, the fault was not put to the test", n, err)
		return nil
	}
	x.notef("%d units returned before the SAVE, every replica sold after the first", n)
	return nil
}

// restored counts the sales answered 200 after the SAVE (before lost),
// checks the snapshot was loaded, and asks every replica for a sale.
func (x *run) restored(ctx context.Context, rdb *redis.Client, saved, lost time.Time, how string) error {
	x.res.Store.SoldAfterSave = x.load.countSent(saved, func(r response) bool { return r.sold() && r.At.Before(lost) })
	left, err := rdb.Get(ctx, stockKeyName).Int64()
	if err != nil {
		return fmt.Errorf("the snapshot was not loaded (GET %s: %w)", stockKeyName, err)
	}
	x.notef("snapshot with %d left; %d sales answered 200 after it, then lost%s", left, x.res.Store.SoldAfterSave, how)
	return x.refusedEverywhere(ctx, true)
}

// runRestoreAll is restore with every stockd restarted while the stock
// Redis is down: the new processes remember nothing of the sale, so only
// the witness (stock.witness etcd) knows how low the stock went. Unlike
// restore, it needs no replica to have sold after the SAVE.
func runRestoreAll(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	p, rdb, saved, err := x.save(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	n := 0
	if _, err := x.load.waitFor(ctx, saved, func(r response) bool {
		if r.sold() && !r.Sent.Before(saved) {
			n++
		}
		return n >= soldAfterSave
	}); err != nil {
		return fmt.Errorf("after the SAVE, %d sales: %w", n, err)
	}
	killed, err := x.restartAll(ctx, p, nil)
	if err != nil {
		return err
	}
	return x.restored(ctx, rdb, saved, killed, "; every stockd restarted")
}

// restartAll stops every stockd, kills the stock Redis p and starts it
// again (from its snapshot, if it has one), then starts every stockd: new
// processes that remember nothing of the sale. meanwhile, if set, runs
// while both are down (restore-both's witness restore). It sets the
// cell's store measure (how long the Redis was down) and returns when it
// was killed.
func (x *run) restartAll(ctx context.Context, p *servers.Process, meanwhile func() error) (time.Time, error) {
	x.res.Store = &StoreLoss{}
	killed := time.Now()
	err := x.c.RestartReplicas(ctx, func() error {
		if err := p.Kill(); err != nil {
			return fmt.Errorf("kill %s: %w", p.Name(), err)
		}
		if meanwhile != nil {
			if err := meanwhile(); err != nil {
				return err
			}
		}
		return p.Start(ctx)
	})
	if err != nil {
		return killed, fmt.Errorf("restart every stockd around the stock Redis's restart: %w", err)
	}
	x.res.Store.back = time.Now()
	x.res.Store.DownMS = ms(x.res.Store.back.Sub(killed))
	return killed, nil
}

// runOtherSale restarts the stock Redis holding another sale: its keys
// (stock, lucky, initial, epoch) written into the restarted Redis, as a
// snapshot of that sale loaded by mistake would hold them. Its epoch is
// one the witness never recorded, so every replica, which took it for a
// reset by another replica before the witness, must halt.
func runOtherSale(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	p := x.c.Redis()
	if err := removeSnapshot(p); err != nil {
		return err
	}
	x.undo = append(x.undo, x.undoHalt(p, false))
	if err := x.restartStore(ctx, p); err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer rdb.Close()
	const otherStock = 1000
	_, err := rdb.TxPipelined(ctx, func(tx redis.Pipeliner) error {
		tx.Set(ctx, stockKeyName, otherStock, 0)
		tx.Set(ctx, luckyKeyName, 0, 0)
		tx.Set(ctx, stockKeyName+":initial", otherStock, 0)
		tx.Set(ctx, stockKeyName+":epoch", "another-sale", 0)
		return nil
	})
	if err != nil {
		return fmt.Errorf("write the other sale: %w", err)
	}
	x.res.Store.back = time.Now()
	x.notef("the stock Redis came back holding another sale (stock %d)", otherStock)
	return x.refusedEverywhere(ctx, true)
}

// save SAVEs the stock Redis mid-sale and returns it, a client of it
// (the caller closes it) and when. Whatever happens next, the operator's
// part is undone after the cell (undoHalt).
func (x *run) save(ctx context.Context) (*servers.Process, *redis.Client, time.Time, error) {
	p := x.c.Redis()
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	x.undo = append(x.undo, x.undoHalt(p, true))
	if err := rdb.Save(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, nil, time.Time{}, fmt.Errorf("SAVE the stock Redis: %w", err)
	}
	return p, rdb, time.Now(), nil
}

// undoHalt is the operator's part after a halt: the halt key goes (the
// next cell's reset would be refused), and with snapshot the snapshot too
// (no later start of this Redis may load it).
func (x *run) undoHalt(p *servers.Process, snapshot bool) func() error {
	return func() error {
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
		defer rdb.Close()
		var err error
		if snapshot {
			err = removeSnapshot(p)
		}
		return errors.Join(err, rdb.Del(uctx, haltKeyName).Err())
	}
}

// restartStore kills the stock Redis right after a sale's read, so a
// write is on its way to a Redis that no longer has the sale, and starts
// it again.
func (x *run) restartStore(ctx context.Context, p *servers.Process) error {
	if _, _, err := x.holder(); err != nil {
		return err
	}
	x.res.Store = &StoreLoss{}
	killed := time.Now()
	if err := p.Kill(); err != nil {
		return fmt.Errorf("kill %s: %w", p.Name(), err)
	}
	if err := p.Start(ctx); err != nil {
		return fmt.Errorf("start %s again: %w", p.Name(), err)
	}
	x.res.Store.back = time.Now()
	x.res.Store.DownMS = ms(x.res.Store.back.Sub(killed))
	return nil
}

// refusedEverywhere asks every replica directly for a sale, which must be
// refused store_lost, and (rewound) its /readyz, which must be 503
// store_rewound; then it waits for a few of the buyers' answers through
// nginx, so the verdict counts more than the cell's own sends.
func (x *run) refusedEverywhere(ctx context.Context, rewound bool) error {
	for i := range x.c.Replicas() {
		name, base := localcluster.ReplicaName(i), x.c.ReplicaURL(i)
		if r := x.load.reduceAt(ctx, base+"/stock/reduce"); r.Result != api.StoreLost || r.Status != http.StatusServiceUnavailable {
			x.problemf("%s answered a sale after the restart %d %q, want 503 %q", name, r.Status, describe(r), api.StoreLost)
		}
		if !rewound {
			continue
		}
		st, ready, err := readyz(ctx, base)
		switch {
		case err != nil:
			return fmt.Errorf("%s /readyz: %w", name, err)
		case st == http.StatusServiceUnavailable && strings.HasPrefix(ready.Stock, api.StoreRewound):
			x.res.Store.Rewound++
		default:
			x.problemf("%s /readyz %d stock %q, want 503 %s", name, st, ready.Stock, api.StoreRewound)
		}
	}
	back := x.res.Store.back
	const through = 10 // answers through nginx, on every replica in turn
	seen := 0
	_, err := x.load.waitFor(ctx, back, func(r response) bool {
		if !r.Sent.Before(back) {
			seen++
		}
		return seen >= through
	})
	if err != nil {
		return fmt.Errorf("%d answers through nginx after the restart: %w", seen, err)
	}
	return nil
}

// tally counts m's answers after the fault, by result, and the
// stock-after values answered 200 more than once in the whole cell.
func (x *run) tally(m *StoreLoss) {
	m.After = map[string]int{}
	for _, r := range x.load.answers() {
		if m.afterFault(r) {
			m.After[describe(r)]++
		}
	}
	if !returnsUnits(x.cell.Scenario) {
		// With returns a unit sells again and its stock-after repeats:
		// what a restore sold twice shows as sales answered after it.
		m.SoldTwice = soldTwice(x.soldLefts())
	}
}

// soldLefts are the stock-after values of every 200 answer of the cell.
func (x *run) soldLefts() []int64 {
	var lefts []int64
	for _, r := range x.load.answers() {
		if r.sold() && r.Left >= 0 {
			lefts = append(lefts, r.Left)
		}
	}
	return lefts
}

// checkStoreLoss holds the answers to what the cell expects once the
// stock Redis lost the sale: none sold after it, none sold out (a lost
// sale is not an empty one), every one store_lost; no unit sold twice in
// the whole cell; after a wipe, no stock key written back.
func checkStoreLoss(x *run) {
	m := x.res.Store
	if m == nil {
		return // the judge says so
	}
	x.tally(m)
	x.checkAfter(m)
	x.notef("stock Redis down %dms; answers sent after: %v", m.DownMS, m.After)
	if Rewinds(x.cell.Scenario) {
		x.notef("%d of %d replicas' /readyz %s", m.Rewound, x.c.Replicas(), api.StoreRewound)
		return
	}
	ctx, cancel := x.until()
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: x.c.Redis().Addr()})
	defer rdb.Close()
	keys := []string{stockKeyName, luckyKeyName}
	n, err := rdb.Exists(ctx, keys...).Result()
	switch {
	case err != nil:
		x.problemf("read back %v: %v", keys, err)
	case n > 0:
		x.problemf("%d of %v written again after the wipe: a sale began again from nothing", n, keys)
	}
	if x.storeGone {
		x.notef("books not judged: the wipe took them (GET /stock: %s)", api.StoreLost)
	} else {
		x.notef("books not judged: the wipe took them (stock %d, lucky %d read back)", x.res.Stock, x.res.Lucky)
	}
}

// soldTwice is how many stock-after values appear more than once in lefts
// (one sale's 200 answers): units sold twice.
func soldTwice(lefts []int64) int {
	seen, twice := map[int64]int{}, 0
	for _, l := range lefts {
		if seen[l]++; seen[l] == 2 {
			twice++
		}
	}
	return twice
}

// checkAfter holds m to what a sale the stock Redis lost must show: no
// unit sold twice, and every answer sent after the Redis came back
// store_lost, none sold, none sold out (a lost sale is not an empty one).
func (x *run) checkAfter(m *StoreLoss, allowed ...api.Result) {
	if m.SoldTwice > 0 {
		x.problemf("%d stock-after values answered 200 twice: units sold twice", m.SoldTwice)
	}
	if n := m.After[string(api.Sold)]; n > 0 {
		x.problemf("%d sales sent after the stock Redis came back answered 200", n)
	}
	if n := m.After[string(api.SoldOut)]; n > 0 {
		x.problemf("%d sales sent after the stock Redis came back answered sold_out: the lost sale read as empty", n)
	}
	if m.After[string(api.StoreLost)] == 0 {
		x.problemf("no sale refused %s after the stock Redis came back", api.StoreLost)
	}
	if others := maps.Clone(m.After); len(others) > 0 {
		delete(others, string(api.StoreLost))
		delete(others, string(api.Sold))
		delete(others, string(api.SoldOut))
		for _, a := range allowed {
			delete(others, string(a))
		}
		if len(others) > 0 {
			x.problemf("answers after the stock Redis came back other than %s: %v", api.StoreLost, others)
		}
	}
}

// describe names an answer by its result, or by what came instead.
func describe(r response) string {
	switch {
	case r.Result != "":
		return string(r.Result)
	case r.Status != 0:
		return fmt.Sprintf("status %d", r.Status)
	default:
		return "transport"
	}
}

// readyz returns a replica's /readyz status and body.
func readyz(ctx context.Context, base string) (int, api.Ready, error) {
	var ready api.Ready
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	if err != nil {
		return 0, ready, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ready, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, ready, err
	}
	if err := json.Unmarshal(raw, &ready); err != nil {
		return resp.StatusCode, ready, fmt.Errorf("decode %q: %w", firstN(string(raw), 120), err)
	}
	return resp.StatusCode, ready, nil
}

// removeSnapshot deletes the stock Redis's dump.rdb (the harness's
// default dbfilename, in its --dir), if any.
func removeSnapshot(p *servers.Process) error {
	err := os.Remove(filepath.Join(p.Dir(), "dump.rdb"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// storeLossEnv is the store-loss cells' settings, with extra.
func storeLossEnv(extra stockd.Edit) func(time.Duration) stockd.Edit {
	return func(time.Duration) stockd.Edit {
		return func(c *stockd.Config) {
			c.Work.Delay = stock.FixedDelay(20 * time.Millisecond)
			if extra != nil {
				extra(c)
			}
		}
	}
}
