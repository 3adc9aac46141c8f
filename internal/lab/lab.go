// Package lab runs fault-injection scenarios against a real local cluster
// (package localcluster with its fault layer) and judges each one: a cell is
// one scenario on one lock backend, with fencing on or off.
//
// For the correct backends (redis, redisson, etcd, zookeeper, mysql,
// mysql-row) every cell
// must end with nothing oversold, stock + lucky == initial, lucky == the
// number of "sold" answers, and the cluster selling again within
// RecoveryBound of the fault's end. The buyers' cells (Cell.Buyers) sell to
// named buyers with idempotency keys, a per-user limit and durable orders,
// and must also end with every order answered once, in the ledger once and
// in MySQL once. The cells whose stock Redis loses the sale (wipe,
// restore, restore-all, other-sale: storeloss.go) cannot keep their books; they must refuse every
// sale after it and sell no unit twice. The items' cells (item-halt,
// item-window: items.go; item-restore-all: itemstoreloss.go) sell items
// beside the default sale, each held to its own books and window. The control cells (fencing off) and the
// lab-only flawed backends must show the failure they exist to show; a cell
// that does not is as much a failure as an oversell on a correct backend,
// because it means the checker could not see a loss.
package lab

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/lock/backend"
	"seckill/internal/servers"
	"seckill/internal/stock"
	"seckill/internal/stockd"
)

// ErrUnknown: no such scenario; returned errors wrap it.
var ErrUnknown = errors.New("lab: unknown scenario")

// Initial is the stock every cell starts from, but the buyers' cells
// (BuyerInitial).
const Initial = 300

func (c Cell) initial() int {
	if c.Buyers {
		return BuyerInitial
	}
	if n := scenarios[c.Scenario].initial; n > 0 {
		return n
	}
	return Initial
}

// RecoveryBound is how soon after a fault ends a correct backend must sell
// again. It covers the longest lease in the lab (2s), a reconnect with
// backoff, and nginx putting a failed replica back.
const RecoveryBound = 10 * time.Second

// Expect is what a cell must show.
type Expect string

// Expectations.
const (
	// ExpectSafe: nothing oversold, books consistent, recovered in bound.
	ExpectSafe Expect = "safe"
	// ExpectOversell: units sold twice (a control cell or a flawed lock).
	ExpectOversell Expect = "oversell"
	// ExpectStuck: the lock never frees; nothing sells after the crash.
	ExpectStuck Expect = "stuck"
	// ExpectMayLose: the failover control (no replica acks): as safe, but
	// acknowledged sales lost in the failover are reported, not failed.
	ExpectMayLose Expect = "may-lose"
	// ExpectLoss: the failover-lag and split controls: as safe, and acknowledged
	// sales must be lost, or the checker could not see a loss.
	ExpectLoss Expect = "loss"
	// ExpectHalt: the stock Redis lost the sale (restarted empty, or from
	// an older snapshot): no sale may be answered 200 after it, every one
	// is refused store_lost, and no unit is sold twice. The books are not
	// judged: the fault took them (storeloss.go).
	ExpectHalt Expect = "halt"
	// ExpectWrong: the lab's broken build (falsesoldout): the sums balance
	// — nothing oversold, books consistent — and the history check must
	// still find the wrong answers (linear.go).
	ExpectWrong Expect = "wrong-answers"
)

// Cell is one run: a scenario on a backend, with fencing on or off.
type Cell struct {
	Backend  string
	Scenario string
	Fencing  bool
	// Sale is how the replicas sell: "" is one lock per request (the
	// articles' way), or one of Sales.
	Sale string
	// Buyers makes the cell's buyers named, with idempotency keys, a
	// per-user limit of 1 and durable orders (buyers.go); its books then
	// also hold the order ledger and MySQL to the answers.
	Buyers bool
	// Acks is stock.min_replica_acks in the failover cells (failover.go):
	// 1, or 0 for the control.
	Acks int
}

func (c Cell) String() string {
	f := "fenced"
	if !c.Fencing {
		f = "unfenced"
	}
	s := c.Backend + "/" + c.Scenario + "/" + f
	if c.Sale != "" {
		s += "/" + c.Sale
	}
	if c.Buyers {
		s += "/buyers"
	}
	if IsFailover(c.Scenario) {
		s += fmt.Sprintf("/acks%d", c.Acks)
	}
	return s
}

// Sales are the ways of selling past the one-lock bound that get their own
// cells: request combining (a holder sells to every buyer queued in its
// process in one write) and a stock split over 8 segments, each with its
// own lock and fence.
var Sales = []string{"combine", "segments8"}

// saleScenarios are the faults each of Sales is run under on redis: a
// paused holder (its batch or segment write must be fenced), a killed one
// (mid batch), and a slow link.
var saleScenarios = []string{"pause", "kill", "latency"}

