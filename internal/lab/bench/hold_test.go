package bench

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The bound is the serial law: a lock held hold + 2 round trips per sale.
func TestHoldBound(t *testing.T) {
	for _, tt := range []struct {
		hold, rtt time.Duration
		want      float64
	}{
		{0, 100 * time.Microsecond, 5000},
		{time.Millisecond, 100 * time.Microsecond, 1 / 0.0012},
		{20 * time.Millisecond, 0, 50},
	} {
		if got := holdBound(tt.hold, tt.rtt); got < tt.want*0.999 || got > tt.want*1.001 {
			t.Errorf("holdBound(%v, %v) = %.1f, want %.1f", tt.hold, tt.rtt, got, tt.want)
		}
	}
}

// The section shows each backend's rate and its share of the bound per
// hold time, the chart draws one line per backend, and a broken hold row
// fails the report.
func TestHoldReport(t *testing.T) {
	rep := &Report{RTT: RTT{P50: 100 * time.Microsecond}}
	for _, name := range []string{"redis", "etcd"} {
		for _, d := range HoldDelays {
			b := holdBound(d, rep.RTT.P50)
			rep.Hold = append(rep.Hold, HoldRow{Subject: name, Contenders: HoldContenders, HoldMs: ms(d),
				Sales: 100, SalesPerSec: b / 2, BoundPerSec: b, InvariantOK: true})
		}
	}
	var md strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&md, format, args...) }
	rep.writeHold(p, "bench-hold.svg")
	for _, want := range []string{"| redis | 2500 (50%) | 417 (50%) | 96 (50%) | 25 (50%) | ok |",
		"| bound 1/(hold + 2 RTT) | 5000 | 833 | 192 | 50 | |", "(bench-hold.svg)"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("section lacks %q:\n%s", want, md.String())
		}
	}
	var svg bytes.Buffer
	if err := rep.WriteHoldSVG(&svg); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(svg.String(), "<polyline"); got != 3 {
		t.Errorf("chart has %d lines, want 3 (redis, etcd, the bound)", got)
	}
	if !rep.holdOK() {
		t.Error("holdOK false with every row intact")
	}
	rep.Hold[1].InvariantOK, rep.Hold[1].Error = false, "invariant broken"
	if rep.holdOK() || rep.OK() {
		t.Error("a broken hold row left the report OK")
	}
}
