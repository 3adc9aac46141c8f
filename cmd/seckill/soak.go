package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"seckill/internal/lab"
	"seckill/internal/lab/localcluster"
	"seckill/internal/lock/backend"
	"seckill/internal/metrics"
)

// soakBackends are the correct backends a soak runs by default (mysql-row
// shares mysql's sessions and server; the lab covers it).
var soakBackends = []string{backend.Redis, backend.Redisson, backend.Etcd, backend.ZooKeeper, backend.MySQL}

// soakCmd runs a bounded soak per backend on one local cluster with the
// lab's fault layer: a paced load for --duration, one fault from the lab's
// set per --every window, each window's books judged as a lab cell, and
// every replica's goroutines, RSS and heap sampled from /metrics. Exit 0
// when every window was safe (0 oversold, 0 lost, books consistent,
// recovered) and every replica stayed flat; 3 otherwise; 1 when the
// cluster could not run.
func soakCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	backends := fs.String("backends", strings.Join(soakBackends, ","), "comma-separated backends")
	duration := fs.Duration("duration", 10*time.Minute, "soak length per backend")
	every := fs.Duration("every", 30*time.Second, "one fault per window of this length")
	rps := fs.Int("rps", 10, "load bound, requests per second (a sale takes 50ms under one lock)")
	conc := fs.Int("concurrency", 6, "requests in flight at most")
	faults := fs.String("faults", strings.Join(lab.SoakFaults, ","), "the lab scenarios drawn in turn")
	sample := fs.Duration("sample", 5*time.Second, "how often each replica's /metrics is read")
	tol := fs.Float64("tolerance", 0.5, "flat: last-minute median <= first-minute median x (1+tolerance), goroutines +10")
	asJSON := fs.Bool("json", false, "print one JSON report per backend per line instead of the tables")
	stockd := fs.String("stockd", "", "stockd binary (default: stockd next to this binary, else built from source)")
	dir := fs.String("dir", "", "keep the cluster's logs and data here (default: a temp dir, removed)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return flagExit(err)
	}
	if *duration <= 0 || *every <= 0 || *rps <= 0 || *conc <= 0 || *sample <= 0 || *tol < 0 {
		fmt.Fprintln(stderr, "seckill soak: --duration, --every, --rps, --concurrency and --sample must be positive, --tolerance not negative")
		return exitFailure
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := lab.ClusterConfig()
	cfg.Dir, cfg.Stockd, cfg.Logger = *dir, findStockd(*stockd), log
	c, err := localcluster.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "seckill soak: start cluster: %v\n", err)
		return exitFailure
	}
	defer func() {
		if err := c.Close(); err != nil {
			log.Warn("cluster close", "err", err)
		}
	}()

	code := exitOK
	for _, b := range splitList(*backends) {
		rep, err := soakBackend(ctx, c, log, b, lab.SoakConfig{
			Backend: b, Duration: *duration, Every: *every, RPS: *rps, Concurrency: *conc, Faults: splitList(*faults),
		}, *sample, *tol)
		if err != nil {
			fmt.Fprintf(stderr, "seckill soak: %s: %v\n", b, err)
			code = exitFailure
		}
		if *asJSON {
			out, _ := json.Marshal(rep)
			fmt.Fprintf(stdout, "%s\n", out)
		} else {
			writeSoak(stdout, rep)
		}
		if len(rep.Failures) > 0 && code == exitOK {
			code = exitInconsistent
		}
		if ctx.Err() != nil {
			return exitFailure
		}
	}
	return code
}

// soakReport is one backend's soak.
type soakReport struct {
	Backend   string          `json:"backend"`
	Start     time.Time       `json:"start"`
	Duration  time.Duration   `json:"duration_ns"`
	Windows   []soakWindowRow `json:"windows"`
	Replicas  []replicaGrowth `json:"replicas"`
	P99       []time.Duration `json:"p99_per_minute_ns"`
	Tolerance float64         `json:"tolerance"`
	Failures  []string        `json:"failures,omitempty"`
}

type soakWindowRow struct {
	lab.Result
	Lost int64 `json:"lost"`
}

func soakBackend(ctx context.Context, c *localcluster.Cluster, log *slog.Logger, b string, cfg lab.SoakConfig, every time.Duration, tol float64) (soakReport, error) {
	rep := soakReport{Backend: b, Start: time.Now(), Tolerance: tol}
	cfg.OnWindow = func(w lab.SoakWindow) {
		log.Info("soak window", "backend", b, "fault", w.Result.Scenario, "status", w.Result.Status,
			"oversold", w.Result.Oversold, "lost", w.Lost, "sold", w.Result.Sold, "note", w.Result.Note)
	}
	// The replicas are sampled from the backend switch on, so the first
	// minute is the soak's first and the old backend's processes are not.
	sampler := newSampler(c.Replicas(), every)
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stop()
		wg.Wait()
	}()
	cfg.OnStart = func() { wg.Go(func() { sampler.run(sctx, c) }) }
	windows, lat, err := lab.Soak(ctx, c, cfg)
	stop()
	wg.Wait()
	rep.Duration = time.Since(rep.Start)
	for _, w := range windows {
		rep.Windows = append(rep.Windows, soakWindowRow{Result: w.Result, Lost: w.Lost})
	}
	for i, s := range sampler.samples() {
		g := growthOf(s, tol)
		g.Replica = localcluster.ReplicaName(i)
		rep.Replicas = append(rep.Replicas, g)
	}
	if len(windows) > 0 {
		rep.P99 = p99PerMinute(lat, windows[0].Start)
	}
	rep.Failures = soakVerdict(rep)
	if err != nil {
		rep.Failures = append(rep.Failures, "soak stopped: "+firstLine(err))
	}
	return rep, err
}

