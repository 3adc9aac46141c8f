package loadgen

import (
	"testing"
	"time"

	"seckill/internal/api"
)

// A sale is under way from its first sold answer's receipt to its last
// sold request's sending, and has no such range with fewer than two sold
// answers so ordered: what tells two runs sold at once.
func TestSellingBoundsASaleUnderWay(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	sold := func(sent, received int) Response {
		return Response{Outcome: OutcomeSold, Status: 200, Sent: at(sent), Received: at(received)}
	}
	soldOut := Response{Outcome: OutcomeSoldOut, Status: 409, Sent: at(0), Received: at(500)}
	for _, tc := range []struct {
		name        string
		rs          []Response
		from, until int64
	}{
		{"three sales", []Response{sold(20, 40), sold(0, 30), soldOut, sold(70, 90)}, t0.UnixMilli() + 30, t0.UnixMilli() + 70},
		{"one sale", []Response{sold(0, 30), soldOut}, 0, 0},
		{"overlapping answers", []Response{sold(0, 50), sold(10, 60)}, 0, 0},
		{"none sold", []Response{soldOut}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Summarize("fake", 10, tc.rs, time.Second, api.Stock{})
			if r.SellingFromMS != tc.from || r.SellingUntilMS != tc.until {
				t.Fatalf("selling %d..%d, want %d..%d", r.SellingFromMS, r.SellingUntilMS, tc.from, tc.until)
			}
		})
	}
}
