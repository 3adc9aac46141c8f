package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/servers"
)

var seckillBin struct {
	once sync.Once
	path string
	err  error
}

// seckill builds cmd/seckill once (cached by source hash) and runs it,
// returning stdout, stderr and the exit status.
func seckill(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	seckillBin.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		seckillBin.path, seckillBin.err = localcluster.Build(ctx, "./cmd/seckill", "")
	})
	if seckillBin.err != nil {
		t.Fatal(seckillBin.err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, seckillBin.path, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("seckill %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// runReport is the part of `seckill run --json` the tests check.
type runReport struct {
	Backend    string         `json:"backend"`
	Sale       string         `json:"sale"`
	Requests   int            `json:"requests"`
	Sold       int            `json:"sold"`
	SoldOut    int            `json:"sold_out"`
	Stock      int64          `json:"stock"`
	Lucky      int64          `json:"lucky"`
	Initial    int            `json:"initial"`
	Oversold   int64          `json:"oversold"`
	Consistent bool           `json:"consistent"`
	P99ms      *float64       `json:"p99_ms"`
	Replicas   map[string]int `json:"replicas"`
	WithBuyers bool           `json:"with_buyers"`
	Item       string         `json:"item"`
	Verdict    string         `json:"verdict"`
	// ClusterLucky: the demo's --redis-cluster read of lucky.
	ClusterLucky *int64 `json:"cluster_lucky"`
	Buyers       *struct {
		Orders           int `json:"orders"`
		BuyersWithOrders int `json:"buyers_with_orders"`
		Duplicates       int `json:"duplicates"`
		OverLimit        int `json:"over_limit"`
		PerUserLimit     int `json:"per_user_limit"`
		Checks           []struct {
			Name string `json:"name"`
			OK   bool   `json:"ok"`
		} `json:"checks"`
		Ledger struct {
			Durable *int64 `json:"durable"`
		} `json:"ledger"`
	} `json:"buyers"`
}

func decode(t *testing.T, line string) runReport {
	t.Helper()
	var r runReport
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, line)
	}
	return r
}

func TestSeckillRunExitCodes(t *testing.T) {
	runArgs := func(c *localcluster.Cluster, extra ...string) []string {
		return append([]string{"run", "--url", c.URL(), "--admin-token", c.AdminToken(),
			"--requests", "200", "--concurrency", "20", "--stock", "100", "--json"}, extra...)
	}

	t.Run("oversold exits 3", func(t *testing.T) {
		c := onBackend(t, "none")
		out, errOut, code := seckill(t, runArgs(c)...)
		if code != 3 {
			t.Fatalf("exit %d, want 3\nstdout %s\nstderr %s", code, out, errOut)
		}
		r := decode(t, out)
		if r.Backend != "none" || r.Consistent || r.Oversold <= 0 || r.Requests != 200 || r.Initial != 100 {
			t.Fatalf("got %+v, want backend none, oversold > 0, 200 requests, initial 100", r)
		}
	})

	t.Run("consistent exits 0", func(t *testing.T) {
		c := onBackend(t, "redis")
		out, errOut, code := seckill(t, runArgs(c)...)
		if code != 0 {
			t.Fatalf("exit %d, want 0\nstdout %s\nstderr %s", code, out, errOut)
		}
		r := decode(t, out)
		if !r.Consistent || r.Sold != 100 || r.SoldOut != 100 || r.Stock != 0 || r.Lucky != 100 || r.P99ms == nil {
			t.Fatalf("got %+v, want consistent, 100 sold, 100 sold out, p99 present", r)
		}
		// The human summary ends with the verdict.
		out, _, code = seckill(t, "run", "--url", c.URL(), "--admin-token", c.AdminToken(), "--requests", "20", "--stock", "10")
		if code != 0 || !strings.Contains(out, "verdict: consistent") {
			t.Fatalf("exit %d, summary %q: want 0 and a consistent verdict", code, out)
		}
	})

	t.Run("errors exit 1", func(t *testing.T) {
		c := cluster(t)
		dead, err := servers.LoopbackAddr() // free, so nothing listens there
		if err != nil {
			t.Fatal(err)
		}
		for name, args := range map[string][]string{
			"wrong admin token": {"run", "--url", c.URL(), "--admin-token", "wrong"},
			"unreachable":       {"run", "--url", "http://" + dead, "--admin-token", "t"},
			"unknown flag":      {"run", "--bogus"},
			"bad value":         {"run", "--requests", "0"},
			"unknown command":   {"sell"},
			"no command":        {},
		} {
			t.Run(name, func(t *testing.T) {
				out, errOut, code := seckill(t, args...)
				if code != 1 || errOut == "" {
					t.Fatalf("exit %d, stderr %q, want 1 and a message (stdout %q)", code, errOut, out)
				}
			})
		}
	})
}

// `seckill demo` on its own small cluster: the unlocked row oversells, the
// locked one is consistent, each item sold at once sells out exactly, the
// exit status is 0, one JSON line per row.
func TestSeckillDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second cluster")
	}
	cluster(t) // skips the same way when stockd or a server is missing
	stockd := stockdPath(t)
	if stockd == "" {
		var err error
		if stockd, err = localcluster.BuildStockd(t.Context(), ""); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := seckill(t, "demo", "--stockd", stockd, "--backends", "none,redis",
		"--replicas", "2", "--requests", "200", "--concurrency", "20", "--stock", "100",
		"--delay", "2ms-6ms", "--json", "--dashboard", "127.0.0.1:0", "--reservations", "0")
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout %s\nstderr %s", code, out, errOut)
	}
	// The dashboard of the demo's cluster was served while it ran; its URL
	// goes to stderr so that stdout stays the table or the JSON lines.
	if !regexp.MustCompile(`dashboard: http://127\.0\.0\.1:\d+/`).MatchString(errOut) {
		t.Fatalf("no dashboard URL on stderr:\n%s", errOut)
	}
	// The backends' rows, each of the 3 items sold while the replicas run
	// redis (the items table), then redis again with each way past the
	// one-lock bound (the sales table), then the buyers' row.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 8 {
		t.Fatalf("got %d lines, want 8:\n%s", len(lines), out)
	}
	none, redis := decode(t, lines[0]), decode(t, lines[1])
	if none.Backend != "none" || none.Oversold <= 0 || !strings.HasPrefix(none.Verdict, "OVERSOLD") {
		t.Fatalf("none row: got %+v, want an oversell", none)
	}
	if redis.Backend != "redis" || redis.Sale != "" || !redis.Consistent || redis.Verdict != "consistent" || len(redis.Replicas) != 2 {
		t.Fatalf("redis row: got %+v, want consistent over 2 replicas", redis)
	}
	// Each item: its own sale of 100 (the demo's --item-stock) to 150
	// requests, every unit sold once, the rest told sold_out.
	for i := range 3 {
		r := decode(t, lines[2+i])
		if want := fmt.Sprintf("demo-%d", i+1); r.Item != want || r.Backend != "redis" || r.Verdict != "consistent" || !r.Consistent ||
			r.Initial != 100 || r.Sold != 100 || r.SoldOut != 50 || r.Lucky != 100 || r.Stock != 0 || r.Oversold != 0 {
			t.Fatalf("item row %d: got %+v, want %s: 100 sold, 50 sold out, lucky 100, stock 0, consistent", i, r, want)
		}
	}
	for i, sale := range []string{"combine", "segments8"} {
		r := decode(t, lines[5+i])
		if r.Backend != "redis" || r.Sale != sale || !r.Consistent || r.Verdict != "consistent" || r.Lucky != 100 {
			t.Fatalf("redis/%s row: got %+v, want 100 sold, consistent", sale, r)
		}
	}
	// Named buyers, limit 1, some purchases re-sent with their key: one
	// order per unit and per buyer, none twice, all of them in MySQL.
	b := decode(t, lines[7])
	if !b.WithBuyers || b.Buyers == nil || b.Verdict != "consistent" || b.Lucky != 100 {
		t.Fatalf("buyers row: got %+v, want 100 sold to named buyers, consistent", b)
	}
	bb := b.Buyers
	if bb.Orders != 100 || bb.BuyersWithOrders != 100 || bb.Duplicates != 0 || bb.OverLimit != 0 ||
		bb.PerUserLimit != 1 || bb.Ledger.Durable == nil || *bb.Ledger.Durable != 100 || len(bb.Checks) == 0 {
		t.Fatalf("buyers row: got %+v, want 100 orders of 100 buyers (limit 1), none duplicated, 100 in MySQL", *bb)
	}
	for _, c := range bb.Checks {
		if !c.OK {
			t.Errorf("buyers row: check %q failed", c.Name)
		}
	}
}

