package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/stock"
	"seckill/internal/stockd"
)

// SoakFaults are the lab's scenarios a soak draws its faults from, in
// turn: the ones that run on every correct backend under one stockd
// configuration (SoakEnv) and need no cell of their own (no named buyers,
// no Sentinel set, no election). stockdown is left out: its check wants
// a fast 503 from the cut stock Redis, which the long Redis timeout pause
// and latency need does not give (the first soak failed it on that alone).
var SoakFaults = []string{"kill", "pause", "lockrestart", "latency", "netsplit"}

// SoakConfig is one backend's soak.
type SoakConfig struct {
	Backend     string
	Duration    time.Duration // the whole soak
	Every       time.Duration // one fault window (a fault per window)
	RPS         int           // the load's bound, requests per second
	Concurrency int           // buyers in flight at most
	Faults      []string      // drawn in turn; nil: SoakFaults
	// OnStart, when set, is called once the replicas run the backend,
	// before the first window; OnWindow after each window is judged.
	OnStart  func()
	OnWindow func(SoakWindow)
}

// SoakWindow is one fault window's books: a lab Result for the window's
// stock (reset at its start, so a window can never run out of the stock a
// previous one left), judged as the lab judges a cell.
type SoakWindow struct {
	Start  time.Time
	Result Result
	// Lost is acknowledged sales the stock does not hold: 200 sold answers
	// (and unconfirmed ones whose receipt says sold) beyond lucky.
	Lost int64
}

// SoakLatency is one answer's latency, for p99 over time.
type SoakLatency struct {
	At  time.Time
	Dur time.Duration
}

// SoakEnv is the one stockd configuration every soak fault runs under: the
// lab's base settings, a 50ms business time (so a fault lands mid sale),
// and read timeouts long enough that a paused or delayed holder reads its
// write's own answer (pause, latency).
func SoakEnv(backend string) map[string]string {
	return stockd.Overrides(baseEnv(Cell{Backend: backend, Fencing: true}), func(c *stockd.Config) {
		c.Work.Delay = stock.FixedDelay(50 * time.Millisecond)
		c.Redis.Timeout, c.Stock.ConfirmTimeout = 30*time.Second, 30*time.Second
		c.Log.Level = "warn"
	})
}

// Soak switches c to cfg.Backend once (the replicas then live through the
// whole soak, but for the ones a kill restarts) and runs fault windows
// back to back until cfg.Duration is spent. Each window resets the stock
// to what the window can sell at cfg.RPS, runs a paced load, stages one
// fault from cfg.Faults with the lab's own scenario code, and judges the
// window's books as a lab cell. The error is non-nil only when the soak
// could not run.
func Soak(ctx context.Context, c *localcluster.Cluster, cfg SoakConfig) ([]SoakWindow, []SoakLatency, error) {
	faults := cfg.Faults
	if len(faults) == 0 {
		faults = SoakFaults
	}
	for _, f := range faults {
		sc, ok := scenarios[f]
		if !ok || sc.buyers || sc.failover || sc.noWarmup {
			return nil, nil, fmt.Errorf("%w: %q cannot be a soak fault (want some of %s)", ErrUnknown, f, strings.Join(SoakFaults, ", "))
		}
		if why := Inapplicable(cfg.Backend, f); why != "" {
			return nil, nil, fmt.Errorf("lab: soak %s/%s: %s", cfg.Backend, f, why)
		}
	}
	if cfg.RPS <= 0 || cfg.Concurrency <= 0 || cfg.Every <= 0 {
		return nil, nil, errors.New("lab: soak needs positive rps, concurrency and window")
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err := c.SetBackend(sctx, cfg.Backend, SoakEnv(cfg.Backend))
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("lab: soak %s: switch backend: %w", cfg.Backend, err)
	}
	if err := flushLockRedis(ctx, c); err != nil {
		return nil, nil, err
	}
	if cfg.OnStart != nil {
		cfg.OnStart()
	}
	client := loadgen.NewClient(4, 10*time.Second)
	defer client.CloseIdleConnections()

	// Twice what the window can sell at the bound: it never sells out, so
	// every window's recovery is seen.
	stock := 2 * cfg.RPS * int(cfg.Every/time.Second)
	var windows []SoakWindow
	var lat []SoakLatency
	end := time.Now().Add(cfg.Duration)
	for i := 0; time.Now().Before(end); i++ {
		if ctx.Err() != nil {
			return windows, lat, ctx.Err()
		}
		w, resps, err := soakWindow(ctx, c, client, cfg, faults[i%len(faults)], stock)
		for _, r := range resps {
			if r.Status != 0 {
				lat = append(lat, SoakLatency{At: r.At, Dur: r.At.Sub(r.Sent)})
			}
		}
		if err != nil {
			return windows, lat, err
		}
		windows = append(windows, w)
		if cfg.OnWindow != nil {
			cfg.OnWindow(w)
		}
	}
	return windows, lat, nil
}

