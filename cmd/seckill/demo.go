package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lab"
	"seckill/internal/lab/dashboard"
	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/lock/backend"
	"seckill/internal/servers"
	"seckill/internal/stock"
	"seckill/internal/stockd"
)

// Backends lists every lock backend the demo knows, in table order: the two
// that demonstrate overselling first, then the correct ones. Add a backend
// here when stockd learns it; a backend stockd refuses is an ERROR row.
var Backends = append([]string{backend.None, backend.Local}, backend.Product()...)

// unsafeBackend says whether a backend is expected to oversell with
// replicas processes behind nginx: none never locks, and local's lock lives
// in one process, so it only protects a single replica.
func unsafeBackend(b string, replicas int) bool {
	return b == backend.None || (b == backend.Local && replicas > 1)
}

// demoRow is one backend's result; its JSON is one line of `demo --json`.
type demoRow struct {
	*loadgen.Report
	Backend string `json:"backend"`
	Sale    string `json:"sale,omitempty"` // "" or one of lab.Sales
	// WithBuyers marks the buyer-aware row (Report.Buyers holds its
	// verdict).
	WithBuyers bool `json:"with_buyers,omitempty"`
	// Item names an item's row (the items table): its own sale beside
	// the default one, sold at once with the other items.
	Item string `json:"item,omitempty"`
	// ClusterLucky is, with --redis-cluster, the sale's lucky read from
	// the Redis Cluster itself after the row: the row's books must be the
	// cluster's.
	ClusterLucky *int64 `json:"cluster_lucky,omitempty"`
	ExpectedSafe bool   `json:"expected_safe"`
	Verdict      string `json:"verdict"`
	Error        string `json:"error,omitempty"`
	failed       bool   // counts against the exit status
}

func demoCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	backends := fs.String("backends", strings.Join(Backends, ","), "comma-separated lock backends, one row each")
	replicas := fs.Int("replicas", 3, "stockd replicas behind nginx")
	requests := fs.Int("requests", 500, "reduce requests per backend")
	concurrency := fs.Int("concurrency", 50, "requests in flight at once")
	initial := fs.Int("stock", 300, "initial stock")
	delay := fs.String("delay", "5ms", `stockd work.delay: business work inside the critical section ("5ms" or "2ms-10ms")`)
	asJSON := fs.Bool("json", false, "print one JSON object per backend per line instead of the table")
	stockdBin := fs.String("stockd", "", "stockd binary (default: stockd next to this binary, else built from source)")
	dir := fs.String("dir", "", "keep the cluster's logs and data here (default: a temp dir, removed)")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on each backend's firing phase")
	dash := fs.String("dashboard", "", `serve the live dashboard of the demo's cluster on this address ("127.0.0.1:0": a free port; the URL is printed)`)
	sales := fs.String("sales", strings.Join(lab.Sales, ","), "after the backends, the redis row again with each of these ways past the one-lock bound (combine, segments8; empty: none)")
	linger := fs.Bool("linger", false, "after the table, keep the cluster (and the dashboard) up until Ctrl-C")
	buyers := fs.Int("buyers", 500, "after the sales, the redis row again with this many named buyers, the ledger and durable orders in MariaDB (0: no buyers row)")
	limit := fs.Int("per-user-limit", 1, "the buyers row's stock.per_user_limit")
	retryRate := fs.Float64("retry-rate", 0.2, "the buyers row's fraction of purchases re-sent with the same Idempotency-Key")
	onCluster := fs.Bool("redis-cluster", false, "keep the stock (and the Redis locks) on a local Redis Cluster, 3 masters and 3 replicas, instead of one Redis (docs/cluster.md)")
	reserveBuyers := fs.Int("reservations", 600, "after the buyers row, the redis sale with orders.payment_window 2s (docs/reservations.md): this many named buyers for --stock units, every third buyer never paying for what it wins, its unit resold (0: no reservations row)")
	items := fs.Int("items", 3, "after the backends, this many items (docs/items.md) sold at once on redis, one row each (0: no items table)")
	itemStock := fs.Int("item-stock", 100, "each item's stock")
	itemRequests := fs.Int("item-requests", 150, "reduce requests per item")
	if err := parseFlags(fs, args, stderr); err != nil {
		return flagExit(err)
	}
	list := splitList(*backends)
	for _, sale := range splitList(*sales) {
		if !slices.Contains(lab.Sales, sale) {
			fmt.Fprintf(stderr, "seckill demo: unknown --sales %q (want %s)\n", sale, strings.Join(lab.Sales, ", "))
			return exitFailure
		}
	}
	if len(list) == 0 || *replicas <= 0 || *requests <= 0 || *concurrency <= 0 || *initial <= 0 {
		fmt.Fprintln(stderr, "seckill demo: need at least one backend and positive --replicas, --requests, --concurrency, --stock")
		return exitFailure
	}
	if *buyers < 0 || *limit < 0 || *retryRate < 0 || *retryRate > 1 {
		fmt.Fprintln(stderr, "seckill demo: --buyers and --per-user-limit must be >= 0, --retry-rate in [0, 1]")
		return exitFailure
	}
	if *items < 0 || *items > maxDemoItems || *itemStock <= 0 || *itemRequests <= 0 {
		fmt.Fprintf(stderr, "seckill demo: --items must be 0..%d, --item-stock and --item-requests positive\n", maxDemoItems)
		return exitFailure
	}

	work, err := stock.ParseDelay(*delay)
	if err != nil {
		fmt.Fprintf(stderr, "seckill demo: --delay: %v\n", err)
		return exitFailure
	}

	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	base := func(c *stockd.Config) {
		// The backends table is the articles' sale: one critical section
		// per buyer. stockd's default combines the buyers queued in a
		// replica; the second table's combine row shows that sale.
		c.Stock.Combine = false
		c.Work.Delay = work
		// Long enough that a correct backend queues every buyer rather
		// than answering "busy": the demo is about correctness, not shedding.
		c.Lock.WaitTimeout = time.Minute
	}
	env := stockd.Overrides(base)
	log.Info("starting local cluster", "replicas", *replicas)
	// Boot on "none" (it needs nothing and is always built); every row then
	// switches the replicas to its own backend.
	c, err := localcluster.Start(ctx, localcluster.Config{
		Replicas: *replicas, Backend: "none", Env: env, Dir: *dir,
		Stockd: findStockd(*stockdBin), Logger: log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "seckill demo: start cluster: %v\n", err)
		return exitFailure
	}
	defer func() {
		if err := c.Close(); err != nil {
			log.Warn("cluster close", "err", err)
		}
	}()

	// With --redis-cluster every row's replicas sell on the cluster: its
	// addresses and the sale's hash-tagged keys go over each row's env.
	var clusterEnv map[string]string
	if *onCluster {
		log.Info("starting a local Redis Cluster")
		cl, err := c.StartRedisCluster(ctx, servers.RedisClusterOptions{})
		if err != nil {
			fmt.Fprintf(stderr, "seckill demo: start the redis cluster: %v\n", err)
			return exitFailure
		}
		clusterEnv = localcluster.RedisClusterEnv(cl)
	}

	if *dash != "" {
		d, err := demoDashboard(ctx, c, *dash)
		if err != nil {
			fmt.Fprintf(stderr, "seckill demo: dashboard: %v\n", err)
			return exitFailure
		}
		defer func() { _ = d.Stop() }()
		fmt.Fprintf(stderr, "dashboard: %s (watch the sale; the stock resets for every row)\n", d.URL)
	}

	// The backends table, then the second table: the redis row again with
	// each way past the one-lock bound (combining, 8 segments).
	type run struct {
		backend, sale string
		buyers        bool
	}
	var runs []run
	for _, b := range list {
		runs = append(runs, run{backend: b})
	}
	if slices.Contains(list, "redis") {
		for _, sale := range splitList(*sales) {
			runs = append(runs, run{backend: "redis", sale: sale})
		}
		if *buyers > 0 {
			runs = append(runs, run{backend: "redis", buyers: true})
		}
	}
	var rows []demoRow
	for i, r := range runs {
		if ctx.Err() != nil {
			break
		}
		row := demoRow{Backend: r.backend, Sale: r.sale, WithBuyers: r.buyers, ExpectedSafe: !unsafeBackend(r.backend, *replicas)}
		cfg := loadgen.Config{
			URL: c.URL(), AdminToken: c.AdminToken(), Minter: c.Minter(), Requests: *requests,
			Concurrency: *concurrency, Stock: *initial, Timeout: *timeout,
			// A violation's picture (none's, local's) outlives the cluster.
			HistoryDir: os.TempDir(),
		}
		if i > 0 || r.backend != c.Backend() || clusterEnv != nil {
			log.Info("switching replicas", "backend", r.backend, "sale", r.sale, "buyers", r.buyers)
			edits := []stockd.Edit{base, lab.SaleEnv(r.sale)}
			if r.buyers {
				edits = append(edits, buyersEnv(*limit))
				cfg.Users, cfg.RetryRate = *buyers, *retryRate
			}
			env := stockd.Overrides(edits...)
			maps.Copy(env, clusterEnv)
			err = c.SetBackend(ctx, r.backend, env)
		}
		if err == nil {
			row.Report, err = loadgen.Run(ctx, cfg)
		}
		if err == nil && clusterEnv != nil {
			err = row.onCluster(ctx, c.RedisCluster())
		}
		row.judge(err)
		if *asJSON {
			b, _ := json.Marshal(row)
			fmt.Fprintf(stdout, "%s\n", b)
		}
		rows = append(rows, row)
		// The items, while the replicas sell the plain redis sale: the
		// items table follows the backends'.
		if r.backend == "redis" && r.sale == "" && !r.buyers && err == nil && *items > 0 {
			log.Info("selling items at once", "items", *items)
			for _, row := range sellItems(ctx, c, *items, *itemStock, *itemRequests, max(1, *concurrency / *items), *timeout) {
				if *asJSON {
					b, _ := json.Marshal(row)
					fmt.Fprintf(stdout, "%s\n", b)
				}
				rows = append(rows, row)
			}
		}
		err = nil
	}
	var reserved *reservationsRow
	if *reserveBuyers > 0 && slices.Contains(list, "redis") && ctx.Err() == nil {
		log.Info("selling with reservations", "buyers", *reserveBuyers, "stock", *initial)
		reserved = sellReserved(ctx, c, base, clusterEnv, *initial, *reserveBuyers, *concurrency, *timeout)
		if *asJSON {
			b, _ := json.Marshal(reserved)
			fmt.Fprintf(stdout, "%s\n", b)
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "seckill demo: interrupted; tearing the cluster down")
		return exitFailure
	}
	if !*asJSON {
		var plain, sold, bought, itemRows []demoRow
		for _, r := range rows {
			switch {
			case r.Item != "":
				itemRows = append(itemRows, r)
			case r.WithBuyers:
				bought = append(bought, r)
			case r.Sale != "":
				sold = append(sold, r)
			default:
				plain = append(plain, r)
			}
		}
		writeTable(stdout, plain, false)
		if len(itemRows) > 0 {
			fmt.Fprintln(stdout)
			writeItemsTable(stdout, itemRows)
		}
		if len(sold) > 0 {
			fmt.Fprintln(stdout)
			writeTable(stdout, sold, true)
		}
		if len(bought) > 0 {
			fmt.Fprintln(stdout)
			writeBuyersTable(stdout, bought)
		}
		if reserved != nil {
			fmt.Fprintln(stdout)
			writeReservationsTable(stdout, reserved)
		}
	}
	if *linger {
		fmt.Fprintf(stderr, "cluster up at %s (admin token %s) until Ctrl-C\n", c.URL(), c.AdminToken())
		<-ctx.Done()
	}
	code := exitOK
	if reserved != nil && !reserved.OK {
		code = exitInconsistent
		if reserved.Report == nil {
			code = exitFailure
		}
	}
	for _, r := range rows {
		if r.failed {
			code = max(code, exitInconsistent)
			if r.Report == nil {
				code = exitFailure // an error row: the run never happened
			}
		}
	}
	return code
}