// SaleEnv is the stockd configuration of a Sale ("" needs none).
func SaleEnv(sale string) stockd.Edit {
	switch sale {
	case "combine":
		return func(c *stockd.Config) { c.Stock.Combine = true }
	case "segments8":
		return func(c *stockd.Config) { c.Stock.Segments = 8 }
	}
	return nil
}

// always is a scenario's settings that do not depend on the lease.
func always(e stockd.Edit) func(time.Duration) stockd.Edit {
	return func(time.Duration) stockd.Edit { return e }
}

// workDelay sets the business time inside the critical section: what
// widens the window a fault must land in.
func workDelay(d time.Duration) stockd.Edit {
	return func(c *stockd.Config) { c.Work.Delay = stock.FixedDelay(d) }
}

// Correct lists the backends that must survive every scenario.
var Correct = backend.Product()

// Flawed lists the lab-only broken backends and the scenario that breaks each.
var Flawed = map[string]string{
	"redis-nocheck":  "slowwork",
	"redis-checkdel": "slowwork",
	"setnx":          "crash",
	// No lock across replicas, and a lock per process: the articles'
	// oversell, in the answers as much as in the books.
	"none":  "slowwork",
	"local": "slowwork",
}

// Expect says what the cell must show.
func (c Cell) Expect() Expect {
	switch {
	case c.Scenario == "crash":
		return ExpectStuck
	case c.Scenario == "falsesoldout":
		return ExpectWrong
	case (c.Scenario == "failover-lag" || c.Scenario == "split" || c.Scenario == "cluster-lag") && c.Acks == 0 && c.Fencing && slices.Contains(Correct, c.Backend):
		return ExpectLoss
	case IsFailover(c.Scenario) && c.Acks == 0 && c.Fencing && slices.Contains(Correct, c.Backend):
		return ExpectMayLose
	case losesStore(c.Scenario) && c.Fencing && slices.Contains(Correct, c.Backend):
		return ExpectHalt
	case slices.Contains(Correct, c.Backend) && c.Fencing:
		return ExpectSafe
	default:
		// Fencing off on a correct backend (a control), or a flawed lock.
		return ExpectOversell
	}
}

// Result is one cell's outcome; its JSON is one line of `seckill lab --json`.
type Result struct {
	Backend  string `json:"backend"`
	Scenario string `json:"scenario"`
	Fencing  bool   `json:"fencing"`
	Sale     string `json:"sale,omitempty"`
	Buyers   bool   `json:"buyers,omitempty"`
	Expect   Expect `json:"expect"`
	// Orders is the buyers' verdict (cells with Buyers): the answers held
	// against the ledger, the per-buyer lists and MySQL, check by check.
	Orders *loadgen.Buyers `json:"orders,omitempty"`
	// Failover is the failover cells' measure: acks, acknowledged sales
	// lost, the Sentinels' switch.
	Failover *Failover `json:"failover,omitempty"`
	// History is the check of the cell's answers as a history against the
	// sale's model (linear.go).
	History *Linear `json:"history,omitempty"`
	// Store is the measure of the cells whose stock Redis loses the sale
	// (wipe, restore): the answers after it, units sold twice.
	Store *StoreLoss `json:"store,omitempty"`
	// Items is each item's books in the items' cells (items.go); the
	// cell's counts and books are then their sums.
	Items []ItemResult `json:"items,omitempty"`
	// Reservations is the reservation cells' measure (reservecells.go):
	// the buyers' report and the census of the orders' states.
	Reservations *Reservations `json:"reservations,omitempty"`
	// Status is "pass" or "FAIL" (seckill lab sets "ERROR" on a cell
	// that could not run).
	Status   string `json:"status"`
	Oversold int64  `json:"oversold"` // stock + lucky - initial, when positive
	Fenced   int    `json:"fenced"`   // 409 "fenced" answers
	LockLost int    `json:"lock_lost"`
	Busy     int    `json:"busy"`
	Errors   int    `json:"errors"` // 5xx "error", nginx 502/504, transport errors
	Sold     int    `json:"sold"`   // 200 "sold" answers, replays excepted
	// Replayed is 200 answers that repeat a key's earlier sale, and
	// LimitReached a named buyer's 409 at the per-user limit.
	Replayed     int `json:"replayed,omitempty"`
	LimitReached int `json:"limit_reached,omitempty"`
	// Unconfirmed answers (503 "unconfirmed") may have sold;
	// UnconfirmedSold is how many did, by their receipts.
	Unconfirmed     int   `json:"unconfirmed"`
	UnconfirmedSold int   `json:"unconfirmed_sold"`
	Lucky           int64 `json:"lucky"`
	// Returned is the units reservations gave back (the reservation
	// cells): lucky counts units taken, the books are stock + lucky -
	// returned = initial.
	Returned int64 `json:"returned,omitempty"`
	Stock    int64 `json:"stock"`
	Initial  int   `json:"initial"`
	// Consistent: stock + lucky == initial and lucky == sold answers plus
	// the unconfirmed ones that sold.
	Consistent bool `json:"consistent"`
	// RecoveryMS is from the fault's end to the first sale after it; -1
	// when the scenario has no end (slowwork) or never recovered.
	RecoveryMS int64  `json:"recovery_ms"`
	DurationMS int64  `json:"duration_ms"`
	Note       string `json:"note,omitempty"`
	// Slow lists the events that came, but later than a correct backend
	// on an idle machine brings them (waits.go): reported, never failed.
	Slow []string `json:"slow,omitempty"`
}

