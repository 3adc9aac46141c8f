package bench

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The split charges each process its share per unit sold and the rest of
// the machine to "other"; cores busy is machine time over wall time.
func TestCPUSplit(t *testing.T) {
	t0 := time.Unix(0, 0)
	a := cpuSample{at: t0}
	b := cpuSample{at: t0.Add(time.Second), machine: 1800 * time.Millisecond,
		self: 200 * time.Millisecond, stockd: 1000 * time.Millisecond, redis: 300 * time.Millisecond}
	got := b.split(a, 1000)
	want := RunCPU{CoresBusy: 1.8, Stockd: 1000, Redis: 300, Loadgen: 200, Other: 300}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("split = %+v, want %+v", got, want)
	}
	if got := b.split(a, 0); !reflect.DeepEqual(got, RunCPU{}) {
		t.Errorf("split of nothing sold = %+v, want zero", got)
	}
	// On a Redis Cluster each master's share, per unit sold.
	a.masters = []time.Duration{0, 100 * time.Millisecond}
	b.masters = []time.Duration{200 * time.Millisecond, 100 * time.Millisecond}
	if got := b.split(a, 1000); !reflect.DeepEqual(got.Masters, []float64{200, 0}) {
		t.Errorf("masters' split = %v, want [200 0]", got.Masters)
	}
	if machineBusy() <= 0 {
		t.Error("machineBusy read nothing from /proc/stat")
	}
}

// The scaling section shows each measured row's split and CPU ceiling.
func TestScalingCPUTable(t *testing.T) {
	rep := &Report{Scaling: []E2ERow{
		{Name: LabelLocked, SalesPerSec: 2000, CPU: RunCPU{CoresBusy: 1.9, Stockd: 500, Redis: 200, Loadgen: 200, Other: 100}},
		{Name: "segments=8", SalesPerSec: 3000},
	}}
	var md strings.Builder
	rep.writeScalingCPU(func(f string, a ...any) { fmt.Fprintf(&md, f, a...) }, 2)
	if want := "| locked | 2000 | 1.90 | 500 | 200 | 200 | 100 | 1000 | 2000 |"; !strings.Contains(md.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, md.String())
	}
	if strings.Contains(md.String(), "| segments=8 |") {
		t.Error("a row without a CPU measurement is shown")
	}
}