// onCluster reads the sale's lucky from the Redis Cluster itself: a row
// whose replicas sold elsewhere is an error, not a row on the cluster.
func (r *demoRow) onCluster(ctx context.Context, cl *servers.RedisCluster) error {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer cc.Close()
	lucky, err := cc.Get(ctx, localcluster.ClusterLuckyKey).Int64()
	if err != nil {
		return fmt.Errorf("read %s in the redis cluster: %w", localcluster.ClusterLuckyKey, err)
	}
	r.ClusterLucky = &lucky
	if lucky != r.Lucky {
		return fmt.Errorf("the redis cluster's %s is %d, the row's lucky %d: the replicas did not sell on the cluster", localcluster.ClusterLuckyKey, lucky, r.Lucky)
	}
	return nil
}

// judge sets the row's verdict and whether it fails the demo.
func (r *demoRow) judge(err error) {
	switch {
	case err != nil:
		r.Verdict, r.Error, r.failed = "ERROR: "+firstLine(err), err.Error(), true
	case !r.ExpectedSafe && r.Oversold > 0:
		r.Verdict = "OVERSOLD (expected: no lock)"
		if r.Backend == "local" {
			r.Verdict = "OVERSOLD (expected: per-process lock)"
		}
	case !r.ExpectedSafe && r.Consistent:
		r.Verdict = "consistent (race not hit this time)"
	case !r.ExpectedSafe:
		r.Verdict = "INCONSISTENT (expected: no lock)"
	// A correct backend must also never turn a buyer away while stock
	// remains (OK: consistent books and no false sold-out).
	case r.OK() && r.Errors == 0:
		r.Verdict = "consistent"
	case r.OK():
		r.Verdict = fmt.Sprintf("consistent (%d errors)", r.Errors)
	default:
		r.Verdict, r.failed = r.Report.Verdict(), true
	}
}

