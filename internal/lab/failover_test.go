package lab

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/api"
)

// The failover verdict: with replica acks on, one acknowledged sale lost
// fails the cell; the control (acks 0) passes and says what it lost; books
// that do not add up fail either.
func TestFailoverVerdict(t *testing.T) {
	cases := []struct {
		name                 string
		scenario             string
		acks, lost           int
		sold, errs           int
		stock, lucky         int64
		wantStatus, wantNote string
	}{
		{name: "acks on, nothing lost", acks: 1, sold: 40, stock: 260, lucky: 40, wantStatus: "pass"},
		{name: "acks on, one sale lost", acks: 1, lost: 1, sold: 40, stock: 261, lucky: 39, wantStatus: "FAIL", wantNote: "lost 1 acknowledged sale(s)"},
		{name: "control, two lost", acks: 0, lost: 2, sold: 40, stock: 262, lucky: 38, wantStatus: "pass", wantNote: "control: lost 2"},
		{name: "control, books off", acks: 0, sold: 40, stock: 262, lucky: 40, wantStatus: "FAIL", wantNote: "books:"},
		{name: "acks on, a sale with an error answer", acks: 1, sold: 40, errs: 1, stock: 259, lucky: 41, wantStatus: "pass", wantNote: "1 sale(s) took effect with an error answer"},
		{name: "acks on, lucky short of the answers", acks: 1, sold: 40, stock: 262, lucky: 38, wantStatus: "FAIL", wantNote: "books:"},
		{name: "lag, acks on, nothing lost", scenario: "failover-lag", acks: 1, sold: 40, stock: 260, lucky: 40, wantStatus: "pass"},
		{name: "lag control, loses", scenario: "failover-lag", acks: 0, lost: 3, sold: 40, stock: 263, lucky: 37, wantStatus: "pass", wantNote: "control: lost 3"},
		{name: "lag control, loses nothing", scenario: "failover-lag", acks: 0, sold: 40, stock: 260, lucky: 40, wantStatus: "FAIL", wantNote: "the checker would miss a loss"},
		{name: "split, acks on, one sale lost", scenario: "split", acks: 1, lost: 1, sold: 40, stock: 261, lucky: 39, wantStatus: "FAIL", wantNote: "lost 1 acknowledged sale(s)"},
		{name: "split control, loses", scenario: "split", acks: 0, lost: 5, sold: 40, stock: 265, lucky: 35, wantStatus: "pass", wantNote: "control: lost 5"},
		{name: "split control, loses nothing", scenario: "split", acks: 0, sold: 40, stock: 260, lucky: 40, wantStatus: "FAIL", wantNote: "the checker would miss a loss"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.scenario == "" {
				tc.scenario = "failover-kill"
			}
			cell := Cell{Backend: "redis", Scenario: tc.scenario, Fencing: true, Acks: tc.acks}
			res := &Result{
				Expect: cell.Expect(), Initial: Initial, Sold: tc.sold, Errors: tc.errs,
				Stock: tc.stock, Lucky: tc.lucky, RecoveryMS: 1500,
				Failover: &Failover{Acks: tc.acks, Lost: tc.lost},
			}
			x := &run{cell: cell, res: res, faultEnd: time.Now()}
			var extra int64
			res.Consistent, extra = failoverConsistent(res)
			if res.Consistent && extra > 0 {
				x.notef("%d sale(s) took effect with an error answer", extra)
			}
			scenarios[cell.Scenario].check(x)
			x.judge()
			note := strings.Join(x.notes, "; ")
			if res.Status != tc.wantStatus || !strings.Contains(note, tc.wantNote) {
				t.Errorf("got %s %q, want %s with %q", res.Status, note, tc.wantStatus, tc.wantNote)
			}
		})
	}
}

