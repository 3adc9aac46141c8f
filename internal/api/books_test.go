package api

import (
	"slices"
	"testing"
)

func TestBooks(t *testing.T) {
	for _, tc := range []struct {
		b                Books
		excess, oversold int64
		balanced         bool
	}{
		{Books{Stock: 0, Lucky: 300, Initial: 300}, 0, 0, true},
		{Books{Stock: 12, Lucky: 299, Initial: 300}, 11, 11, false}, // sold twice: the sum rises
		{Books{Stock: 97, Lucky: 3, Initial: 107}, -7, 0, false},    // lost with the store
		{Books{Stock: -2, Lucky: 302, Initial: 300}, 0, 0, true},    // balanced: a negative stock is its own check
		// Reservations: lucky counts units taken, returned those given back.
		{Books{Stock: 3, Lucky: 300, Returned: 3, Initial: 300}, 0, 0, true},
		{Books{Stock: 4, Lucky: 300, Returned: 3, Initial: 300}, 1, 1, false}, // a return counted twice in the stock
	} {
		if got := tc.b.Excess(); got != tc.excess {
			t.Errorf("%+v: Excess %d, want %d", tc.b, got, tc.excess)
		}
		if got := tc.b.Oversold(); got != tc.oversold {
			t.Errorf("%+v: Oversold %d, want %d", tc.b, got, tc.oversold)
		}
		if got := tc.b.Balanced(); got != tc.balanced {
			t.Errorf("%+v: Balanced %v, want %v", tc.b, got, tc.balanced)
		}
	}
}

func TestBooksProblems(t *testing.T) {
	for _, tc := range []struct {
		name  string
		books Books
		want  []string
	}{
		{"sound", Books{Stock: 2, Lucky: 298, Initial: 300}, nil},
		{"oversold", Books{Stock: 0, Lucky: 302, Initial: 300}, []string{"stock+lucky = 0+302 = 302, want initial 300 (oversold by 2)"}},
		{"lost", Books{Stock: 5, Lucky: 290, Initial: 300}, []string{"stock+lucky = 5+290 = 295, want initial 300 (5 units lost)"}},
		{"negative", Books{Stock: -1, Lucky: 301, Initial: 300}, []string{"stock is negative: -1"}},
		{"returned", Books{Stock: 3, Lucky: 300, Returned: 3, Initial: 300}, nil},
		{"returned, lost", Books{Stock: 2, Lucky: 300, Returned: 3, Initial: 300},
			[]string{"stock+lucky-returned = 2+300-3 = 299, want initial 300 (1 units lost)"}},
		// A surplus in one segment hides another's oversale from the sum.
		{"segment", Books{Stock: 0, Lucky: 300, Initial: 300, Segments: []int64{1, -1}}, []string{"segment 1 is negative: -1"}},
		// One segment is the stock itself, judged as such.
		{"one segment", Books{Stock: -1, Lucky: 301, Initial: 300, Segments: []int64{-1}}, []string{"stock is negative: -1"}},
	} {
		if got := tc.books.Problems(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %+v: got %q, want %q", tc.name, tc.books, got, tc.want)
		}
	}
	if p := LedgerProblem(3, 3); p != "" {
		t.Errorf("a ledger that agrees: got %q", p)
	}
	if p, want := LedgerProblem(2, 3), "ledger orders = 2, want lucky 3 (+1 units sold without an order)"; p != want {
		t.Errorf("a sale without an order: got %q, want %q", p, want)
	}
}

// The initial stock is learned while nothing is sold, then stands: a
// later oversale is judged against it, not absorbed into it.
func TestInitialLearner(t *testing.T) {
	var l InitialLearner
	if got := l.Learn(300, 0); got != 300 {
		t.Fatalf("nothing sold: got %d, want the stock, 300", got)
	}
	if got := l.Learn(0, 302); got != 300 {
		t.Fatalf("after sales: got %d, want the learned 300", got)
	}
	if got := l.Learn(500, 0); got != 500 {
		t.Fatalf("a new sale with nothing sold: got %d, want 500", got)
	}
	var first InitialLearner
	if got := first.Learn(10, 5); got != 15 {
		t.Fatalf("first seen mid-sale: got %d, want stock+lucky 15", got)
	}
}
