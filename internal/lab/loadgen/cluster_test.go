package loadgen_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// A buyer-aware sale against real replicas (redis lock, the ledger, limit
// 1, durable orders in MariaDB): every check of the verdict passes, with
// cut, answered and racing re-sends all in the mix, and MySQL ends with
// one row per unit sold.
func TestBuyersOnLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster with MariaDB")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := startRedisCluster(ctx, t, "redis-server nginx-light mariadb-server", map[string]string{
		"work.delay":           "1ms",
		"lock.wait_timeout":    "60s",
		"stock.ledger":         "true",
		"stock.per_user_limit": "1",
		"orders.durable":       "true",
	})
	if c.MariaDB() == nil {
		t.Fatal("orders.durable did not start MariaDB")
	}

	r, err := loadgen.Run(ctx, loadgen.Config{
		URL: c.URL(), AdminToken: c.AdminToken(), Minter: c.Minter(), Requests: 200, Concurrency: 20, Stock: 100,
		Users: 150, RetryRate: 0.3, RetryTimeout: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, c.Logs(20))
	}
	var text strings.Builder
	_ = r.WriteText(&text)
	b := r.Buyers
	if !r.OK() || b == nil {
		t.Fatalf("verdict %q, want consistent:\n%s\n%s", r.Verdict(), text.String(), c.Logs(20))
	}
	durable := int64(-1)
	if b.Ledger.Durable != nil {
		durable = *b.Ledger.Durable
	}
	if b.Orders != 100 || b.Ledger.Orders != 100 || b.Ledger.Buyers != 100 || durable != 100 || b.Duplicates != 0 {
		t.Fatalf("got %d orders answered, ledger %d by %d buyers, MySQL %d, %d duplicates; want 100, 100, 100, 100, 0:\n%s",
			b.Orders, b.Ledger.Orders, b.Ledger.Buyers, durable, b.Duplicates, text.String())
	}
	if b.Resent["timeout"] == 0 || b.Resent["after"] == 0 || b.Resent["race"] == 0 || b.Replayed == 0 {
		t.Fatalf("got resent %v and %d replays, want all three kinds and some replays:\n%s", b.Resent, b.Replayed, text.String())
	}
	t.Logf("\n%s", text.String())
}

// An open-loop sale against real replicas (redis lock, nginx): 200 buyers
// a second for 2 s, 100 units. The books are exact and every buyer is
// answered.
func TestOpenLoopOnLocalCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Config{Replicas: 2, Backend: "redis", Stockd: os.Getenv("SECKILL_STOCKD")})
	if errors.Is(err, servers.ErrNotInstalled) {
		servertest.SkipOrFail(t, err, "redis-server nginx-light")
	}
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })

	r, err := loadgen.Run(ctx, loadgen.Config{URL: c.URL(), AdminToken: c.AdminToken(), Stock: 100, Rate: 200, Duration: 2 * time.Second, Late: 30 * time.Second})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, c.Logs(20))
	}
	var text strings.Builder
	_ = r.WriteText(&text)
	o := r.Open
	if !r.OK() || r.Sold != 100 || r.Lucky != 100 || r.Stock != 0 || r.Oversold != 0 {
		t.Fatalf("verdict %q, sold %d, lucky %d, stock %d; want consistent, 100, 100, 0:\n%s\n%s", r.Verdict(), r.Sold, r.Lucky, r.Stock, text.String(), c.Logs(20))
	}
	if o.Sent != 400 || o.Answered != 400 || o.Unanswered != 0 || r.Sold+r.SoldOut+r.Busy != 400 {
		t.Fatalf("sent %d, answered %d, unanswered %d; want 400, 400, 0, each one sold, sold out or busy:\n%s", o.Sent, o.Answered, o.Unanswered, text.String())
	}
	t.Logf("\n%s", text.String())
}