func TestFailoverCells(t *testing.T) {
	names := func(cells []Cell) []string {
		var out []string
		for _, c := range cells {
			if IsFailover(c.Scenario) {
				out = append(out, c.String()+":"+string(c.Expect()))
			}
		}
		return out
	}
	cases := []struct {
		backends, scenarios []string
		want                []string
	}{
		{nil, nil, []string{"redis/failover-kill/fenced/acks1:safe",
			"redis/failover-lag/fenced/acks1:safe", "redis/split/fenced/acks1:safe", "redis/split/fenced/acks0:loss",
			"redis/failover-clock/fenced/acks1:safe", "redis/reserve-failover/fenced/acks1:safe",
			"redis/cluster-kill/fenced/acks1:safe", "redis/cluster-lag/fenced/acks1:safe", "redis/cluster-lag/fenced/acks0:loss",
			"redis/cluster-failover/fenced/acks1:safe", "redis/cluster-move/fenced/acks1:safe", "redis/cluster-items/fenced/acks1:safe",
			"etcd/failover-kill/fenced/acks1:safe", "etcd/failover-clock/fenced/acks1:safe"}},
		// By name on etcd too; without acks refused by stockd, so no
		// control even by name.
		{nil, []string{"reserve-failover"}, []string{"redis/reserve-failover/fenced/acks1:safe", "etcd/reserve-failover/fenced/acks1:safe"}},
		{[]string{"redisson"}, []string{"cluster-kill", "cluster-move"}, []string{
			"redisson/cluster-kill/fenced/acks1:safe", "redisson/cluster-kill/fenced/acks0:may-lose",
			"redisson/cluster-move/fenced/acks1:safe", "redisson/cluster-move/fenced/acks0:may-lose"}},
		{[]string{"etcd"}, []string{"split"}, []string{"etcd/split/fenced/acks1:safe", "etcd/split/fenced/acks0:loss"}},
		{[]string{"redis"}, []string{"failover-lag"}, []string{"redis/failover-lag/fenced/acks1:safe", "redis/failover-lag/fenced/acks0:loss"}},
		{nil, []string{"failover-kill"}, []string{"redis/failover-kill/fenced/acks1:safe", "redis/failover-kill/fenced/acks0:may-lose",
			"etcd/failover-kill/fenced/acks1:safe", "etcd/failover-kill/fenced/acks0:may-lose"}},
		{[]string{"etcd"}, []string{"failover-lag"}, []string{"etcd/failover-lag/fenced/acks1:safe", "etcd/failover-lag/fenced/acks0:loss"}},
		{nil, []string{"failover-stop"}, []string{"redis/failover-stop/fenced/acks1:safe", "redis/failover-stop/fenced/acks0:may-lose",
			"etcd/failover-stop/fenced/acks1:safe", "etcd/failover-stop/fenced/acks0:may-lose"}},
		{[]string{"zookeeper"}, nil, nil},
		{[]string{"zookeeper"}, []string{"failover-kill"}, []string{"zookeeper/failover-kill/fenced/acks1:safe", "zookeeper/failover-kill/fenced/acks0:may-lose"}},
		{[]string{"redis"}, []string{"kill"}, nil},
	}
	for _, tc := range cases {
		if got := names(Matrix(tc.backends, tc.scenarios)); !slices.Equal(got, tc.want) {
			t.Errorf("Matrix(%v, %v): got failover cells %v, want %v", tc.backends, tc.scenarios, got, tc.want)
		}
	}
	for _, s := range failoverScenarios {
		if Summary(s) == "" || !scenarios[s].failover {
			t.Errorf("%s: not a failover scenario in the table", s)
		}
	}
}

// lostSales asks for each sold answer's receipt, again while stockd cannot
// settle it yet (503), and counts the ones the store does not hold.
func TestLostSales(t *testing.T) {
	var unsettled atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/stock/receipts/")
		if id == "slow" && unsettled.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(api.Sale{Result: api.Error, Error: "not replicated yet"})
			return
		}
		_ = json.NewEncoder(w).Encode(api.Receipt{Attempt: id, Sold: id != "gone"})
	}))
	defer srv.Close()
	sold := func(attempt string) response {
		return response{Status: http.StatusOK, Result: api.Sold, Attempt: attempt}
	}
	resps := []response{sold("kept"), sold("gone"), sold("slow"),
		{Status: http.StatusOK, Result: api.Sold, Attempt: "gone", Replayed: true},
		{Status: http.StatusServiceUnavailable, Result: api.Unconfirmed, Attempt: "gone"}}
	lost, err := lostSales(t.Context(), srv.Client(), srv.URL, resps)
	if err != nil || lost != 1 {
		t.Fatalf("got %d lost (%v), want 1", lost, err)
	}
	if got := unsettled.Load(); got != 3 {
		t.Errorf("got %d asks for the unsettled receipt, want 3", got)
	}
	if _, err := lostSales(t.Context(), srv.Client(), srv.URL, []response{sold("")}); err == nil {
		t.Errorf("got no error for a sold answer without an attempt id, want one")
	}
}
