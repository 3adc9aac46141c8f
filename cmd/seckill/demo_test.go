package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"seckill/internal/api"
	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/stockd"
)

func TestJudge(t *testing.T) {
	oversold := &loadgen.Report{Oversold: 10}
	consistent := &loadgen.Report{Consistent: true}
	refused := fmt.Errorf("%w: stockd-1\nconfig: lock.backend: unknown backend \"etcd\"", localcluster.ErrReplicaExited)
	crashed := fmt.Errorf("%w: stockd-1\npanic: boom", localcluster.ErrReplicaExited)
	for _, tc := range []struct {
		name     string
		backend  string
		replicas int
		report   *loadgen.Report
		err      error
		verdict  string
		wantFail bool
	}{
		{"none oversells as expected", "none", 3, oversold, nil, "OVERSOLD (expected: no lock)", false},
		{"local oversells across replicas", "local", 3, oversold, nil, "OVERSOLD (expected: per-process lock)", false},
		{"local is correct in one replica", "local", 1, oversold, nil, "OVERSOLD", true},
		{"redis consistent", "redis", 3, consistent, nil, "consistent", false},
		{"redis oversold fails", "redis", 3, oversold, nil, "OVERSOLD", true},
		{"redis false sold-out fails", "redis", 3, &loadgen.Report{Consistent: true, FalseSoldOut: 2}, nil, "FALSE SOLD-OUT", true},
		{"mysql consistent", "mysql", 3, consistent, nil, "consistent", false},
		{"mysql-row oversold fails", "mysql-row", 3, oversold, nil, "OVERSOLD", true},
		// No "not built yet" row: every backend is built, so one stockd
		// refuses is a failure the demo must show.
		{"backend refused by stockd", "etcd", 3, nil, refused, "ERROR: ", true},
		{"crashing replica is an error", "redis", 3, nil, crashed, "ERROR: ", true},
		{"other error", "redis", 3, nil, errors.New("nginx: not installed"), "ERROR: nginx", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := demoRow{Report: tc.report, Backend: tc.backend, ExpectedSafe: !unsafeBackend(tc.backend, tc.replicas)}
			row.judge(tc.err)
			if !strings.HasPrefix(row.Verdict, tc.verdict) || row.failed != tc.wantFail {
				t.Fatalf("got verdict %q failed %v, want %q… failed %v", row.Verdict, row.failed, tc.verdict, tc.wantFail)
			}
		})
	}
}

// The demo shows every backend stockd wires for the sale, the database
// MySQL locks included, each expected to be safe across replicas.
func TestDemoBackends(t *testing.T) {
	for _, b := range []string{"none", "local", "redis", "redisson", "etcd", "zookeeper", "mysql", "mysql-row"} {
		if !slices.Contains(Backends, b) {
			t.Errorf("Backends %v lacks %s", Backends, b)
		}
	}
	for _, b := range []string{"mysql", "mysql-row"} {
		if unsafeBackend(b, 3) {
			t.Errorf("%s judged unsafe across replicas", b)
		}
	}
}

// The buyers row fails the demo on a failed buyers' check, and its table
// shows what the ledger and MySQL hold.
func TestBuyersRow(t *testing.T) {
	env := stockd.Overrides(buyersEnv(1))
	if env["STOCKD_STOCK_LEDGER"] != "true" || env["STOCKD_STOCK_PER_USER_LIMIT"] != "1" || env["STOCKD_ORDERS_DURABLE"] != "true" {
		t.Fatalf("buyersEnv(1) = %v, want the ledger, limit 1 and durable orders", env)
	}
	rows := 300
	bad := demoRow{Backend: "redis", WithBuyers: true, ExpectedSafe: true, Report: &loadgen.Report{Consistent: true,
		Buyers: &loadgen.Buyers{Users: 500, PerUserLimit: 1, Checks: []loadgen.Check{
			{Name: "orders == lucky == ledger", OK: true}, {Name: "one order per idempotency key", OK: false}}}}}
	bad.judge(nil)
	if !bad.failed || bad.Verdict != "BUYERS: one order per idempotency key" {
		t.Fatalf("got verdict %q failed %v, want the failed check", bad.Verdict, bad.failed)
	}
	good := demoRow{Backend: "redis", WithBuyers: true, ExpectedSafe: true, Report: &loadgen.Report{Consistent: true,
		Buyers: &loadgen.Buyers{Users: 500, PerUserLimit: 1, Resent: map[string]int{"timeout": 34, "after": 33, "race": 33},
			Ledger: api.Ledger{Orders: 300, Buyers: 300, Durable: ptr(int64(rows))}, Checks: []loadgen.Check{{Name: "all", OK: true}}}}}
	good.judge(nil)
	var b strings.Builder
	writeBuyersTable(&b, []demoRow{good})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := "ledger + durable 500 1 100 0 0 0 0 300 300 0 0 300 0 0.0ms consistent"
	if good.failed || len(lines) != 2 || strings.Join(strings.Fields(lines[1]), " ") != want {
		t.Fatalf("got failed %v and table:\n%s\nwant the row %q", good.failed, b.String(), want)
	}
}

