package lab

import (
	"slices"
	"testing"
)

func TestCellExpect(t *testing.T) {
	cases := []struct {
		cell Cell
		want Expect
	}{
		{Cell{Backend: "redis", Scenario: "pause", Fencing: true}, ExpectSafe},
		{Cell{Backend: "zookeeper", Scenario: "kill", Fencing: true}, ExpectSafe},
		{Cell{Backend: "redis", Scenario: "pause", Fencing: false}, ExpectOversell},
		{Cell{Backend: "redis-nocheck", Scenario: "slowwork", Fencing: true}, ExpectOversell},
		{Cell{Backend: "setnx", Scenario: "crash", Fencing: true}, ExpectStuck},
		{Cell{Backend: "mysql", Scenario: "lockrestart", Fencing: true}, ExpectSafe},
		{Cell{Backend: "mysql-row", Scenario: "pause", Fencing: true}, ExpectSafe},
		{Cell{Backend: "mysql-row", Scenario: "pause", Fencing: false}, ExpectOversell},
		{Cell{Backend: "redis", Scenario: "kill", Fencing: true, Sale: "segments8"}, ExpectSafe},
		{Cell{Backend: "etcd", Scenario: "wipe", Fencing: true}, ExpectHalt},
		{Cell{Backend: "mysql", Scenario: "restore", Fencing: true}, ExpectHalt},
	}
	for _, tc := range cases {
		if got := tc.cell.Expect(); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.cell, got, tc.want)
		}
	}
}

func TestMatrixHasControlsAndFlawedCells(t *testing.T) {
	cells := Matrix(nil, nil)
	// 14 scenarios besides crash on each of the first four correct
	// backends, less the two experimental lockforget cells and those by
	// name (redisson's blip, partition and stockdown, zookeeper's
	// stockdown); mysql's 11 (no lockforget, no blip, stockdown by name)
	// and mysql-row's 3; controls: pause x6,
	// latency and lockforget on redis; 3 flawed cells; pause, kill and
	// latency for each of the 2 sales on redis; the 4 buyers' cells on
	// redis; failover-kill with acks 1 on redis and etcd, failover-lag
	// with acks 1 on redis (the acks-0 controls run when named); split
	// with acks 1 and its control on redis; restore-all, restore-both,
	// witness-wipe, witness-restore, reconcile, other-sale, witnessdown
	// and evict on redis and etcd; the none and local flawed
	// cells, falsesoldout on redis, bellearly plain and combined on redis,
	// the 3 items' cells on redis, and the
	// 5 cluster cells with acks 1 and cluster-lag's control on redis; the
	// 3 clock cells on redis and etcd (failover-clock with acks 1);
	// newer-reset on redis and etcd; the 5 reservation cells on redis
	// and etcd, reserve-failover with acks 1, reserve-restore and
	// reserve-durable on redis.
	if got, want := len(cells), 4*14-2-4+11+3+6+1+1+3+2*3+4+2+1+2+2*5+2+1+2+3+6+2*3+2*3+2+2*5+1+1+1; got != want {
		t.Fatalf("got %d cells, want %d", got, want)
	}
	if got := Matrix([]string{"etcd"}, nil); slices.ContainsFunc(got, func(c Cell) bool { return c.Scenario == "lockforget" }) {
		t.Fatalf("etcd's cells %v include the experimental lockforget", got)
	}
	if got := Matrix([]string{"etcd"}, []string{"lockforget"}); len(got) != 1 {
		t.Fatalf("etcd/lockforget asked for by name: got %v, want the one cell", got)
	}
	if got := Matrix([]string{"redis"}, []string{"lockforget"}); len(got) != 2 || got[1].Fencing {
		t.Fatalf("redis/lockforget: got %v, want the fenced cell and its unfenced control", got)
	}
	if got := Matrix([]string{"redis"}, []string{"pause"}); len(got) != 5 || got[1].Fencing ||
		got[2].String() != "redis/pause/fenced/buyers" ||
		got[3].String() != "redis/pause/fenced/combine" || got[4].String() != "redis/pause/fenced/segments8" {
		t.Fatalf("redis/pause: got %v, want the fenced cell, its unfenced control, the buyers' cell and the two sales", got)
	}
	if got := Matrix([]string{"setnx"}, nil); len(got) != 1 || got[0].Scenario != "crash" {
		t.Fatalf("setnx: got %v, want only the crash cell", got)
	}
}