// sample is one read of a replica's /metrics.
type sample struct {
	At         time.Time `json:"at"`
	Goroutines float64   `json:"goroutines"`
	RSS        float64   `json:"rss"`
	Heap       float64   `json:"heap_inuse"`
	Started    float64   `json:"started"` // process_start_time_seconds: a new value is a new process
}

type sampler struct {
	every time.Duration
	mu    sync.Mutex
	per   [][]sample
}

func newSampler(n int, every time.Duration) *sampler {
	return &sampler{every: every, per: make([][]sample, n)}
}

func (s *sampler) run(ctx context.Context, c *localcluster.Cluster) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		for i := range c.Replicas() {
			// A paused or killed replica does not answer: its gap is
			// the fault's, not a sample.
			if m, err := scrape(ctx, c.ReplicaURL(i)); err == nil {
				s.mu.Lock()
				s.per[i] = append(s.per[i], m)
				s.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) samples() [][]sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]sample, len(s.per))
	for i, p := range s.per {
		out[i] = slices.Clone(p)
	}
	return out
}

// scrape reads the four series a soak watches from one replica.
func scrape(ctx context.Context, base string) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	fams, err := metrics.Scrape(ctx, nil, base+"/metrics")
	if err != nil {
		return sample{}, err
	}
	return soakSample(fams, time.Now())
}

// parseMetrics picks the soak's series out of Prometheus text.
func parseMetrics(r io.Reader, at time.Time) (sample, error) {
	fams, err := metrics.Parse(r)
	if err != nil {
		return sample{At: at}, err
	}
	return soakSample(fams, at)
}

// soakSample is the soak's four series of one scrape.
func soakSample(fams metrics.Families, at time.Time) (sample, error) {
	s := sample{At: at}
	var missing []string
	for name, dst := range map[string]*float64{
		"go_goroutines": &s.Goroutines, "process_resident_memory_bytes": &s.RSS,
		"go_memstats_heap_inuse_bytes": &s.Heap, "process_start_time_seconds": &s.Started,
	} {
		v, ok := fams.Value(name)
		if !ok {
			missing = append(missing, name)
			continue
		}
		*dst = v
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return s, fmt.Errorf("metrics: no %s", strings.Join(missing, ", "))
	}
	return s, nil
}

// replicaGrowth compares a replica's first and last minute. A replica the
// soak killed is judged on its longest-lived process; one whose longest
// process spans under two minutes cannot be judged (Judged false).
type replicaGrowth struct {
	Replica  string  `json:"replica"`
	Samples  int     `json:"samples"`
	Restarts int     `json:"restarts"`
	Judged   bool    `json:"judged"`
	SpanSec  float64 `json:"span_s"`
	Gor      [2]float64
	RSS      [2]float64
	Heap     [2]float64
	Flat     bool     `json:"flat"`
	Why      []string `json:"why,omitempty"`
}

// goroutineSlack is how many goroutines a replica may gain on top of the
// tolerance: a connection pool's few extra conns after a reconnect.
const goroutineSlack = 10