// books are the cell's stock and lucky as read back, over its initial
// stock.
func (r Result) books() api.Books {
	return api.Books{Stock: r.Stock, Lucky: r.Lucky, Returned: r.Returned, Initial: int64(r.Initial)}
}

// Passed reports whether the cell showed what it must.
func (r Result) Passed() bool { return r.Status == "pass" }

// Matrix is the default set of cells for the given backends and scenarios
// (nil means all): every scenario on every correct backend with fencing on
// (less the experimental and byName cells, which run when both their
// backend and their scenario are named, and the inapplicable ones, which
// never do), the pause control (fencing off) on every correct backend, the
// latency control on redis, the buyers' cells on redis (buyerScenarios,
// named buyers and durable orders), the items' cells on redis
// (itemScenarios), the clock cells on redis and etcd (clockScenarios),
// the failover cells (failoverCells), and each flawed
// backend in the scenario that breaks it.
func Matrix(backends, scenarios []string) []Cell {
	want := func(list []string, s string) bool { return len(list) == 0 || slices.Contains(list, s) }
	named := len(backends) > 0 && len(scenarios) > 0
	var cells []Cell
	for _, b := range Correct {
		if !want(backends, b) {
			continue
		}
		for _, s := range Scenarios() {
			if s == "crash" || s == "falsesoldout" || s == "bellearly" || (s == "upgrade" && !(named && slices.Contains(upgradeBackends, b))) || buyersOnly(s) || IsFailover(s) || isItems(s) || IsReserve(s) || slices.Contains(clockScenarios, s) || !want(scenarios, s) || Inapplicable(b, s) != "" {
				continue
			}
			if (slices.Contains(experimental[s], b) || slices.Contains(byName[b], s)) && !named {
				continue
			}
			cells = append(cells, Cell{Backend: b, Scenario: s, Fencing: true})
		}
		if want(scenarios, "pause") {
			cells = append(cells, Cell{Backend: b, Scenario: "pause", Fencing: false})
		}
		if b == "redis" && want(scenarios, "latency") {
			cells = append(cells, Cell{Backend: b, Scenario: "latency", Fencing: false})
		}
		if b == "redis" && want(scenarios, "lockforget") {
			cells = append(cells, Cell{Backend: b, Scenario: "lockforget", Fencing: false})
		}
		if b == "redis" && want(scenarios, "falsesoldout") {
			cells = append(cells, Cell{Backend: b, Scenario: "falsesoldout", Fencing: true})
		}
		if b == "redis" && want(scenarios, "bellearly") {
			// The bell wakes two kinds of queue: the lock's and combining's.
			cells = append(cells, Cell{Backend: b, Scenario: "bellearly", Fencing: true},
				Cell{Backend: b, Scenario: "bellearly", Fencing: true, Sale: "combine"})
		}
		if b == "redis" || b == "etcd" {
			for _, s := range clockScenarios {
				if want(scenarios, s) {
					cells = append(cells, Cell{Backend: b, Scenario: s, Fencing: true, Buyers: !isItemsCell(s)})
				}
			}
		}
		if b == "redis" {
			for _, s := range buyerScenarios {
				if want(scenarios, s) {
					cells = append(cells, Cell{Backend: b, Scenario: s, Fencing: true, Buyers: true})
				}
			}
			for _, s := range itemScenarios {
				if want(scenarios, s) {
					cells = append(cells, Cell{Backend: b, Scenario: s, Fencing: true})
				}
			}
			for _, sale := range Sales {
				for _, s := range saleScenarios {
					if want(scenarios, s) {
						cells = append(cells, Cell{Backend: b, Scenario: s, Fencing: true, Sale: sale})
					}
				}
			}
		}
		if slices.Contains(reserveBackends, b) {
			for _, s := range reserveScenarios {
				if want(scenarios, s) && (named || !slices.Contains(byName[b], s)) {
					cells = append(cells, Cell{Backend: b, Scenario: s, Fencing: true})
				}
			}
		}
		cells = append(cells, failoverCells(b, backends, scenarios)...)
	}
	for _, b := range []string{"redis-nocheck", "redis-checkdel", "setnx", "none", "local"} {
		if want(backends, b) && want(scenarios, Flawed[b]) {
			cells = append(cells, Cell{Backend: b, Scenario: Flawed[b], Fencing: true})
		}
	}
	return cells
}