// writeTable prints rows; withSale names each row's sale (the second
// table) instead of only its backend.
func writeTable(w io.Writer, rows []demoRow, withSale bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	first := "backend"
	if withSale {
		first = "redis, selling with"
	}
	fmt.Fprintln(tw, first+"\tsold\tsold out\tbusy\terrors\tstock\tlucky\toversold\trps\tp50\tp99\tverdict")
	for _, r := range rows {
		name := r.Backend
		if withSale {
			name = r.Sale
		}
		if r.Report == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t%s\n", name, r.Verdict)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.1fms\t%.1fms\t%s\n",
			name, r.Sold, r.SoldOut, r.Busy, r.Errors, r.Stock, r.Lucky, r.Oversold, r.RPS, r.P50ms, r.P99ms, r.Verdict)
	}
	_ = tw.Flush()
}

// maxDemoItems bounds --items: every item is sold at once.
const maxDemoItems = 20

// sellItems sells n items ("demo-1".."demo-<n>") at once, each by its own
// run of requests at concurrency in flight over stock units (created, or
// reset when the cluster has them), and returns one judged row per item.
func sellItems(ctx context.Context, c *localcluster.Cluster, n, stock, requests, concurrency int, timeout time.Duration) []demoRow {
	ids := loadgen.ItemIDs("demo", n)
	s, _ := loadgen.RunItems(ctx, loadgen.Config{
		URL: c.URL(), AdminToken: c.AdminToken(), Requests: requests * n, Concurrency: concurrency * n,
		Stock: stock, Timeout: timeout, HistoryDir: os.TempDir(),
	}, ids) // each item's error is judged on its row
	rows := make([]demoRow, n)
	for i, id := range ids {
		rows[i] = demoRow{Backend: "redis", Item: id, ExpectedSafe: true}
		var err error
		if s != nil {
			for _, r := range s.Items {
				if r.Item == id {
					rows[i].Report = r
				}
			}
			err = s.Err(id)
		}
		if err == nil && rows[i].Report == nil {
			err = errors.New("no report")
		}
		rows[i].judge(err)
	}
	return rows
}

