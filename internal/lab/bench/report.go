package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Report is everything a run measured; its JSON form is `seckill bench --json`.
type Report struct {
	Command  string    `json:"command"`
	Quick    bool      `json:"quick"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  Machine   `json:"machine"`
	Versions Versions  `json:"versions"`
	RTT      RTT       `json:"rtt"`
	// SerialBound is 1 / (CriticalSectionRoundTrips × median RTT): no lock
	// can sell faster than its critical section allows. The median, not the
	// mean, because on a loaded machine a few descheduled PINGs dominate
	// the mean.
	SerialBound float64    `json:"serial_bound_sales_per_sec"`
	Micro       []MicroRow `json:"micro"`
	// Hold are the micro rows against critical-section time (HoldDelays).
	Hold []HoldRow `json:"hold,omitempty"`
	E2E  []E2ERow  `json:"e2e"`
	// Scaling are the combining and segments rows (RowsScaling).
	Scaling []E2ERow `json:"e2e_scaling,omitempty"`
	// ScalingTarget is how long each scaling run was sized to sell for.
	ScalingTarget time.Duration `json:"e2e_scaling_target_ns,omitempty"`
	// Ledger are the order ledger's rows (RowsLedger), LedgerTarget how
	// long each of their runs was sized to sell for.
	Ledger       []E2ERow      `json:"e2e_ledger,omitempty"`
	LedgerTarget time.Duration `json:"e2e_ledger_target_ns,omitempty"`
	// LedgerCost is every ledger row's ratios to its mode's ledger-off
	// row (LedgerCosts), filled by evaluate.
	LedgerCost []LedgerCost `json:"ledger_cost,omitempty"`
	// Flood are the open-loop floods (RowsFlood).
	Flood []FloodRow `json:"e2e_flood,omitempty"`
	// Reserve is what reservations cost (RowsReserve).
	Reserve []ReserveRow `json:"e2e_reserve,omitempty"`
	// Items are one item against 8 at once (RowsItems), ItemsTarget how
	// long each of their runs was sized to sell for.
	Items       []ItemsRow    `json:"e2e_items,omitempty"`
	ItemsTarget time.Duration `json:"e2e_items_target_ns,omitempty"`
	// Memory is the million-unit sale's Redis memory (RowsMemory).
	Memory *MemoryRow `json:"e2e_memory,omitempty"`
	// Cluster are the same sales on one Redis and a Redis Cluster
	// (RowsCluster), ClusterTarget how long their runs were sized for.
	Cluster       []ClusterRow  `json:"e2e_cluster,omitempty"`
	ClusterTarget time.Duration `json:"e2e_cluster_target_ns,omitempty"`
	Goals         []Goal        `json:"goals"`
	Notes         []string      `json:"notes,omitempty"`
}

// Goal is one ratio the run is judged by.
type Goal struct {
	Name     string `json:"name"`
	Want     string `json:"want"`
	Measured string `json:"measured"`
	// Met is false when the goal was missed or could not be measured
	// (Unmeasured then says why).
	Met        bool   `json:"met"`
	Unmeasured string `json:"unmeasured,omitempty"`
}

// NotRun reports whether the goal's rows were left out of this run (not
// failed: left out), so a partial run's report need not list it.
func (g Goal) NotRun() bool { return strings.HasSuffix(g.Unmeasured, "not run") }

// Verdict is "met", "not met" or "not measured (…)".
func (g Goal) Verdict() string {
	switch {
	case g.Unmeasured != "":
		return "not measured (" + g.Unmeasured + ")"
	case g.Met:
		return "met"
	}
	return "not met"
}

// GoalContenders is the contender count the micro goals are judged at.
const GoalContenders = 50

// Row returns the micro row of subject at c contenders, if it ran.
func (r *Report) Row(subject string, c int) (MicroRow, bool) {
	for _, m := range r.Micro {
		if m.Subject == subject && m.Contenders == c {
			return m, true
		}
	}
	return MicroRow{}, false
}

// E2ERow returns the end-to-end row with label (backend, or "atomic (no lock)").
func (r *Report) E2ERow(label string) (E2ERow, bool) {
	for _, e := range r.E2E {
		if e.Label() == label {
			return e, true
		}
	}
	return E2ERow{}, false
}

// usable says why a row cannot be judged, or "".
func usable(m MicroRow, ok bool) string {
	switch {
	case !ok:
		return "row not run"
	case m.Unavailable:
		return m.Subject + " unavailable"
	case m.Error != "" || !m.InvariantOK:
		return m.Subject + " failed"
	}
	return ""
}

// evaluate fills SerialBound and Goals.
func (r *Report) evaluate() {
	if r.RTT.Mean > 0 {
		r.SerialBound = 1 / (CriticalSectionRoundTrips * r.RTT.P50.Seconds())
	}
	ratioAt := func(c int, name, a, b string, want float64, extra func(MicroRow) (string, bool)) Goal {
		g := Goal{Name: name, Want: fmt.Sprintf("%s ≥ %.1f× %s sales/s at %d contender%s", a, want, b, c, plural(c))}
		ra, oka := r.Row(a, c)
		rb, okb := r.Row(b, c)
		if why := usable(ra, oka); why != "" {
			g.Unmeasured = why
			return g
		}
		if why := usable(rb, okb); why != "" {
			g.Unmeasured = why
			return g
		}
		x := ra.SalesPerSec / rb.SalesPerSec
		g.Measured = fmt.Sprintf("%.2f× (%.0f vs %.0f sales/s)", x, ra.SalesPerSec, rb.SalesPerSec)
		g.Met = x >= want
		if extra != nil {
			s, ok := extra(ra)
			g.Measured += "; " + s
			g.Met = g.Met && ok
		}
		return g
	}
	ratio := func(name, a, b string, want float64, extra func(MicroRow) (string, bool)) Goal {
		return ratioAt(GoalContenders, name, a, b, want, extra)
	}
	redisExtra := func(m MicroRow) (string, bool) {
		return fmt.Sprintf("%.2f acquire round trips/sale (want ≤ 1.5), fairness %.2f× fair share (want ≤ 2)", m.AcquireRT, m.Fairness),
			m.AcquireRT >= 0 && m.AcquireRT <= 1.5 && m.Fairness <= 2
	}
	r.Goals = []Goal{
		ratio("redis vs redsync", "redis", "redsync", 1.2, redisExtra),
		ratio("redisson vs redsync", "redisson", "redsync", 1.0, nil),
		ratio("etcd vs raw concurrency.Mutex", "etcd", "etcd-mutex", 1.5, nil),
		ratio("zookeeper vs raw zk.Lock", "zookeeper", "zk-lock", 1.5, nil),
		ratio("mysql vs raw GET_LOCK loop", "mysql", "mysql-getlock", 1.5, nil),
		// Uncontended, the cohort and the queue have nothing to win: the
		// goal is that they cost nothing either.
		ratioAt(1, "uncontended: redis vs redsync", "redis", "redsync", 1.0, nil),
		ratioAt(1, "uncontended: zookeeper vs raw zk.Lock", "zookeeper", "zk-lock", 1.0, nil),
	}
	g := Goal{Name: "end to end: redis vs atomic", Want: "redis through nginx ≥ 40% of atomic mode's sales/s"}
	red, ok1 := r.E2ERow("redis")
	atom, ok2 := r.E2ERow("atomic (no lock)")
	switch {
	case !ok1 || !ok2:
		g.Unmeasured = "end-to-end rows not run"
	case red.Error != "" || !red.Consistent:
		g.Unmeasured = "redis end-to-end row failed"
	case atom.Error != "" || !atom.Consistent:
		g.Unmeasured = "atomic end-to-end row failed"
	default:
		x := red.SalesPerSec / atom.SalesPerSec
		g.Measured = fmt.Sprintf("%.0f%% (%.0f vs %.0f sales/s)", 100*x, red.SalesPerSec, atom.SalesPerSec)
		g.Met = x >= 0.4
	}
	r.Goals = append(r.Goals, g)
	r.Goals = append(r.Goals, r.scalingGoals()...)
	if len(r.Flood) > 0 {
		r.Goals = append(r.Goals, r.floodGoals()...)
	}
	if len(r.Items) > 0 {
		r.Goals = append(r.Goals, r.itemsGoals()...)
	}
	if r.Memory != nil {
		r.Goals = append(r.Goals, r.memoryGoal())
	}
	if len(r.Cluster) > 0 {
		r.Goals = append(r.Goals, r.clusterGoals()...)
	}
	r.LedgerCost = r.LedgerCosts()
}

// OK reports whether every row that ran kept its invariant (unavailable rows
// do not count against it).
func (r *Report) OK() bool {
	for _, m := range r.Micro {
		if !m.Unavailable && !m.InvariantOK {
			return false
		}
	}
	for _, e := range r.E2E {
		if !e.Unavailable && !e.Consistent {
			return false
		}
	}
	if !r.holdOK() {
		return false
	}
	// A scaling or ledger row that errored (a run cut short, a calibration
	// that sold nothing) also fails: its goals and ratios cannot be judged.
	for _, e := range slices.Concat(r.Scaling, r.Ledger) {
		if !e.Unavailable && (!e.Consistent || e.Error != "") {
			return false
		}
	}
	for _, f := range r.Flood {
		if !f.Consistent || f.Error != "" {
			return false
		}
	}
	for _, row := range r.Items {
		if !row.Consistent || row.Error != "" {
			return false
		}
	}
	if m := r.Memory; m != nil && (!m.Consistent || m.Error != "") {
		return false
	}
	for _, row := range r.Cluster {
		if !row.Consistent || row.Error != "" {
			return false
		}
	}
	return true
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Contenders lists the contender counts the micro rows used, in order.
func (r *Report) Contenders() []int {
	var cs []int
	for _, m := range r.Micro {
		if !slices.Contains(cs, m.Contenders) {
			cs = append(cs, m.Contenders)
		}
	}
	return cs
}

// Charts names the charts WriteMarkdown links, relative to the markdown
// file ("" for none).
type Charts struct {
	Micro    string // WriteSVG: micro sales/s per subject
	Segments string // WriteSegmentsSVG: end-to-end sales/s against segments
	Hold     string // WriteHoldSVG: sales/s against critical-section time
}

// WriteMarkdown writes docs/benchmarks.md, linking charts.
func (r *Report) WriteMarkdown(w io.Writer, charts Charts) error {
	svgName := charts.Micro
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Benchmarks\n\n")
	p("Generated by `%s` on %s (%.0f s). Do not edit by hand: rerun it.\n\n",
		r.Command, r.Started.Format("2006-01-02 15:04 MST"), r.Finished.Sub(r.Started).Seconds())
	if r.Quick {
		p("**Quick run (smoke test): tiny stock per row, numbers are not meaningful.**\n\n")
	}
	p("All figures come from one run on the same servers. The machine is small and shared, so\n")
	p("absolute numbers are noisy; the goals are ratios measured side by side.\n\n")

	p("## Goals\n\n| goal | want | measured | verdict |\n|---|---|---|---|\n")
	left := 0
	for _, g := range r.Goals {
		if g.NotRun() {
			left++
			continue
		}
		p("| %s | %s | %s | **%s** |\n", g.Name, g.Want, dash(g.Measured), g.Verdict())
	}
	if left > 0 {
		p("\n%d goal%s of rows this run left out (`--skip-micro`, `--e2e-rows`) not listed.\n", left, plural(left))
	}

	p("\n## Machine and servers\n\n| | |\n|---|---|\n")
	m := r.Machine
	p("| CPUs (nproc) | %d |\n| CPU | %s |\n| memory | %d MiB |\n| kernel | %s |\n| OS/arch | %s |\n| Go | %s |\n",
		m.CPUs, dash(m.CPUModel), m.MemoryMiB, m.Kernel, m.OS, m.Go)
	p("| load average at start / end | %s / %s |\n", m.LoadStart, m.LoadEnd)
	v := r.Versions
	p("| redis | %s |\n| etcd | %s |\n| ZooKeeper | %s |\n| MySQL (MariaDB) | %s |\n| nginx | %s |\n", v.Redis, v.Etcd, v.ZooKeeper, v.MySQL, v.Nginx)
	p("| Redis RTT (PING loop, %d pings) | mean %s, p50 %s, p99 %s |\n", r.RTT.Pings, us(r.RTT.Mean), us(r.RTT.P50), us(r.RTT.P99))
	for _, n := range r.Notes {
		p("\nNote: %s\n", n)
	}

	if len(r.Micro) > 0 {
		p("\n## Lock micro-benchmark\n\n")
		p("Each contender loops lock → `GET stock` → `MULTI SET stock-1, INCR lucky EXEC` → unlock until\n")
		p("the stock N is gone; contenders are spread over 3 client sets (3 \"processes\", each with its own\n")
		p("clients and lockers). N is chosen per row from a short calibration so the row sells for a few\n")
		p("seconds. *invariant* means stock 0, lucky N and N sales counted afterwards.\n\n")
		p("Ceilings: the **lock-free** row sells with one Lua script per sale and no lock; the\n")
		p("**serial bound** is 1 / (%d critical-section round trips × %s median RTT) = **%.0f sales/s**:\n",
			CriticalSectionRoundTrips, us(r.RTT.P50), r.SerialBound)
		p("no lock can sell faster than its holder can read and write.\n")
		if svgName != "" {
			p("\n![sales/s at %d contenders](%s)\n", GoalContenders, svgName)
		}
		for _, c := range r.Contenders() {
			p("\n### %d contender%s\n\n", c, plural(c))
			p("| subject | kind | N | sales/s | runs (sales/s) | × redsync | acquire RT/sale | lock RT/sale | wait p50 | wait p99 | fairness | gave up | invariant |\n")
			p("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
			base, baseOK := r.Row("redsync", c)
			for _, row := range r.Micro {
				if row.Contenders != c {
					continue
				}
				if row.Unavailable || (row.Error != "" && row.Sales == 0) {
					p("| %s | %s | | | | | | | | | | | %s |\n", row.Subject, row.Kind, cell(row.Error, row.Unavailable))
					continue
				}
				x := "—"
				if baseOK && base.SalesPerSec > 0 && usable(base, true) == "" {
					x = fmt.Sprintf("%.2f×", row.SalesPerSec/base.SalesPerSec)
				}
				inv := "ok"
				if !row.InvariantOK {
					inv = "**BROKEN** " + row.Error
				} else if row.Error != "" {
					inv = "ok, but " + row.Error
				}
				wait50, wait99 := fmt.Sprintf("%.2f ms", row.WaitP50ms), fmt.Sprintf("%.2f ms", row.WaitP99ms)
				if row.Kind == KindCeiling {
					wait50, wait99 = "—", "—"
				}
				p("| %s | %s | %d | %.0f | %s | %s | %s | %s | %s | %s | %.2f | %d | %s |\n",
					row.Subject, row.Kind, row.Stock, row.SalesPerSec, runList(row.Runs), x, rt(row.AcquireRT, row.Kind), rt(row.LockRT, row.Kind),
					wait50, wait99, row.Fairness, row.GaveUp, inv)
			}
			p("| serial bound | ceiling | | %.0f | | | | | | | | | |\n", r.SerialBound)
		}
		r.writeEvidence(p)
	}
	r.writeHold(p, charts.Hold)

	if len(r.E2E) > 0 {
		e := r.E2E[0]
		p("\n## End to end (loadgen → nginx → %s stockd replicas)\n\n", "3")
		p("%d `POST /stock/reduce` requests, %d in flight, stock %d, `work.delay` 0. sales/s is units sold\n", e.Requests, e.Concurrency, e.Stock)
		p("over the whole run's duration. *atomic* is stockd's `stock.mode: atomic` (one Lua script per\n")
		p("sale, no lock): the HTTP ceiling.\n\n")
		p("| backend | sales/s | %% of atomic | requests/s | p50 | p99 | sold | sold out | busy | errors | consistent |\n")
		p("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
		atom, atomOK := r.E2ERow("atomic (no lock)")
		for _, e := range r.E2E {
			if e.Error != "" && e.Sold == 0 {
				p("| %s | | | | | | | | | | %s |\n", e.Label(), cell(e.Error, e.Unavailable))
				continue
			}
			pct := "—"
			if atomOK && atom.SalesPerSec > 0 {
				pct = fmt.Sprintf("%.0f%%", 100*e.SalesPerSec/atom.SalesPerSec)
			}
			cons := "yes"
			if !e.Consistent {
				cons = "**NO** " + e.Error
			}
			p("| %s | %.0f | %s | %.0f | %.1f ms | %.1f ms | %d | %d | %d | %d | %s |\n",
				e.Label(), e.SalesPerSec, pct, e.RPS, e.P50ms, e.P99ms, e.Sold, e.SoldOut, e.Busy, e.Errors, cons)
		}
		writeCPU(p, r.E2E, r.Machine.CPUs, "each row's one run")
	}

	r.writeScaling(p, charts.Segments)
	r.writeLedger(p)
	r.writeFlood(p)
	r.writeReserve(p)
	r.writeItems(p)
	r.writeMemory(p)
	r.writeCluster(p)

	if len(r.Micro) > 0 {
		p("\n## What was run\n\n| subject | kind | what |\n|---|---|---|\n")
		for _, s := range Subjects() {
			p("| %s | %s | %s |\n", s.Name, s.Kind, s.About)
		}
		p("\n## How round trips are counted\n\n")
		p("*acquire RT/sale* is lock round trips sent while acquiring, per acquisition; *lock RT/sale*\n")
		p("counts every lock round trip (acquire, release, renewals). Lock clients are separate from the\n")
		p("clients that read and write the stock, so the critical section is never counted.\n\n")
		p("- **Redis** (redis, redisson, redsync, bsm, setnx-poll): a go-redis `Hook` on the lock clients\n")
		p("  counts each command and each pipeline once. The sale loop tags the ctx it passes to Lock and to\n")
		p("  unlock, so whatever a library sends under Lock's ctx (SET NX, EVALSHA, redsync's clean-up after a\n")
		p("  failed try) is an acquire round trip. Pub/sub messages are not requests and are not counted.\n")
		p("- **etcd** (etcd, etcd-mutex): gRPC interceptors on the lock clients count unary RPCs (Txn,\n")
		p("  Range, DeleteRange, …) by the same ctx tag, and each watch created on the shared Watch stream as\n")
		p("  one acquire round trip. Lease keep-alives are not counted.\n")
		p("- **ZooKeeper** (zookeeper, zk-lock): go-zookeeper has no hook, so the count is server-side: the\n")
		p("  change in `mntr`'s `zk_packets_received` over the row (create, getChildren, getData/exists\n")
		p("  watches, delete, and the odd ping; nothing else uses that ZooKeeper meanwhile). Both release\n")
		p("  with one delete, so acquire RT = lock RT − 1.\n")
		p("- **MySQL** (mysql, mysql-getlock, mysql-row, mysql-forupdate): go-sql-driver has no hook either:\n")
		p("  the change in the server's `Questions` status over the row, every statement (GET_LOCK, token\n")
		p("  mints, RELEASE_LOCK, keep-alives, BEGIN/COMMIT), so acquire RT = lock RT is an upper bound.\n")
		p("\n*wait* is the time a contender spent inside Lock; *fairness* is the busiest contender's sales\n")
		p("divided by a fair share (N / contenders): 1.00 is perfectly even. *gave up* counts Lock calls a\n")
		p("peer library abandoned on its own (redsync after 32 tries, bsm/redislock at its TTL deadline)\n")
		p("that the loop simply called again.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

func rt(v float64, kind string) string {
	if kind == KindCeiling || v < 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", v)
}

// cell is an error for a table cell: one line, no pipes.
func cell(err string, unavailable bool) string {
	err = cellText(err)
	if unavailable {
		return "unavailable: " + err
	}
	return "**ERROR** " + err
}

// cellText is text for a table cell: no pipes, at most 120 bytes.
func cellText(s string) string {
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// writeEvidence is the "what bounds each row" table: CPU per sale on each
// side, how many cores that kept busy, and etcd's disk syncs.
func (r *Report) writeEvidence(p func(string, ...any)) {
	p("\n## What bounds each row\n\n")
	p("Measured over each row's sale loop. *client CPU* is the benchmark process (every contender,\n")
	p("client and locker: the 3 \"processes\" live in it); *lock server CPU* is the lock server's process\n")
	p("(for Redis locks the same Redis that holds the stock); *Redis CPU* is the stock's Redis.\n")
	p("*cores busy* = all of it × sales/s: near %d (the machine's CPUs, shared with whatever else ran)\n", r.Machine.CPUs)
	p("means the row is CPU-bound. *disk busy* = etcd WAL fsyncs/sale × mean fsync × sales/s: near 1\n")
	p("means etcd's serial WAL fsync bounds the row.\n\n")
	p("| subject | contenders | sales/s | client CPU µs/sale | lock server CPU µs/sale | Redis CPU µs/sale | cores busy | fsyncs/sale | fsync ms | disk busy |\n")
	p("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, m := range r.Micro {
		if m.Unavailable || m.Sales == 0 {
			continue
		}
		e := m.Evidence
		total := e.ClientCPUus + e.DataCPUus
		srv := "—"
		if e.ServerCPUus >= 0 && m.Server != "redis" {
			total += e.ServerCPUus
			srv = fmt.Sprintf("%.0f", e.ServerCPUus)
		} else if m.Server == "redis" {
			srv = "(= Redis)"
		}
		fs, fms, disk := "—", "—", "—"
		if e.Fsyncs >= 0 {
			fs, fms = fmt.Sprintf("%.2f", e.Fsyncs), fmt.Sprintf("%.2f", e.FsyncMs)
			disk = fmt.Sprintf("%.2f", e.Fsyncs*e.FsyncMs/1000*m.SalesPerSec)
		}
		p("| %s | %d | %.0f | %.0f | %s | %.0f | %.2f | %s | %s | %s |\n", m.Subject, m.Contenders, m.SalesPerSec,
			e.ClientCPUus, srv, e.DataCPUus, total*m.SalesPerSec/1e6, fs, fms, disk)
	}
}

// runList is a micro row's runs' sales/s, "—" for a single run.
func runList(runs []float64) string {
	if len(runs) == 0 {
		return "—"
	}
	rs := make([]string, len(runs))
	for i, v := range runs {
		rs[i] = fmt.Sprintf("%.0f", v)
	}
	return strings.Join(rs, " / ")
}