// FullMatrix is every cell that is expected to pass or to show its
// failure: the default matrix and the byName cells (not the experimental
// ones, which are known not to pass). `make lab-full` runs it.
func FullMatrix() []Cell {
	cells := Matrix(nil, nil)
	seen := map[string]bool{}
	for _, c := range cells {
		seen[c.String()] = true
	}
	for _, b := range Correct {
		for _, c := range Matrix([]string{b}, byName[b]) {
			if !seen[c.String()] {
				seen[c.String()] = true
				cells = append(cells, c)
			}
		}
	}
	return cells
}

// SoldWith is cells with every cell of the articles' sale (Sale "") sold
// the way sale says instead, one of Sales: the whole matrix held to what
// the one-lock-per-request sale is held to (SECKILL_LAB_SALE, e2e/matrix).
// A cell with a sale of its own keeps it, and no cell is there twice.
func SoldWith(cells []Cell, sale string) ([]Cell, error) {
	if !slices.Contains(Sales, sale) {
		return nil, fmt.Errorf("lab: sale %q: want one of %s", sale, strings.Join(Sales, ", "))
	}
	seen := map[string]bool{}
	var out []Cell
	for _, c := range cells {
		if c.Sale == "" {
			c.Sale = sale
		}
		if !seen[c.String()] {
			seen[c.String()] = true
			out = append(out, c)
		}
	}
	return out, nil
}

// experimental lists cells that run only when both their backend and their
// scenario are asked for by name: they are known not to pass yet, and the
// default matrix (and CI) must stay green. See docs/faults.md.
var experimental = map[string][]string{
	// A new etcd cluster: waiters hold watches from revisions it has not
	// reached, and time out before the fence's quiet period helps. A new
	// ZooKeeper ensemble refuses clients that have seen a later zxid, and
	// go-zookeeper retries the same connection forever.
	"lockforget": {backend.Etcd, backend.ZooKeeper},
}

// byName lists, per backend, scenarios that apply and are expected to pass
// but stay out of the default matrix, which CI runs on two cores within
// its budget (README): each repeats a fault that another backend of its
// lock family (the Redis locks, etcd, ZooKeeper, MySQL) runs by default,
// or one that hits the stock Redis alone. They run when both their
// backend and their scenario are named, and in FullMatrix (make lab-full).
var byName = map[string][]string{
	// mysql-row shares mysql's sessions, keep-alive, fencing and server,
	// and these cells take ~15 s each on it; its default cells are those
	// where the lock itself differs (the transaction a pause or a crash
	// leaves open, a restart mid-transaction) and the control.
	backend.MySQLRow: append([]string{"slowwork", "partition", "latency", "lostreply", "slowreply", "netsplit", "wipe", "restore"},
		byNameStore...),
	// The witness cells and evict do not depend on the lock (the witness
	// is etcd's whatever the backend, and their faults hit the stock Redis
	// only); redis and etcd run them by default, the others by name.
	// redis runs these on the same Redis with the same links: redisson's
	// own cases are its watchdog and re-entry (pause, slowwork, kill,
	// lostreply, slowreply, lockforget), which stay.
	backend.Redisson: append([]string{"blip", "partition"}, byNameStore...),
	// The upgrade cell builds the previous release and replaces every
	// replica in turn (about a minute); the upgrade's faults are the
	// replicas' releases, not the lock's (upgrade.go).
	backend.Redis: {"upgrade"},
	// reserve-failover starts a Sentinel set, as the failover cells do;
	// redis runs it by default.
	// reserve-restore hits the stock Redis alone, reserve-durable
	// MariaDB alone: redis runs them by default.
	backend.Etcd:      {"upgrade", "reserve-failover", "reserve-restore", "reserve-durable"},
	backend.ZooKeeper: byNameStore,
	backend.MySQL:     byNameStore,
}

// byNameStore are the scenarios whose fault is the stock Redis's or the
// witness's alone (the witness cells, evict, stockdown, a newer release's
// reset): redis and etcd run them by default.
var byNameStore = append([]string{"evict", "witnessdown", "stockdown", "reconcile", "newer-reset", "reserve-restore"}, witnessScenarios...)