// writeItemsTable prints the items' rows: each item's own books.
func writeItemsTable(w io.Writer, rows []demoRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "redis, item\tsold\tsold out\tstock\tlucky\toversold\tverdict")
	for _, r := range rows {
		if r.Report == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t%s\n", r.Item, r.Verdict)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.Item, r.Sold, r.SoldOut, r.Stock, r.Lucky, r.Oversold, r.Verdict)
	}
	_ = tw.Flush()
}

// buyersEnv is the stockd configuration of the buyers row: every sale
// leaves an order in the ledger, limit units per buyer, and the orders are
// stored in MySQL (localcluster starts MariaDB for orders.durable).
func buyersEnv(limit int) stockd.Edit {
	return func(c *stockd.Config) {
		c.Stock.Ledger, c.Stock.PerUserLimit, c.Orders.Durable = true, limit, true
	}
}

// writeBuyersTable prints the buyer-aware rows: the purchases, what the
// ledger and MySQL hold after the sale, and the verdict of every check.
func writeBuyersTable(w io.Writer, rows []demoRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "redis, with buyers\tbuyers\tlimit\tre-sent\tcut\tsold\treplayed\tlimit reached\torders\tdistinct buyers\tduplicates\tover limit\tMySQL rows\trps\tp99\tverdict")
	for _, r := range rows {
		if r.Report == nil || r.Report.Buyers == nil {
			fmt.Fprintf(tw, "ledger + durable%s\t%s\n", strings.Repeat("\t-", 14), r.Verdict)
			continue
		}
		b := r.Report.Buyers
		mysql := "-"
		if b.Ledger.Durable != nil {
			mysql = strconv.FormatInt(*b.Ledger.Durable, 10)
		}
		resent := 0
		for _, n := range b.Resent {
			resent += n
		}
		fmt.Fprintf(tw, "ledger + durable\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%.0f\t%.1fms\t%s\n",
			b.Users, b.PerUserLimit, resent, b.Cut, b.Sold, b.Replayed, b.LimitReached, b.Ledger.Orders, b.Ledger.Buyers,
			b.Duplicates, b.OverLimit, mysql, r.RPS, r.P99ms, r.Verdict)
	}
	_ = tw.Flush()
}

// findStockd picks the stockd binary: the flag, else a stockd beside this
// executable (make build puts both in bin/), else "" so the cluster builds
// one from source.
func findStockd(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if self, err := os.Executable(); err == nil {
		sibling := filepath.Join(filepath.Dir(self), "stockd")
		if st, err := os.Stat(sibling); err == nil && !st.IsDir() {
			return sibling
		}
	}
	return ""
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// demoDashboard serves the dashboard of c's replicas, reading the books
// straight from c's Redis (its Redis Cluster, when one runs), until its
// Stop.
func demoDashboard(ctx context.Context, c *localcluster.Cluster, listen string) (*runningDashboard, error) {
	urls := make([]string, c.Replicas())
	for i := range urls {
		urls[i] = c.ReplicaURL(i)
	}
	var (
		rdb                redis.UniversalClient
		stockKey, luckyKey string
	)
	if cl := c.RedisCluster(); cl != nil {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(),
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
		stockKey, luckyKey = localcluster.ClusterStockKey, localcluster.ClusterLuckyKey
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: c.Redis().Addr(),
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	}
	agg, err := dashboard.New(dashboard.Config{Replicas: urls, Redis: rdb, StockKey: stockKey, LuckyKey: luckyKey})
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	d, err := startDashboard(ctx, agg, listen)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	d.after = func() { _ = rdb.Close() } // once the poller has stopped
	return d, nil
}
