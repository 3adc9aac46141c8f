package main

import (
	"strings"
	"testing"
	"time"

	"seckill/internal/lab"
)

// steady makes samples every 5s over span, with per-sample values from f
// (t is seconds since the first), all of one process unless restartAt.
func steady(span time.Duration, restartAt time.Duration, f func(t float64) (gor, rss, heap float64)) []sample {
	t0 := time.Unix(1_700_000_000, 0)
	var out []sample
	for d := time.Duration(0); d <= span; d += 5 * time.Second {
		g, r, h := f(d.Seconds())
		started := 1.0
		if restartAt > 0 && d >= restartAt {
			started = 2
		}
		out = append(out, sample{At: t0.Add(d), Goroutines: g, RSS: r, Heap: h, Started: started})
	}
	return out
}

func flatSeries(float64) (float64, float64, float64) { return 40, 30 << 20, 8 << 20 }

func TestGrowthFlat(t *testing.T) {
	// Noise within the tolerance: +5 goroutines, +20% RSS and heap.
	g := growthOf(steady(3*time.Minute, 0, func(t float64) (float64, float64, float64) {
		if t > 120 {
			return 45, 36 << 20, 9.6 * (1 << 20)
		}
		return flatSeries(t)
	}), 0.5)
	if !g.Judged || !g.Flat {
		t.Fatalf("growth = %+v, want judged and flat", g)
	}
	if g.Gor != [2]float64{40, 45} {
		t.Errorf("goroutines first/last = %v, want [40 45]", g.Gor)
	}
}

func TestGrowthFails(t *testing.T) {
	cases := map[string]struct {
		f    func(t float64) (float64, float64, float64)
		want string
	}{
		"goroutine leak": {func(t float64) (float64, float64, float64) { return 40 + t, 30 << 20, 8 << 20 }, "goroutines grew"},
		"rss leak":       {func(t float64) (float64, float64, float64) { return 40, (30 + t) * (1 << 20), 8 << 20 }, "rss grew"},
		"heap leak":      {func(t float64) (float64, float64, float64) { return 40, 30 << 20, (8 + t/4) * (1 << 20) }, "heap grew"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := growthOf(steady(3*time.Minute, 0, tc.f), 0.5)
			if !g.Judged || g.Flat || !strings.Contains(strings.Join(g.Why, ";"), tc.want) {
				t.Fatalf("growth = %+v, want not flat with %q", g, tc.want)
			}
			r := soakReport{Windows: []soakWindowRow{{Result: lab.Result{Scenario: "kill", Status: "pass"}}}, Replicas: []replicaGrowth{g}}
			if len(soakVerdict(r)) == 0 {
				t.Fatal("verdict passed a replica that grew")
			}
		})
	}
}

func TestGrowthRestart(t *testing.T) {
	// Killed at 30s and restarted: the new process (2.5 min) is judged,
	// and its lower baseline is not compared with the old one's.
	g := growthOf(steady(3*time.Minute, 30*time.Second, func(t float64) (float64, float64, float64) {
		if t < 30 {
			return 80, 60 << 20, 20 << 20
		}
		return flatSeries(t)
	}), 0.5)
	if !g.Judged || !g.Flat || g.Restarts != 1 || g.Gor != [2]float64{40, 40} {
		t.Fatalf("growth = %+v, want the restarted process judged flat, 1 restart", g)
	}
	// A process younger than two minutes is not judged, and not failed.
	g = growthOf(steady(90*time.Second, 0, flatSeries), 0.5)
	if g.Judged || !g.Flat {
		t.Fatalf("growth over 90s = %+v, want not judged", g)
	}
}

func TestSoakVerdict(t *testing.T) {
	ok := soakWindowRow{Result: lab.Result{Scenario: "pause", Status: "pass"}}
	flat := replicaGrowth{Replica: "stockd-1", Judged: true, Flat: true}
	if why := soakVerdict(soakReport{Windows: []soakWindowRow{ok, ok}, Replicas: []replicaGrowth{flat}}); len(why) != 0 {
		t.Fatalf("clean soak failed: %v", why)
	}
	oversold := ok
	oversold.Oversold = 2
	lost := ok
	lost.Lost = 1
	failed := ok
	failed.Status, failed.Note = "FAIL", "no sale within 10s of the fault's end"
	cases := map[string]soakReport{
		"oversold":  {Windows: []soakWindowRow{ok, oversold}, Replicas: []replicaGrowth{flat}},
		"lost":      {Windows: []soakWindowRow{lost, ok}, Replicas: []replicaGrowth{flat}},
		"lab fail":  {Windows: []soakWindowRow{failed}, Replicas: []replicaGrowth{flat}},
		"grew":      {Windows: []soakWindowRow{ok}, Replicas: []replicaGrowth{{Replica: "stockd-2", Judged: true, Why: []string{"heap grew"}}}},
		"no window": {Replicas: []replicaGrowth{flat}},
	}
	for name, r := range cases {
		if why := soakVerdict(r); len(why) == 0 {
			t.Errorf("%s: verdict passed", name)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
go_memstats_heap_inuse_bytes 8.388608e+06
process_resident_memory_bytes 3.1457280e+07
process_start_time_seconds 1.7e+09
stockd_requests_total{result="sold"} 5
`
	s, err := parseMetrics(strings.NewReader(text), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Goroutines != 42 || s.Heap != 8<<20 || s.RSS != 30<<20 || s.Started != 1.7e9 {
		t.Fatalf("sample = %+v", s)
	}
	if _, err := parseMetrics(strings.NewReader("go_goroutines 1\n"), time.Time{}); err == nil {
		t.Fatal("missing series accepted")
	}
}

func TestP99PerMinute(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var lat []lab.SoakLatency
	for i := range 100 {
		lat = append(lat, lab.SoakLatency{At: t0.Add(time.Duration(i) * 100 * time.Millisecond), Dur: time.Duration(i+1) * time.Millisecond})
		lat = append(lat, lab.SoakLatency{At: t0.Add(time.Minute + time.Duration(i)*100*time.Millisecond), Dur: 5 * time.Millisecond})
	}
	got := p99PerMinute(lat, t0)
	if len(got) != 2 || got[0] != 99*time.Millisecond || got[1] != 5*time.Millisecond {
		t.Fatalf("p99 per minute = %v, want [99ms 5ms]", got)
	}
}