// growthOf judges one replica's samples with tolerance tol: each series'
// last-minute median must be at most its first-minute median x (1+tol)
// (+goroutineSlack for goroutines).
func growthOf(s []sample, tol float64) replicaGrowth {
	g := replicaGrowth{Samples: len(s)}
	// Split into processes by start time; keep the longest-lived.
	var best []sample
	for i := 0; i < len(s); {
		j := i + 1
		for j < len(s) && s[j].Started == s[i].Started {
			j++
		}
		if i > 0 {
			g.Restarts++
		}
		if best == nil || s[j-1].At.Sub(s[i].At) > best[len(best)-1].At.Sub(best[0].At) {
			best = s[i:j]
		}
		i = j
	}
	if len(best) == 0 {
		g.Why = []string{"no samples"}
		return g
	}
	first, last := best[0].At, best[len(best)-1].At
	g.SpanSec = last.Sub(first).Seconds()
	if last.Sub(first) < 2*time.Minute {
		g.Flat = true
		g.Why = []string{fmt.Sprintf("not judged: its longest process spans %.0fs (< 2 min)", g.SpanSec)}
		return g
	}
	g.Judged = true
	med := func(pick func(sample) float64, from, to time.Time) float64 {
		var v []float64
		for _, x := range best {
			if !x.At.Before(from) && !x.At.After(to) {
				v = append(v, pick(x))
			}
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	series := []struct {
		name  string
		pick  func(sample) float64
		dst   *[2]float64
		slack float64
	}{
		{"goroutines", func(x sample) float64 { return x.Goroutines }, &g.Gor, goroutineSlack},
		{"rss", func(x sample) float64 { return x.RSS }, &g.RSS, 0},
		{"heap", func(x sample) float64 { return x.Heap }, &g.Heap, 0},
	}
	g.Flat = true
	for _, sr := range series {
		a := med(sr.pick, first, first.Add(time.Minute))
		b := med(sr.pick, last.Add(-time.Minute), last)
		*sr.dst = [2]float64{a, b}
		if b > a*(1+tol)+sr.slack {
			g.Flat = false
			g.Why = append(g.Why, fmt.Sprintf("%s grew %.0f -> %.0f (> x%.2f)", sr.name, a, b, 1+tol))
		}
	}
	return g
}

// p99PerMinute buckets answers by minute since start.
func p99PerMinute(lat []lab.SoakLatency, start time.Time) []time.Duration {
	var buckets [][]time.Duration
	for _, l := range lat {
		m := int(l.At.Sub(start) / time.Minute)
		if m < 0 {
			continue
		}
		for len(buckets) <= m {
			buckets = append(buckets, nil)
		}
		buckets[m] = append(buckets[m], l.Dur)
	}
	out := make([]time.Duration, len(buckets))
	for i, b := range buckets {
		out[i] = lab.P99(b)
	}
	return out
}

// soakVerdict lists what failed: any window oversold, losing an
// acknowledged sale, or failing the lab's judgement (books, recovery, the
// scenario's own checks); any replica that grew; no window at all.
func soakVerdict(r soakReport) []string {
	var why []string
	if len(r.Windows) == 0 {
		why = append(why, "no fault window ran")
	}
	for i, w := range r.Windows {
		if w.Oversold > 0 {
			why = append(why, fmt.Sprintf("window %d (%s): oversold %d", i+1, w.Scenario, w.Oversold))
		}
		if w.Lost > 0 {
			why = append(why, fmt.Sprintf("window %d (%s): %d acknowledged sales lost", i+1, w.Scenario, w.Lost))
		}
		if !w.Passed() {
			why = append(why, fmt.Sprintf("window %d (%s): %s", i+1, w.Scenario, w.Note))
		}
	}
	for _, g := range r.Replicas {
		if !g.Flat {
			why = append(why, fmt.Sprintf("%s: %s", g.Replica, strings.Join(g.Why, "; ")))
		}
	}
	return why
}

func writeSoak(w io.Writer, r soakReport) {
	fmt.Fprintf(w, "\n%s: %d windows in %s (started %s)\n", r.Backend, len(r.Windows), r.Duration.Round(time.Second), r.Start.UTC().Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "window\tfault\tsold\tunconfirmed\tlucky+stock\toversold\tlost\tfenced\terrors\trecovery\tstatus")
	var sold, lost, oversold int64
	for i, x := range r.Windows {
		rec := "-"
		if x.RecoveryMS >= 0 {
			rec = fmt.Sprintf("%dms", x.RecoveryMS)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d (%d sold)\t%d/%d\t%d\t%d\t%d\t%d\t%s\t%s\n", i+1, x.Scenario, x.Sold, x.Unconfirmed, x.UnconfirmedSold,
			x.Lucky+x.Stock, x.Initial, x.Oversold, x.Lost, x.Fenced, x.Errors, rec, x.Status)
		sold += int64(x.Sold)
		lost += x.Lost
		oversold += x.Oversold
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "total: %d sold, %d oversold, %d lost\n", sold, oversold, lost)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "replica\tsamples\trestarts\tgoroutines first->last min\tRSS MiB\theap MiB\tflat")
	for _, g := range r.Replicas {
		flat := fmt.Sprint(g.Flat)
		if !g.Judged {
			flat = "n/a"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f -> %.0f\t%.1f -> %.1f\t%.1f -> %.1f\t%s\n", g.Replica, g.Samples, g.Restarts,
			g.Gor[0], g.Gor[1], g.RSS[0]/(1<<20), g.RSS[1]/(1<<20), g.Heap[0]/(1<<20), g.Heap[1]/(1<<20), flat)
	}
	_ = tw.Flush()
	var p []string
	for _, d := range r.P99 {
		p = append(p, d.Round(time.Millisecond).String())
	}
	fmt.Fprintf(w, "p99 per minute: %s\n", strings.Join(p, " "))
	if len(r.Failures) == 0 {
		fmt.Fprintf(w, "verdict: pass (flat = last-minute median <= first-minute median x %.2f, goroutines +%d)\n", 1+r.Tolerance, goroutineSlack)
	} else {
		fmt.Fprintf(w, "verdict: FAIL\n  %s\n", strings.Join(r.Failures, "\n  "))
	}
}
