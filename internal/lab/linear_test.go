package lab

import (
	"testing"
	"time"

	"seckill/internal/api"
	"seckill/internal/lab/history"
)

// A cell whose store loses its data judges the answers made in the store
// before the loss: a sale sent just after the harness marked the loss
// (the replicas sell on while they are stopped) and answered before the
// store came back is one of them. Caught in etcd/restore-all with
// combining, where a batch sold its later arrival a unit above its
// earlier one's: dropping the later left the earlier one's stock-after
// unexplained, and the history "not linearizable".
func TestBeforeLossKeepsSalesMadeBeforeIt(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	lost, back := at(20), at(100)
	sold := func(sent, answered int, left int64, replica string) response {
		return response{Sent: at(sent), At: at(answered), Status: 200, Result: api.Sold, Left: left, Replica: replica}
	}
	resps := []response{
		sold(0, 10, 3, "stockd-1"),
		sold(5, 40, 1, "stockd-2"),                        // sent before the loss, its unit after the next one's
		sold(21, 30, 2, "stockd-2"),                       // sent after the mark, sold before the store went
		{Sent: at(25), At: at(26), Status: 502, Left: -1}, // a replica stopped: no sale of the old store's
		sold(25, 110, 0, "stockd-3"),                      // answered by the store that came back
	}
	kept := beforeLoss(resps, lost, back)
	if len(kept) != 3 || kept[2].Left != 2 {
		t.Fatalf("kept %+v, want the first three sales", kept)
	}
	check := func(rs []response) bool {
		calls := make([]history.Call, len(rs))
		for i, r := range rs {
			c := map[string]int{"stockd-1": 0, "stockd-2": 1}[r.Replica]
			calls[i] = history.Call{Answer: history.Answer{Status: r.Status, Result: r.Result, Left: r.Left}, Sent: r.Sent, Answered: r.At, Client: c}
		}
		res, err := history.Check(t.Context(), history.Counter(4, true), history.Build(calls, back, 0, false), "", "")
		if err != nil {
			t.Fatal(err)
		}
		return res.OK
	}
	if !check(kept) {
		t.Fatal("the kept answers are not linearizable, want them to be")
	}
	if check([]response{resps[0], resps[1]}) {
		t.Fatal("without the sale sent after the mark the answers are linearizable: the test cannot tell the filter's fix")
	}
}
