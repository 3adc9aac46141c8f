package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"seckill/internal/lab/dashboard"
	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// dashEnv slows the critical section enough that a locked sale of 200 units
// lasts a few seconds, so the page shows the stock falling, not only its
// end. The etcd election gives the page a leader and a term to show.
var dashEnv = map[string]string{
	"work.delay":        "8ms-12ms",
	"lock.wait_timeout": "60s",
	"election.backend":  "etcd",
}

// dashView is what a person sees on the dashboard page, read from the DOM.
type dashView struct {
	Stock      string    `json:"stock"`
	Backend    string    `json:"backend"`
	Banner     bool      `json:"banner"` // the oversold banner is displayed
	BannerText string    `json:"bannerText"`
	Conn       string    `json:"conn"`
	Leader     string    `json:"leader"`
	Term       string    `json:"term"`
	P50        string    `json:"p50"`
	Bars       []dashBar `json:"bars"`
	// Items are the items' table's rows, each its cells' text (item,
	// state, stock, sold, initial, books); none while the card is hidden.
	Items [][]string `json:"items"`
}

type dashBar struct {
	Name  string  `json:"name"`
	Width float64 `json:"width"` // percent
}

const readDash = `(() => {
  const b = document.getElementById("oversold");
  return {
    stock: document.getElementById("stock").textContent,
    backend: document.getElementById("backend").textContent,
    banner: getComputedStyle(b).display !== "none",
    bannerText: b.textContent,
    conn: document.getElementById("conn").textContent,
    leader: document.getElementById("leader").textContent,
    term: document.getElementById("term").textContent,
    p50: document.getElementById("p50").textContent,
    bars: Array.from(document.querySelectorAll("#replicas .rep")).map((r) => ({
      name: r.dataset.replica,
      width: parseFloat(r.querySelector(".bar").style.width) || 0,
    })),
    items: document.getElementById("itemscard").hidden ? [] :
      Array.from(document.querySelectorAll("#items tr.item")).map((r) => Array.from(r.cells).map((c) => c.textContent)),
  };
})()`

// chromium finds the browser; missing, it skips the test (fails it under CI).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	servertest.SkipOrFail(t, errors.New("chromium not found on PATH"), "chromium")
	return ""
}

