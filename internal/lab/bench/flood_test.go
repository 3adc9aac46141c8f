package bench

import (
	"strings"
	"testing"
)

// A flood the load tool could not send at its rate is not judged: the
// latencies of a machine that fell behind are its own queue's, not the
// lock's, and "15962/30000 answered" would read as buyers dropped.
func TestFloodNotJudgedWhenTheMachineFellBehind(t *testing.T) {
	fl := floods(false, 0)[0]
	row := func(mode string, sent int) FloodRow {
		return FloodRow{Flood: fl.name, Mode: mode, Stock: fl.stock, Planned: floodBuyers, Sent: sent, Sold: fl.stock,
			SoldAll: true, Consistent: true, SellOutMS: 100, SoldP99: 10, SoldOutP99: 5}
	}
	goal := func(atomicSent int) Goal {
		r := &Report{Flood: []FloodRow{row(LabelLocked, atomicSent), row(LabelLockedCombine, atomicSent), row("atomic", atomicSent)}}
		for _, g := range r.floodGoals() {
			if g.Name == "flood "+fl.name+": "+LabelLockedCombine {
				return g
			}
		}
		t.Fatal("no goal for the combined sale's flood")
		return Goal{}
	}
	if g := goal(floodBuyers); !g.Met || g.Unmeasured != "" {
		t.Fatalf("every buyer sent, the rows alike: got %+v, want met", g)
	}
	g := goal(floodBuyers - 1)
	if g.Met || !strings.Contains(g.Unmeasured, "could not send the flood") || !strings.Contains(g.Unmeasured, "29999 of 30000") {
		t.Fatalf("atomic sent one buyer short: got %+v, want not measured, saying the machine fell behind", g)
	}
}

// A lower rate sends the same buyers over a longer flood.
func TestFloodRateKeepsTheBuyers(t *testing.T) {
	for _, rate := range []int{0, 3000, 1500} {
		for _, f := range floods(false, rate) {
			if got := int(float64(f.rate) * f.duration.Seconds()); got != floodBuyers {
				t.Errorf("rate %d, flood %s: %d/s for %v is %d buyers, want %d", rate, f.name, f.rate, f.duration, got, floodBuyers)
			}
		}
	}
	if f := floods(false, 0)[0]; f.rate != DefaultFloodRate || f.stock*30 != floodBuyers {
		t.Errorf("default flood %+v, want %d/s and 30 buyers per unit", f, DefaultFloodRate)
	}
}
