package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"seckill/internal/api"
)

func TestResultsHaveAStatus(t *testing.T) {
	seen := map[api.Result]bool{}
	for _, r := range api.Results {
		if seen[r] {
			t.Errorf("%q listed twice in Results", r)
		}
		seen[r] = true
		if r.Status() == 0 || !r.Matches(r.Status()) {
			t.Errorf("%q: got status %d, want one it matches", r, r.Status())
		}
	}
	for _, tc := range []struct {
		r      api.Result
		status int
		want   bool
	}{
		{api.Sold, http.StatusOK, true},
		{api.Sold, http.StatusBadGateway, false},
		{api.SoldOut, http.StatusServiceUnavailable, false},
		{api.Error, http.StatusServiceUnavailable, true},
		{api.Error, http.StatusInternalServerError, true},
		{"bogus", 0, false},
	} {
		if got := tc.r.Matches(tc.status); got != tc.want {
			t.Errorf("%q.Matches(%d) = %v, want %v", tc.r, tc.status, got, tc.want)
		}
	}
}

// GET /leader carries no "replica", and scripts/compose-test.sh greps its
// compact "is_leader":true.
func TestLeaderJSON(t *testing.T) {
	b, err := json.Marshal(api.Leader{Leader: "s1", Self: "s1", IsLeader: true, Term: 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"leader":"s1","self":"s1","is_leader":true,"term":3}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	b, _ = json.Marshal(api.Leader{Self: "s2", Backend: "none"})
	if want := `{"leader":"","self":"s2","is_leader":false,"term":0,"backend":"none"}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}

// GET /stock names its segments only when the stock is split.
func TestStockJSON(t *testing.T) {
	for _, tc := range []struct {
		body api.Stock
		want string
	}{
		{api.Stock{Stock: 3, Lucky: 4, From: api.From{Replica: "r"}}, `{"lucky":4,"replica":"r","stock":3}`},
		{api.Stock{Stock: 3, Lucky: 4, Segments: []int64{2, 1}}, `{"lucky":4,"replica":"","segments":[2,1],"stock":3}`},
	} {
		b, err := json.Marshal(tc.body)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("got %s, want %s", b, tc.want)
		}
	}
}