// `seckill demo --redis-cluster`: the redis rows on a local Redis Cluster
// (3 masters, 3 replicas), the plain sale, an item, 8 segments and named
// buyers with durable orders, each consistent, and each row's lucky read
// from the cluster itself equal to the row's.
func TestSeckillDemoOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second cluster")
	}
	cluster(t) // skips the same way when stockd or a server is missing
	stockd := stockdPath(t)
	if stockd == "" {
		var err error
		if stockd, err = localcluster.BuildStockd(t.Context(), ""); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := seckill(t, "demo", "--stockd", stockd, "--redis-cluster", "--backends", "redis",
		"--replicas", "2", "--requests", "200", "--concurrency", "20", "--stock", "100",
		"--delay", "2ms-6ms", "--items", "1", "--sales", "segments8", "--buyers", "150", "--reservations", "300", "--json")
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout %s\nstderr %s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("got %d lines, want 5 (redis, its item, segments8, buyers, reservations):\n%s", len(lines), out)
	}
	// The reservations row, on the cluster too: every unit paid once,
	// each unpaid one returned once and resold (docs/reservations.md).
	var reserved struct {
		Report *loadgen.ReserveReport `json:"report"`
		OK     bool                   `json:"ok"`
	}
	if err := json.Unmarshal([]byte(lines[4]), &reserved); err != nil || !reserved.OK || reserved.Report == nil {
		t.Fatalf("reservations row: %s (%v); want ok", lines[4], err)
	}
	if r := reserved.Report; r.Paid != 100 || r.PaidTwice != 0 || r.Left != 0 || r.Returned != int64(r.NeverPay+r.Refunds) {
		t.Errorf("reservations row: %+v; want 100 paid once each, every unpaid unit returned once", r)
	}
	for i, line := range lines[:4] {
		r := decode(t, line)
		if r.Verdict != "consistent" || !r.Consistent || r.Lucky != 100 || r.Oversold != 0 {
			t.Errorf("row %d: got %+v, want 100 sold, consistent", i, r)
		}
		if r.Item != "" {
			continue // its own keys; the default sale's lucky is the row before
		}
		if r.ClusterLucky == nil || *r.ClusterLucky != r.Lucky {
			t.Errorf("row %d (%s %s): cluster lucky %v, want the row's %d read from the cluster", i, r.Backend, r.Sale, r.ClusterLucky, r.Lucky)
		}
	}
}