func ptr[T any](v T) *T { return &v }

// The items table: one row per item with its own books, and an item that
// could not be sold is an error row that fails the demo.
func TestItemsTable(t *testing.T) {
	good := demoRow{Backend: "redis", Item: "demo-1", ExpectedSafe: true, Report: &loadgen.Report{Item: "demo-1", Consistent: true,
		Sold: 100, SoldOut: 50, Lucky: 100, Initial: 100}}
	good.judge(nil)
	bad := demoRow{Backend: "redis", Item: "demo-2", ExpectedSafe: true}
	bad.judge(errors.New("loadgen: bad response: POST /items: 501 items are not sold by this configuration"))
	var b strings.Builder
	writeItemsTable(&b, []demoRow{good, bad})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if good.failed || !bad.failed || len(lines) != 3 ||
		strings.Join(strings.Fields(lines[0]), " ") != "redis, item sold sold out stock lucky oversold verdict" ||
		strings.Join(strings.Fields(lines[1]), " ") != "demo-1 100 50 0 100 0 consistent" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "demo-2 - - - - - ERROR: loadgen: bad response") {
		t.Fatalf("got failed %v/%v and table:\n%s", good.failed, bad.failed, b.String())
	}
}

// The reservations row: its table line, and a verdict that fails the
// demo when a unit was paid twice, the books are off, or it never ran.
func TestReservationsRow(t *testing.T) {
	good := &reservationsRow{OK: true, Report: &loadgen.ReserveReport{Stock: 300, Buyers: 600, Paid: 300, NeverPay: 150,
		Returned: 150, Lucky: 450, Lost: 150, Consistent: true, DurationMS: 12300,
		Census: &api.Census{Paid: 300, Expired: 150, OK: true}, Lifecycles: loadgen.Lifecycles{Orders: 450}}}
	var b strings.Builder
	writeReservationsTable(&b, good)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := "| 300 | 600 | 300 | 150 | 150 | 0 | 150 | 0 | exact | exact: 300 paid, 150 expired | 450 checked | 12.3 s | OK |"
	if len(lines) != 4 || lines[3] != want {
		t.Fatalf("got table:\n%s\nwant the row %q", b.String(), want)
	}
	off := &reservationsRow{Report: &loadgen.ReserveReport{Stock: 300, Paid: 300, Lucky: 300,
		Census: &api.Census{Problems: []string{"cancelled 0 + expired 0 = 0 orders ended unpaid, 1 units returned"}}}}
	b.Reset()
	writeReservationsTable(&b, off)
	if !strings.Contains(b.String(), "| off: cancelled 0 + expired 0 = 0 orders ended unpaid, 1 units returned |") || !strings.Contains(b.String(), "INCONSISTENT") {
		t.Fatalf("a census off: got\n%s\nwant its problem named, INCONSISTENT", b.String())
	}
	twice := &reservationsRow{Report: &loadgen.ReserveReport{Stock: 300, Paid: 300, PaidTwice: 1, Lucky: 300}}
	b.Reset()
	writeReservationsTable(&b, twice)
	if !strings.Contains(b.String(), "| 1 | exact |") || !strings.Contains(b.String(), "INCONSISTENT") {
		t.Fatalf("a unit paid twice: got\n%s\nwant 1 paid twice, INCONSISTENT", b.String())
	}
	broken := &reservationsRow{Report: &loadgen.ReserveReport{Stock: 300, Paid: 300, Lucky: 300,
		Lifecycles: loadgen.Lifecycles{Orders: 300, Broken: 1, First: "order o: its payment was answered paid, but it is \"expired\" at the end"}}}
	b.Reset()
	writeReservationsTable(&b, broken)
	if !strings.Contains(b.String(), "| 1 of 300 broken: order o: its payment was answered paid") || !strings.Contains(b.String(), "INCONSISTENT") {
		t.Fatalf("a lifecycle broken: got\n%s\nwant it named, INCONSISTENT", b.String())
	}
	b.Reset()
	writeReservationsTable(&b, &reservationsRow{Err: "switch replicas: refused"})
	if !strings.Contains(b.String(), "error: switch replicas: refused") {
		t.Fatalf("no run: got\n%s\nwant the error", b.String())
	}
}