// inapplicable says, per backend, which scenarios cannot be staged on it
// and why; Matrix never yields them, even by name.
var inapplicable = map[string]map[string]string{
	"mysql":     mysqlInapplicable,
	"mysql-row": mysqlInapplicable,
}

var mysqlInapplicable = map[string]string{
	// ForgetLockServer empties etcd's and ZooKeeper's data directory or
	// flushes a lock Redis; MariaDB's needs mariadb-install-db again, and
	// its counters are durable by design. A database recreated behind the
	// fence is AdvanceTokens' case, tested in mysqllock.
	"lockforget": "the lab cannot make MariaDB forget (its tokens are durable); a recreated database is tested in mysqllock",
	// The blip cell's idle check lists the lock's artefacts on a Redis,
	// etcd or ZooKeeper server; nothing lists a MySQL session's locks.
	"blip": "its idle-artefact check knows Redis, etcd and ZooKeeper only",
	// crash is the setnx failpoint's scenario, flawed backends only.
}

// Inapplicable returns why scenario cannot run on backend, or "".
func Inapplicable(b, scenario string) string { return inapplicable[b][scenario] }

// ClusterConfig is the local cluster the lab needs: three replicas behind
// nginx, the fault layer on, etcd and ZooKeeper started up front only when
// asked (they are started on first need otherwise).
func ClusterConfig() localcluster.Config {
	return localcluster.Config{Replicas: 3, Backend: "none", Faults: true}
}

// jobInterval is the leader-only job's period in cells with the election on.
const jobInterval = 500 * time.Millisecond

// elects reports whether backend's server also runs the leader election
// (MySQL runs none).
func elects(b string) bool { return b == backend.Etcd || b == backend.ZooKeeper }

// lease is how long the backend's lock outlives a silent holder, as
// configured by baseEnv.
func lease(b string) time.Duration {
	switch b {
	case backend.Redisson:
		return 1500 * time.Millisecond
	case backend.Etcd, backend.ZooKeeper, backend.MySQL, backend.MySQLRow:
		return 2 * time.Second
	default:
		return time.Second
	}
}

// baseEnv is every cell's stockd configuration: short leases so faults
// resolve quickly, and a lock wait long enough that queueing, not shedding,
// is what buyers see.
func baseEnv(cell Cell) stockd.Edit {
	return func(c *stockd.Config) {
		c.Lock.TTL, c.Lock.WaitTimeout = time.Second, 10*time.Second
		c.Redisson.Watchdog = 1500 * time.Millisecond
		c.Etcd.SessionTTL, c.ZooKeeper.SessionTimeout, c.MySQL.SessionTTL = 2*time.Second, 2*time.Second, 2*time.Second
		c.Stock.Fencing = cell.Fencing
		// A cell's sale is the articles' (one critical section per
		// buyer) unless its Sale says otherwise (SaleEnv), whatever
		// stockd's default: SECKILL_LAB_SALE=combine runs every cell
		// the default's way.
		c.Stock.Combine = false
		c.Log.Level = "info"
	}
}

// cellEnv is a cell's stockd settings, over the cluster's: the base, the
// buyers', the scenario's, the sale's, the failover's and the election's.
func cellEnv(cell Cell) map[string]string {
	sc := scenarios[cell.Scenario]
	edits := []stockd.Edit{baseEnv(cell)}
	if cell.Buyers {
		edits = append(edits, buyerEnv)
	}
	if sc.reserve {
		edits = append(edits, reserveEnv)
	}
	edits = append(edits, sc.env(lease(cell.Backend)), SaleEnv(cell.Sale))
	if sc.failover || sc.cluster {
		edits = append(edits, failoverEnv(cell))
	}
	if sc.election && elects(cell.Backend) {
		edits = append(edits, func(c *stockd.Config) {
			c.Election.Backend, c.Election.JobInterval = cell.Backend, jobInterval
		})
	}
	return stockd.Overrides(edits...)
}