// soakWindow is one window: reset, paced load, fault, books, verdict.
func soakWindow(ctx context.Context, c *localcluster.Cluster, client *http.Client, cfg SoakConfig, fault string, stock int) (SoakWindow, []response, error) {
	sc := scenarios[fault]
	cell := Cell{Backend: cfg.Backend, Scenario: fault, Fencing: true}
	start := time.Now()
	res := Result{Backend: cfg.Backend, Scenario: fault, Fencing: true, Expect: ExpectSafe, Initial: stock, RecoveryMS: -1}
	w := SoakWindow{Start: start}
	if err := loadgen.Reset(ctx, client, c.URL(), c.AdminToken(), stock); err != nil {
		return w, nil, fmt.Errorf("lab: soak %s: reset: %w", cell, err)
	}
	wctx, cancelWindow := context.WithTimeout(ctx, CellDeadline) // the window's must-happen waits (waits.go)
	defer cancelWindow()
	x := &run{ctx: wctx, c: c, cell: cell, lease: lease(cfg.Backend), res: &res}
	x.load = startPaced(c.URL()+"/stock/reduce", cfg.Concurrency, cfg.RPS, 60*time.Second)
	stopped := false
	defer func() {
		if !stopped {
			x.load.stop()
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	_, err := x.load.waitFor(wctx, start, response.sold)
	cancel()
	if err != nil {
		return w, nil, fmt.Errorf("lab: soak %s: no sale before the fault (%w)\n%s", cell, err, c.Logs(10))
	}
	if err := sc.run(x); err != nil {
		return w, nil, fmt.Errorf("lab: soak %s: %w\n%s", cell, err, c.Logs(10))
	}
	if !x.faultEnd.IsZero() && x.recovered.IsZero() {
		rctx, cancel := context.WithTimeout(ctx, RecoveryBound)
		r, err := x.load.waitFor(rctx, x.faultEnd, response.sold)
		cancel()
		if err == nil {
			x.recovered = r.At
		}
	}
	if !x.recovered.IsZero() {
		res.RecoveryMS = max(0, x.recovered.Sub(x.faultEnd).Milliseconds())
	}
	// Steady load for the rest of the window: the fault is one event in it.
	t := time.NewTimer(time.Until(start.Add(cfg.Every)))
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	resps := x.load.stop()
	stopped = true
	if err := x.books(client, resps); err != nil {
		return w, resps, fmt.Errorf("lab: soak %s: %w", cell, err)
	}
	x.checkHistory(resps, time.Now()) // the window's answers, from its reset
	if sc.check != nil {
		sc.check(x)
	}
	x.judge()
	res.DurationMS = time.Since(start).Milliseconds()
	res.Note, res.Slow = strings.Join(x.notes, "; "), x.slow
	w.Result = res
	w.Lost = max(0, int64(res.Sold+res.UnconfirmedSold)-res.Lucky)
	return w, resps, nil
}

// startPaced is startLoad's steady twin: at most c requests in flight and
// at most rps sent per second, anonymous, never stopping at sold out (a
// soak's load is steady, not a race to the last unit). A tick with no idle
// buyer is dropped, not queued, so a slow spell does not turn into a burst.
func startPaced(url string, c, rps int, reqTimeout time.Duration) *load {
	l := &load{
		url: url, client: loadgen.NewClient(2*c, reqTimeout),
		quit: make(chan struct{}), changed: make(chan struct{}), ended: make(chan struct{}),
	}
	tokens := make(chan struct{})
	l.wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(rps))
		defer tick.Stop()
		for {
			select {
			case <-l.quit:
				return
			case <-tick.C:
				select {
				case tokens <- struct{}{}:
				default:
				}
			}
		}
	})
	for range c {
		l.wg.Go(func() {
			for {
				select {
				case <-l.quit:
					return
				case <-tokens:
				}
				l.record(l.reduce())
			}
		})
	}
	l.endWithBuyers()
	return l
}

// P99 returns the 99th percentile of durs (0 for none); it sorts durs.
func P99(durs []time.Duration) time.Duration {
	if len(durs) == 0 {
		return 0
	}
	slices.Sort(durs)
	return durs[(len(durs)*99+99)/100-1]
}