// TestDashboardInBrowser drives headless Chromium against the dashboard of a
// real two-replica cluster during real sales, and checks what a person would
// see: the leader and its term; the guarded reset refusing a wrong token and
// taking the right one; with the redis lock the stock number falls to
// 0, every replica's bar moves, the lock wait shows, and no oversold banner
// ever shows; with no lock the banner shows.
// It starts its own small cluster (two replicas, an etcd election) rather
// than the package's shared one, whose backend switches it would race. It
// saves a screenshot: to $SECKILL_DASHBOARD_PNG when set (e.g.
// ../docs/dashboard.png, the README's), else to the temp directory.
func TestDashboardInBrowser(t *testing.T) {
	chrome := chromium(t)
	start := time.Now()
	// Short: the whole test takes ~10s once stockd is built; a wedged
	// browser or cluster fails it rather than hanging make test.
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()

	c, err := localcluster.Start(ctx, localcluster.Config{
		Replicas: 2, Backend: "redis", Env: dashEnv, Stockd: stockdPath(t),
	})
	if errors.Is(err, servers.ErrNotInstalled) {
		servertest.SkipOrFail(t, err, "redis-server nginx-light")
	}
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	}()
	t.Logf("cluster up in %s", time.Since(start).Round(time.Millisecond))

	rdb := redis.NewClient(&redis.Options{Addr: c.Redis().Addr()})
	defer rdb.Close()
	agg, err := dashboard.New(dashboard.Config{
		Replicas: []string{c.ReplicaURL(0), c.ReplicaURL(1)}, Redis: rdb, Interval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	aggCtx, stopAgg := context.WithCancel(ctx)
	aggDone := make(chan struct{})
	go func() {
		defer close(aggDone)
		agg.Run(aggCtx)
	}()
	defer func() { stopAgg(); <-aggDone }()
	srv := httptest.NewServer(dashboard.Handler(agg, nil))
	defer srv.Close()

	// Cancelling the allocator's context kills the browser and waits for
	// it (and the kernel kills it should this process die: Pdeathsig).
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	browser, closeBrowser := chromedp.NewContext(allocCtx)
	defer closeBrowser()
	if err := chromedp.Do(browser, chromedp.Navigate(srv.URL)); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}

	view := func() dashView {
		t.Helper()
		v, err := chromedp.Run(browser, chromedp.Evaluate[dashView](readDash))
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		return v
	}
	// waitFor: what the page must come to show; bounded by the test's
	// deadline, not by a number a busy machine outlasts.
	waitFor := func(what string, ok func(dashView) bool) dashView {
		t.Helper()
		until := testwait.Until(t)
		for {
			v := view()
			if ok(v) {
				return v
			}
			if until.Err() != nil {
				t.Fatalf("the page never showed %s; it shows %+v", what, v)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// sale runs one sale while the page is read every 100ms; it returns the
	// views seen while it ran and just after.
	sale := func(requests int) (*loadgen.Report, []dashView) {
		t.Helper()
		type result struct {
			r   *loadgen.Report
			err error
		}
		done := make(chan result, 1)
		go func() {
			r, err := loadgen.Run(ctx, loadgen.Config{
				URL: c.URL(), AdminToken: c.AdminToken(), Requests: requests, Concurrency: 25, Stock: 200,
			})
			done <- result{r, err}
		}()
		var views []dashView
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			views = append(views, view())
			select {
			case res := <-done:
				if res.err != nil {
					t.Fatalf("sale: %v", res.err)
				}
				// The page polls every 400ms: give it two rounds to
				// show the end of the sale.
				time.Sleep(900 * time.Millisecond)
				return res.r, append(views, view())
			case <-tick.C:
			}
		}
	}

	// redis: the stock falls to 0, both bars move, no banner, ever.
	waitFor("backend redis, both replicas, a leader", func(v dashView) bool {
		_, err := strconv.ParseUint(v.Term, 10, 64)
		return v.Backend == "redis" && len(v.Bars) == 2 && strings.HasPrefix(v.Leader, "stockd-") && err == nil
	})
	// The guarded reset, as an operator uses it: a wrong token is refused
	// and changes nothing; the right one, confirmed, resets the stock.
	resetTo := func(token string) string {
		t.Helper()
		if err := chromedp.Do(browser,
			// So the previous answer is not taken for this one's.
			chromedp.Evaluate[chromedp.Void](`document.getElementById("resetnote").textContent = ""`),
			chromedp.SetValue(chromedp.ID("resetstock"), "123"),
			chromedp.SetValue(chromedp.ID("token"), token),
			chromedp.Click(chromedp.ID("reset")),
			chromedp.Click(chromedp.ID("reset")), // the confirmation
		); err != nil {
			t.Fatalf("press reset: %v", err)
		}
		var note string
		waitFor("the reset's answer", func(dashView) bool {
			n, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.getElementById("resetnote").textContent`))
			note = n
			return err == nil && (strings.HasPrefix(n, "reset to") || strings.HasPrefix(n, "refused"))
		})
		return note
	}
	if note := resetTo("not-the-admin-token"); !strings.Contains(note, "refused (401)") {
		t.Fatalf("reset with a wrong token: the page says %q, want refused (401)", note)
	}
	if note := resetTo(c.AdminToken()); !strings.HasPrefix(note, "reset to 123") {
		t.Fatalf("reset: the page says %q", note)
	}
	waitFor("stock 123 after the reset", func(v dashView) bool { return v.Stock == "123" })

	r, views := sale(300)
	if r.Sold != 200 || r.Oversold != 0 {
		t.Fatalf("redis sale: sold %d oversold %d, want 200 and 0", r.Sold, r.Oversold)
	}
	intermediate, moved := 0, map[string]bool{}
	for _, v := range views {
		if n, err := strconv.Atoi(v.Stock); err == nil && n > 0 && n < 200 {
			intermediate++
		}
		for _, b := range v.Bars {
			if b.Width > 0 {
				moved[b.Name] = true
			}
		}
		if v.Banner {
			t.Fatalf("redis sale: the oversold banner showed: %q", v.BannerText)
		}
	}
	if last := views[len(views)-1]; last.Stock != "0" {
		t.Fatalf("redis sale: the page shows stock %q at the end, want 0", last.Stock)
	}
	if last := views[len(views)-1]; !strings.HasSuffix(last.P50, "ms") && !strings.HasSuffix(last.P50, " s") {
		t.Fatalf("redis sale: lock wait p50 shows %q, want a duration", last.P50)
	}
	if intermediate == 0 {
		t.Fatalf("redis sale: the page never showed the stock between 200 and 0 (%d views)", len(views))
	}
	if len(moved) != 2 {
		t.Fatalf("redis sale: bars moved for %v, want both replicas", moved)
	}
	t.Logf("redis: %d views, %d with the stock falling, bars moved for %v", len(views), intermediate, moved)

	// An item sold beside the default sale shows in the items' table.
	if v := view(); len(v.Items) != 0 {
		t.Fatalf("the items' table shows %v before any item exists", v.Items)
	}
	ir, err := loadgen.Run(ctx, loadgen.Config{URL: c.URL(), AdminToken: c.AdminToken(), Item: "dash-1", Requests: 60, Concurrency: 10, Stock: 40})
	if err != nil || !ir.OK() || ir.Sold != 40 {
		t.Fatalf("item sale: %v, sold %d (want 40, consistent)", err, ir.Sold)
	}
	waitFor("item dash-1 sold out in the items' table", func(v dashView) bool {
		return len(v.Items) == 1 && strings.Join(v.Items[0], " ") == "dash-1 sold out 0 40 40 ok"
	})

	// none: the same shop without a lock oversells, and the page says so.
	if err := c.SetBackend(ctx, "none", dashEnv); err != nil {
		t.Fatalf("switch to none: %v\n%s", err, c.Logs(20))
	}
	waitFor("backend none", func(v dashView) bool { return v.Backend == "none" })
	if v := view(); v.Banner {
		t.Fatalf("banner before the unlocked sale: %q", v.BannerText)
	}
	r, views = sale(300)
	if r.Oversold <= 0 {
		t.Fatalf("none sale: oversold %d, want an oversell (sold %d stock %d lucky %d)", r.Oversold, r.Sold, r.Stock, r.Lucky)
	}
	v := waitFor("the oversold banner", func(v dashView) bool { return v.Banner })
	want := fmt.Sprintf("OVERSOLD by %d", r.Oversold)
	if len(v.BannerText) < len(want) || v.BannerText[:len(want)] != want {
		t.Fatalf("banner %q, want it to start with %q", v.BannerText, want)
	}
	t.Logf("none: %d views; banner %q", len(views), v.BannerText)

	png, err := chromedp.Run(browser, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	out := os.Getenv("SECKILL_DASHBOARD_PNG")
	if out == "" {
		out = filepath.Join(os.TempDir(), "seckill-dashboard.png")
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatalf("save screenshot: %v", err)
	}
	t.Logf("screenshot %s (%d KB); whole test %s", out, len(png)/1024, time.Since(start).Round(time.Millisecond))
}