// Run runs one cell on c, which must have been started with the fault layer
// (ClusterConfig). It switches the replicas to the cell's backend, resets the
// stock, keeps buyers running through nginx, stages the fault, and judges
// the books. The error is non-nil only when the cell could not be run; a
// cell that ran and failed its expectation returns Status "FAIL" and a nil
// error. A backend stockd refuses, or a fault that cannot be staged, is an
// error: every backend is built, so neither may pass as a skip.
func Run(ctx context.Context, c *localcluster.Cluster, cell Cell) (_ Result, err error) {
	sc, ok := scenarios[cell.Scenario]
	if !ok {
		return Result{}, fmt.Errorf("%w: %q (want one of %s)", ErrUnknown, cell.Scenario, strings.Join(Scenarios(), ", "))
	}
	start := time.Now()
	// WithTimeout keeps the caller's deadline when it is earlier.
	ctx, cancelCell := context.WithTimeout(ctx, CellDeadline)
	defer cancelCell()
	res := Result{
		Backend: cell.Backend, Scenario: cell.Scenario, Fencing: cell.Fencing, Sale: cell.Sale, Buyers: cell.Buyers,
		Expect: cell.Expect(), Initial: cell.initial(), RecoveryMS: -1,
	}
	env := cellEnv(cell)
	var sentinelSet *servers.SentinelSet
	if sc.failover {
		// A fresh replicated stock Redis per cell: the last failover left
		// the roles swapped.
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		set, err := c.StartSentinel(sctx, failoverSentinel(cell))
		cancel()
		if err != nil {
			return res, fmt.Errorf("lab: %s: %w", cell, err)
		}
		maps.Copy(env, localcluster.SentinelEnv(set))
		sentinelSet = set
	}
	var redisCluster *servers.RedisCluster
	if sc.cluster {
		// A fresh cluster per cell: the last fault left the roles, or the
		// slot, moved.
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		cl, err := c.StartRedisCluster(sctx, servers.RedisClusterOptions{NodeTimeout: clusterNodeTimeout})
		cancel()
		if err != nil {
			return res, fmt.Errorf("lab: %s: %w", cell, err)
		}
		maps.Copy(env, localcluster.RedisClusterEnv(cl))
		redisCluster = cl
	}
	if sc.previous {
		// Built before the backend switch, which starts the replicas.
		_, prev, err := previousStockd(ctx)
		if err != nil {
			return res, fmt.Errorf("lab: %s: the previous release: %w", cell, err)
		}
		for i := range c.Replicas() {
			c.UseStockd(i, prev)
		}
		defer func() {
			for i := range c.Replicas() {
				c.UseStockd(i, "")
			}
		}()
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = c.SetBackend(sctx, cell.Backend, env)
	cancel()
	if err != nil {
		return res, fmt.Errorf("lab: %s: switch backend: %w", cell, err)
	}
	if err := flushLockRedis(ctx, c); err != nil {
		return res, fmt.Errorf("lab: %s: %w", cell, err)
	}
	if sc.items || sc.reserve {
		return runOwnSale(&run{ctx: ctx, c: c, cell: cell, lease: lease(cell.Backend), res: &res, sentinel: sentinelSet, rcluster: redisCluster}, sc, start)
	}
	client := loadgen.NewClient(4, 10*time.Second)
	defer client.CloseIdleConnections()
	if err := loadgen.Reset(ctx, client, c.URL(), c.AdminToken(), res.Initial); err != nil {
		return res, fmt.Errorf("lab: %s: reset: %w", cell, err)
	}

	x := &run{ctx: ctx, c: c, cell: cell, lease: lease(cell.Backend), res: &res, sentinel: sentinelSet, rcluster: redisCluster}
	// Deferred before the load's stop, so it runs after it: what a
	// scenario leaves behind for an operator (a halted sale) is undone
	// once no buyer can see it, and a cell that could not be undone is an
	// error, not the next cell's mystery.
	defer func() {
		for _, undo := range slices.Backward(x.undo) {
			if uerr := undo(); uerr != nil {
				err = errors.Join(err, fmt.Errorf("lab: %s: undo: %w", cell, uerr))
			}
		}
	}()
	buyers := sc.concurrency
	if cell.Sale == "segments8" {
		// Enough buyers that every segment stays contended: a holder's
		// late write is only put to the test when another replica takes
		// the same segment's lock while it is paused.
		buyers = max(buyers, 24)
	}
	var plan *buyerPlan
	if cell.Buyers {
		plan = newBuyerPlan(c.Minter())
	}
	x.load = startLoad(c.URL()+"/stock/reduce", buyers, 60*time.Second, plan)
	stopped := false
	defer func() {
		if !stopped {
			x.load.stop()
		}
	}()
	if !sc.noWarmup {
		wctx, cancel := x.until()
		_, err := x.load.waitFor(wctx, start, response.sold)
		cancel()
		if err != nil {
			return res, fmt.Errorf("lab: %s: no sale before the fault (%w)\n%s", cell, err, c.Logs(10))
		}
	}
	if err := sc.run(x); err != nil {
		return res, fmt.Errorf("lab: %s: %w\n%s", cell, err, c.Logs(10))
	}
	if !x.faultEnd.IsZero() && x.recovered.IsZero() {
		// A cell that must sell again waits for it; the others (a stuck
		// lock, a halted sale, a control) watch the recovery window for a
		// sale that they report, or that must not come.
		wait := x.until
		if !recovers(cell.Expect()) {
			wait = func() (context.Context, context.CancelFunc) { return x.mustNotWithin(RecoveryBound) }
		}
		rctx, cancel := wait()
		r, err := x.load.waitFor(rctx, x.faultEnd, response.sold)
		cancel()
		if err == nil {
			x.recovered = r.At
			x.expect("the first sale after the fault's end", x.faultEnd, r.At, RecoveryBound)
		}
	}
	if !x.recovered.IsZero() {
		// A sale before the fault's end (a slot move serves sales between
		// its batches) is no outage: 0, not a negative that reads as none.
		res.RecoveryMS = max(0, x.recovered.Sub(x.faultEnd).Milliseconds())
	}
	resps := x.load.stop()
	stopped = true
	if plan != nil {
		// A purchase whose every send went unanswered (a killed replica's
		// 502, an unconfirmed write) is re-sent with its key, as a client
		// would: the replay names the order it left, if any. Best effort,
		// not a must-happen wait: one still unanswered stays unknown, which
		// the verdict already allows either way.
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		resps = x.load.settle(sctx)
		cancel()
	}
	if err := x.books(client, resps); err != nil {
		return res, fmt.Errorf("lab: %s: %w\n%s", cell, err, c.Logs(10))
	}
	x.checkHistory(resps, time.Now())
	if sc.check != nil {
		sc.check(x)
	}
	x.judge()
	res.DurationMS = time.Since(start).Milliseconds()
	res.Note, res.Slow = strings.Join(x.notes, "; "), x.slow
	return res, nil
}

// run is the state of one cell while it runs.
type run struct {
	ctx   context.Context
	c     *localcluster.Cluster
	cell  Cell
	lease time.Duration
	load  *load
	res   *Result
	// sentinel is the replicated stock Redis of the failover cells, and
	// lagFrom..lagTo when failover-lag starved its replica, or witnessdown
	// cut the witness.
	sentinel       *servers.SentinelSet
	lagFrom, lagTo time.Time
	// rcluster is the Redis Cluster of the cluster cells (clusterfaults.go).
	rcluster *servers.RedisCluster
	// onPaid, when set, is told of each payment of a reservation cell's
	// buyers answered paid, as it is answered (reserveSale).
	onPaid func(order, paymentID string)

	faultEnd  time.Time // zero: the scenario has no end to recover from
	recovered time.Time // set by scenarios that define recovery themselves
	notes     []string
	slow      []string // events later than expected (waits.go)
	problems  []string // scenario-specific expectations that were not met
	// historyWhy is why the history check failed the cell (linear.go).
	historyWhy []string
	// stuck is set by the crash scenario when the lock never freed.
	stuck bool
	// storeGone: GET /stock answered store_lost when the books were read.
	storeGone bool
	// undo holds what Run must put back after the load stopped (in
	// reverse order), whether or not the cell ran to the end.
	undo []func() error
}

func (x *run) notef(format string, args ...any) {
	x.notes = append(x.notes, fmt.Sprintf(format, args...))
}

func (x *run) problemf(format string, args ...any) {
	x.problems = append(x.problems, fmt.Sprintf(format, args...))
}

// books counts the answers and reads the stock back.
func (x *run) books(client *http.Client, resps []response) error {
	r := x.res
	for _, a := range resps {
		r.tally(a)
	}
	ctx, cancel := x.until()
	defer cancel()
	for i, a := range resps {
		if a.Result != api.Unconfirmed || a.Attempt == "" {
			continue
		}
		sold, err := loadgen.ReceiptSold(ctx, client, x.c.URL(), a.Attempt)
		if err != nil {
			return fmt.Errorf("settle unconfirmed sale %s: %w", a.Attempt, err)
		}
		if sold {
			r.UnconfirmedSold++
			resps[i].Settled = true
		}
	}
	st, err := loadgen.GetStock(ctx, client, x.c.URL())
	switch {
	case errors.Is(err, loadgen.ErrStoreLost) && losesStore(x.cell.Scenario):
		// The cell's fault took the sale: no books to read back, which
		// checkStoreLoss expects of a wipe.
		x.storeGone = true
	case err != nil:
		return fmt.Errorf("read stock back: %w", err)
	}
	r.Stock, r.Lucky, r.Returned = st.Stock, st.Lucky, st.Returned
	r.Oversold = r.books().Oversold()
	// A segment below zero sold units it did not have, even when another
	// segment's leftovers make the sum balance.
	for i, n := range st.Segments {
		if n < 0 {
			x.problemf("segment %d is negative: %d", i, n)
		}
	}
	if x.cell.Buyers {
		return x.buyerBooks(ctx, client, st, resps)
	}
	if r.Failover != nil {
		lost, err := lostSales(ctx, client, x.c.URL(), resps)
		if err != nil {
			return err
		}
		r.Failover.Lost = lost
		if x.rcluster != nil {
			x.clusterBooks(ctx)
		} else {
			x.masterBooks(ctx)
		}
		var extra int64
		r.Consistent, extra = failoverConsistent(r)
		if r.Consistent && extra > 0 {
			x.notef("%d sale(s) took effect with an error answer", extra)
		}
		return nil
	}
	answered := int64(r.Sold + r.UnconfirmedSold)
	// A replica killed mid-sale cannot answer a write it already sent: its
	// buyers get nginx's 502 for sales that may have taken effect. With one
	// lock there is one holder, killed before its write; with segments or a
	// combined batch, another holder of the killed replica may be past its
	// write. Those sales are counted by lucky, not by any answer, and there
	// can be no more of them than there were 502s.
	unanswered := int64(0)
	if x.cell.Scenario == "kill" {
		for _, a := range resps {
			if a.Status == http.StatusBadGateway {
				unanswered++
			}
		}
	}
	r.Consistent = r.books().Balanced() && st.Lucky >= answered && st.Lucky <= answered+unanswered
	if r.Consistent && st.Lucky > answered {
		x.notef("%d sale(s) of the killed replica took effect with their answer lost (502)", st.Lucky-answered)
	}
	return nil
}

// tally counts one answer in the books: sold_out counts nowhere, and
// anything not stockd's own verdict (5xx "error", mixed_backends, nginx's
// 502/504, a transport error) is an error.
func (r *Result) tally(a response) {
	switch {
	case a.sold() && a.Replayed:
		r.Replayed++
	case a.sold():
		r.Sold++
	case a.Result == api.Fenced:
		r.Fenced++
	case a.Result == api.LockLost:
		r.LockLost++
	case a.Result == api.Busy:
		r.Busy++
	case a.Result == api.SoldOut:
	case a.Result == api.Unconfirmed:
		r.Unconfirmed++
	case a.Result == api.LimitReached && a.User != "" && a.Result.Matches(a.Status):
		// Only a named buyer can reach a limit: from an anonymous one it
		// is a server's mistake, an error.
		r.LimitReached++
	default:
		r.Errors++
	}
}

// judge sets Status from the expectation.
func (x *run) judge() {
	r := x.res
	var why []string
	switch r.Expect {
	case ExpectSafe, ExpectMayLose, ExpectLoss:
		if r.Oversold > 0 {
			why = append(why, fmt.Sprintf("oversold %d", r.Oversold))
		}
		if !r.Consistent {
			why = append(why, fmt.Sprintf("books: stock %d + lucky %d - returned %d vs initial %d, sold answers %d (+%d unconfirmed that sold)",
				r.Stock, r.Lucky, r.Returned, r.Initial, r.Sold, r.UnconfirmedSold))
		}
		if !x.faultEnd.IsZero() && r.RecoveryMS < 0 {
			why = append(why, "no sale after the fault's end before the cell's deadline")
		}
		why = append(why, x.problems...)
		why = append(why, x.historyWhy...)
	case ExpectOversell:
		if r.Oversold == 0 {
			why = append(why, "expected an oversell, saw none: the checker would miss a lost lock")
		}
		why = append(why, x.historyWhy...)
	case ExpectWrong:
		if r.Oversold > 0 || !r.Consistent {
			why = append(why, fmt.Sprintf("the sums did not balance (oversold %d, stock %d + lucky %d vs %d, sold %d): the broken build is meant to pass them",
				r.Oversold, r.Stock, r.Lucky, r.Initial, r.Sold))
		}
		why = append(why, x.historyWhy...)
	case ExpectHalt:
		// The books are what the fault left (nothing, or an older
		// snapshot), so stock + lucky and lucky == sold answers say
		// nothing here: the answers after the fault do (checkStoreLoss).
		if r.Store == nil {
			why = append(why, "no measure of the answers after the stock Redis came back")
		}
		why = append(why, x.problems...)
		why = append(why, x.historyWhy...)
	case ExpectStuck:
		if !x.stuck {
			why = append(why, "expected the lock to stay held forever after the crash")
		}
		why = append(why, x.problems...)
	}
	if len(why) == 0 {
		r.Status = "pass"
		return
	}
	r.Status = "FAIL"
	x.notes = append(why, x.notes...)
}

// flushLockRedis empties the lock Redis, so a cell never inherits a lock
// (or a key of another backend's layout) from the one before; the stock
// reset that follows drops the fence, so restarting the token counter
// is safe.
func flushLockRedis(ctx context.Context, c *localcluster.Cluster) error {
	lr := c.LockRedis()
	if lr == nil {
		return nil
	}
	rdb := redis.NewClient(&redis.Options{Addr: lr.Addr()})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("flush lock redis: %w", err)
	}
	return nil
}