// The buyers' cells run on redis, fenced, each scenario of buyerScenarios
// once, and the clock-jump cell on redis and etcd; the scenarios that exist only for buyers never run anonymous.
func TestMatrixBuyers(t *testing.T) {
	var got []string
	for _, c := range Matrix(nil, nil) {
		if c.Buyers {
			got = append(got, c.String())
			if c.Expect() != ExpectSafe || c.initial() != BuyerInitial {
				t.Errorf("%s: got expect %s, initial %d; want safe, %d", c, c.Expect(), c.initial(), BuyerInitial)
			}
		} else if buyersOnly(c.Scenario) {
			t.Errorf("%s: a buyers-only scenario without buyers", c)
		}
	}
	want := []string{"redis/clock-jump/fenced/buyers", "redis/pause/fenced/buyers", "redis/consumerkill/fenced/buyers",
		"redis/mysqldown/fenced/buyers", "redis/replayrace/fenced/buyers", "etcd/clock-jump/fenced/buyers"}
	if !slices.Equal(got, want) {
		t.Fatalf("got buyers' cells %v, want %v", got, want)
	}
	if got := Matrix([]string{"etcd"}, []string{"consumerkill"}); len(got) != 0 {
		t.Fatalf("etcd/consumerkill: got %v, want none (buyers' cells are redis's)", got)
	}
	for _, s := range buyerScenarios {
		if Summary(s) == "" {
			t.Errorf("buyers' scenario %q is not a scenario", s)
		}
	}
}

