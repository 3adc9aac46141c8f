package api

import "testing"

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