// An item's sale against real replicas (redis lock, nginx): a closed loop
// sells it out exactly, then, reset with a window that opens 300 ms after
// the buyers start and lasts 600 ms by Redis's clock, an open loop finds
// it not started, open, then ended, every answer where the window puts
// it; three items sold at once each sell out exactly; the default sale is
// untouched by any of them.
func TestItemOnLocalCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Config{Replicas: 2, Backend: "redis", Stockd: os.Getenv("SECKILL_STOCKD"),
		Env: map[string]string{"work.delay": "1ms"}})
	if errors.Is(err, servers.ErrNotInstalled) {
		servertest.SkipOrFail(t, err, "redis-server nginx-light")
	}
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	client := loadgen.NewClient(2, 5*time.Second)
	if err := loadgen.Reset(ctx, client, c.URL(), c.AdminToken(), 7); err != nil {
		t.Fatal(err)
	}

	r, err := loadgen.Run(ctx, loadgen.Config{URL: c.URL(), AdminToken: c.AdminToken(), Item: "lg-1", Requests: 150, Concurrency: 15, Stock: 100})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, c.Logs(20))
	}
	var text strings.Builder
	_ = r.WriteText(&text)
	if !r.OK() || r.Item != "lg-1" || r.Sold != 100 || r.SoldOut != 50 || r.Lucky != 100 || r.Stock != 0 || r.Errors != 0 {
		t.Fatalf("verdict %q, sold %d, sold out %d, lucky %d, stock %d; want consistent, 100, 50, 100, 0:\n%s\n%s",
			r.Verdict(), r.Sold, r.SoldOut, r.Lucky, r.Stock, text.String(), c.Logs(20))
	}
	t.Logf("\n%s", text.String())

	now := time.Now()
	r, err = loadgen.Run(ctx, loadgen.Config{URL: c.URL(), AdminToken: c.AdminToken(), Item: "lg-1", Stock: 1000,
		Rate: 200, Duration: 1200 * time.Millisecond, StartsAt: now.Add(300 * time.Millisecond), EndsAt: now.Add(900 * time.Millisecond)})
	if err != nil {
		t.Fatalf("window run: %v\n%s", err, c.Logs(20))
	}
	text.Reset()
	_ = r.WriteText(&text)
	if w := r.Window; !r.OK() || w == nil || r.Sold == 0 || r.NotStarted == 0 || r.Ended == 0 || r.Errors != 0 ||
		r.Sold+r.NotStarted+r.Ended != 240 || r.Stock+r.Lucky != 1000 {
		t.Fatalf("window run: verdict %q, sold %d, not started %d, ended %d, errors %d:\n%s\n%s",
			r.Verdict(), r.Sold, r.NotStarted, r.Ended, r.Errors, text.String(), c.Logs(20))
	}
	t.Logf("\n%s", text.String())

	// Three items at once, each on its own lock: each sells out exactly.
	s, err := loadgen.RunItems(ctx, loadgen.Config{URL: c.URL(), AdminToken: c.AdminToken(), Item: "lg-spread",
		Requests: 240, Concurrency: 12, Stock: 50}, loadgen.ItemIDs("lg-spread", 3))
	if err != nil {
		t.Fatalf("items run: %v\n%s", err, c.Logs(20))
	}
	text.Reset()
	_ = s.WriteText(&text)
	if !s.OK(3) || s.Sold != 150 || s.Oversold != 0 {
		t.Fatalf("items run: sold %d, oversold %d; want 150 and 0, every item consistent:\n%s\n%s", s.Sold, s.Oversold, text.String(), c.Logs(20))
	}
	for _, r := range s.Items {
		if r.Sold != 50 || r.Lucky != 50 || r.Stock != 0 || r.Errors != 0 {
			t.Fatalf("item %s: sold %d, lucky %d, stock %d, errors %d; want 50, 50, 0, 0:\n%s", r.Item, r.Sold, r.Lucky, r.Stock, r.Errors, text.String())
		}
	}
	t.Logf("\n%s", text.String())

	if s, err := loadgen.GetStock(ctx, client, c.URL()); err != nil || s.Stock != 7 || s.Lucky != 0 {
		t.Fatalf("the default sale: got %+v (%v), want stock 7, lucky 0: untouched", s, err)
	}
}

// startRedisCluster starts 2 replicas on the redis lock behind nginx, env
// over the defaults, closed with the test; a server not installed skips
// it (fails it in CI), need naming the packages.
func startRedisCluster(ctx context.Context, t *testing.T, need string, env map[string]string) *localcluster.Cluster {
	t.Helper()
	c, err := localcluster.Start(ctx, localcluster.Config{
		Replicas: 2, Backend: "redis", Stockd: os.Getenv("SECKILL_STOCKD"), Env: env,
	})
	if errors.Is(err, servers.ErrNotInstalled) {
		servertest.SkipOrFail(t, err, need)
	}
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