// The reservation cells run on redis and etcd, fenced, safe, each with
// the reservations' stock and settings; on no other backend, even named.
func TestMatrixReservations(t *testing.T) {
	var got []string
	for _, c := range Matrix(nil, nil) {
		if !IsReserve(c.Scenario) {
			continue
		}
		got = append(got, c.String())
		env := cellEnv(c)
		if c.Expect() != ExpectSafe || c.initial() != reserveStock || Summary(c.Scenario) == "" ||
			env["STOCKD_ORDERS_PAYMENT_WINDOW"] != reserveWindow.String() || env["STOCKD_STOCK_LEDGER"] != "true" {
			t.Errorf("%s: expect %s, initial %d, env %v; want safe, %d, the ledger and a %s window",
				c, c.Expect(), c.initial(), env, reserveStock, reserveWindow)
		}
	}
	var want []string
	for _, b := range reserveBackends {
		for _, s := range reserveScenarios {
			if s == "reserve-durable" && b != "redis" {
				continue // etcd's by name: its fault is MariaDB's alone
			}
			want = append(want, b+"/"+s+"/fenced")
		}
		// And the failover's, with replica acks only, on redis
		// (failoverCells; etcd's by name).
		if b == "redis" {
			want = append(want, b+"/reserve-failover/fenced/acks1")
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got reservation cells %v, want %v", got, want)
	}
	if got := Matrix([]string{"zookeeper"}, []string{"reserve-kill"}); len(got) != 0 {
		t.Fatalf("zookeeper/reserve-kill by name: got %v, want none", got)
	}
	got2 := Matrix([]string{"etcd"}, []string{"reserve-durable"})
	if len(got2) != 1 || cellEnv(got2[0])["STOCKD_ORDERS_DURABLE"] != "true" {
		t.Fatalf("etcd/reserve-durable by name: got %v, want one cell with durable orders", got2)
	}
}

// The items' cells run on redis, fenced, once each, safe; by name too, and
// on no other backend even when named.
func TestMatrixItems(t *testing.T) {
	var got []string
	for _, c := range Matrix(nil, nil) {
		if isItems(c.Scenario) {
			got = append(got, c.String())
			if c.Expect() != ExpectSafe || !scenarios[c.Scenario].items || Summary(c.Scenario) == "" {
				t.Errorf("%s: got expect %s, want safe, an items' scenario with a summary", c, c.Expect())
			}
		}
	}
	want := []string{"redis/item-halt/fenced", "redis/item-window/fenced", "redis/item-restore-all/fenced"}
	if !slices.Equal(got, want) {
		t.Fatalf("got items' cells %v, want %v", got, want)
	}
	if got := Matrix(nil, []string{"item-window"}); len(got) != 1 || got[0].String() != want[1] {
		t.Fatalf("item-window by name: got %v, want %s alone", got, want[1])
	}
	if got := Matrix([]string{"etcd"}, itemScenarios); len(got) != 0 {
		t.Fatalf("etcd's items' cells: got %v, want none", got)
	}
}

// The mysql backends' cells: what runs by default (mysql-row a
// smaller set), the rest of mysql-row's by name, and never a scenario the
// lab cannot stage on MySQL.
func TestMatrixMySQL(t *testing.T) {
	names := func(cells []Cell) []string {
		var out []string
		for _, c := range cells {
			out = append(out, c.String())
		}
		return out
	}
	want := []string{"mysql/kill/fenced", "mysql/pause/fenced", "mysql/slowwork/fenced", "mysql/partition/fenced",
		"mysql/lockrestart/fenced", "mysql/latency/fenced", "mysql/lostreply/fenced",
		"mysql/slowreply/fenced", "mysql/netsplit/fenced", "mysql/wipe/fenced", "mysql/restore/fenced", "mysql/pause/unfenced"}
	if got := names(Matrix([]string{"mysql"}, nil)); !slices.Equal(got, want) {
		t.Errorf("mysql: got %v, want %v", got, want)
	}
	want = []string{"mysql-row/kill/fenced", "mysql-row/pause/fenced", "mysql-row/lockrestart/fenced", "mysql-row/pause/unfenced"}
	if got := names(Matrix([]string{"mysql-row"}, nil)); !slices.Equal(got, want) {
		t.Errorf("mysql-row: got %v, want %v", got, want)
	}
	if got := names(Matrix([]string{"mysql-row"}, []string{"partition", "latency"})); len(got) != 2 {
		t.Errorf("mysql-row partition and latency by name: got %v, want both", got)
	}
	for _, b := range []string{"mysql", "mysql-row"} {
		for _, s := range []string{"lockforget", "blip"} {
			if Inapplicable(b, s) == "" {
				t.Errorf("%s/%s: no reason given", b, s)
			}
			if got := Matrix([]string{b}, []string{s}); len(got) != 0 {
				t.Errorf("%s/%s asked for by name: got %v, want none (inapplicable)", b, s, got)
			}
		}
	}
}

// The cells whose stock Redis loses the sale run once per correct backend
// (mysql-row's by name; the witness cells on redis and etcd, the others by
// name), fenced only: the halt is checked in the fenced read, which the
// unfenced sale skips; never with a Sale, buyers or Sentinel, whose books
// they would not add to.
func TestMatrixStoreLoss(t *testing.T) {
	var got []string
	for _, c := range Matrix(nil, nil) {
		if !losesStore(c.Scenario) {
			continue
		}
		got = append(got, c.String())
		if c.Expect() != ExpectHalt {
			t.Errorf("%s: got expect %s, want %s", c, c.Expect(), ExpectHalt)
		}
	}
	var want []string
	for _, b := range Correct {
		if b == "mysql-row" {
			continue
		}
		want = append(want, b+"/wipe/fenced", b+"/restore/fenced")
		if b == "redis" {
			want = append(want, b+"/reserve-restore/fenced")
		}
		if b == "redis" || b == "etcd" {
			want = append(want, b+"/restore-all/fenced", b+"/restore-both/fenced", b+"/witness-wipe/fenced", b+"/witness-restore/fenced", b+"/other-sale/fenced")
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got store-loss cells %v, want %v", got, want)
	}
	for _, b := range Correct {
		if got := Matrix([]string{b}, storeLossScenarios); len(got) != len(storeLossScenarios) {
			t.Fatalf("%s store-loss cells by name: got %v, want all %d", b, got, len(storeLossScenarios))
		}
	}
	for _, s := range storeLossScenarios {
		if Summary(s) == "" || !slices.Contains(Scenarios(), s) {
			t.Errorf("store-loss scenario %q is not a scenario in the table", s)
		}
	}
}

// The watch predicates must tell a sale's read from its write on the wire,
// and must not mistake GET /stock's MGET for a write.
func TestWirePredicates(t *testing.T) {
	resp := func(args ...string) []byte {
		b := []byte("*" + itoa(len(args)) + "\r\n")
		for _, a := range args {
			b = append(b, "$"+itoa(len(a))+"\r\n"+a+"\r\n"...)
		}
		return b
	}
	cases := []struct {
		name        string
		b           []byte
		read, write bool
	}{
		{"get", resp("get", "stock"), true, false},
		{"fenced read", resp("evalsha", "abc", "2", "stock", "stock:fence", "redis", "7"), true, false},
		{"fenced write", resp("evalsha", "def", "4", "stock", "lucky", "stock:fence", "stock:fence:receipt:x-1", "redis/k", "7", "x-1", "9", "600000"), false, true},
		{"multi write", append(resp("multi"), append(resp("set", "stock", "9"), resp("incr", "lucky")...)...), false, true},
		{"status", resp("mget", "stock", "lucky"), false, false},
		{"ping", resp("ping"), false, false},
	}
	for _, tc := range cases {
		if got := isRead(tc.b); got != tc.read {
			t.Errorf("%s: isRead = %v, want %v", tc.name, got, tc.read)
		}
		if got := isWrite(tc.b); got != tc.write {
			t.Errorf("%s: isWrite = %v, want %v", tc.name, got, tc.write)
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// make lab-full's matrix: the default cells and every byName cell, once
// each, never an experimental one.
func TestFullMatrixAddsTheCellsByName(t *testing.T) {
	full, seen := FullMatrix(), map[string]bool{}
	for _, c := range full {
		if seen[c.String()] {
			t.Fatalf("%s twice", c)
		}
		seen[c.String()] = true
		if slices.Contains(experimental[c.Scenario], c.Backend) {
			t.Errorf("%s is experimental", c)
		}
	}
	for _, c := range Matrix(nil, nil) {
		if !seen[c.String()] {
			t.Errorf("%s of the default matrix missing", c)
		}
	}
	for b, list := range byName {
		for _, s := range list {
			c := Cell{Backend: b, Scenario: s, Fencing: true}
			if IsFailover(s) {
				c.Acks = 1 // the cell that must pass
			}
			if Inapplicable(b, s) == "" && !seen[c.String()] {
				t.Errorf("%s/%s by name missing", b, s)
			}
		}
	}
	if len(full) <= len(Matrix(nil, nil)) {
		t.Fatalf("full matrix has %d cells, the default %d", len(full), len(Matrix(nil, nil)))
	}
	t.Logf("full matrix: %d cells, default %d", len(full), len(Matrix(nil, nil)))
}

// A scenario is named once, in the table; every list of scenarios (the
// groups, byName, the experimental and the inapplicable cells) names
// scenarios of the table, and each has a summary.
func TestScenarioNamesAreTheTables(t *testing.T) {
	known := map[string]bool{}
	for _, s := range table {
		if known[s.name] {
			t.Errorf("scenario %q twice in the table", s.name)
		}
		known[s.name] = true
		if s.summary == "" || s.run == nil {
			t.Errorf("scenario %q: no summary or no run", s.name)
		}
	}
	lists := map[string][]string{
		"buyerScenarios": buyerScenarios, "clockScenarios": clockScenarios, "clusterScenarios": clusterScenarios,
		"failoverScenarios": failoverScenarios, "itemScenarios": itemScenarios, "saleScenarios": saleScenarios,
		"storeLossScenarios": storeLossScenarios, "witnessScenarios": witnessScenarios, "byNameStore": byNameStore,
	}
	for b, l := range byName {
		lists["byName "+b] = l
		if !slices.Contains(Correct, b) {
			t.Errorf("byName names backend %q, not one of %v", b, Correct)
		}
	}
	for s := range experimental {
		lists["experimental"] = append(lists["experimental"], s)
	}
	for b, m := range inapplicable {
		for s := range m {
			lists["inapplicable "+b] = append(lists["inapplicable "+b], s)
		}
	}
	for name, l := range lists {
		for _, s := range l {
			if !known[s] {
				t.Errorf("%s names %q, which is not in the scenario table", name, s)
			}
		}
	}
}

// The matrix sold with combining: every articles' cell takes the sale, a
// cell with a sale of its own keeps it, none is there twice.
func TestSoldWith(t *testing.T) {
	cells := Matrix(nil, nil)
	got, err := SoldWith(cells, "combine")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range got {
		if c.Sale == "" {
			t.Errorf("%s: still the articles' sale", c)
		}
		if seen[c.String()] {
			t.Errorf("%s: twice", c)
		}
		seen[c.String()] = true
	}
	for _, c := range cells {
		want := c
		if want.Sale == "" {
			want.Sale = "combine"
		}
		if !seen[want.String()] {
			t.Errorf("%s: not sold with combining (%s missing)", c, want)
		}
	}
	if _, err := SoldWith(cells, "optimistic"); err == nil {
		t.Error("an unknown sale: no error")
	}
}
