package stock_test

import (
	"testing"
	"time"

	"seckill/internal/stock"
)

func TestParseDelay(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		in      string
		want    stock.Delay
		wantErr bool
	}{
		{"0s", stock.Delay{}, false},
		{"5ms", stock.Delay{Min: 5 * ms, Max: 5 * ms}, false},
		{"2ms-10ms", stock.Delay{Min: 2 * ms, Max: 10 * ms}, false},
		{" 2ms - 10ms ", stock.Delay{Min: 2 * ms, Max: 10 * ms}, false},
		{"10ms-2ms", stock.Delay{}, true},
		{"-5ms", stock.Delay{}, true},
		{"5", stock.Delay{}, true},
		{"", stock.Delay{}, true},
		{"2ms-", stock.Delay{}, true},
		{"abc", stock.Delay{}, true},
	}
	for _, tc := range cases {
		got, err := stock.ParseDelay(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseDelay(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestDelayNextStaysInRange(t *testing.T) {
	d := stock.Delay{Min: 2 * time.Millisecond, Max: 3 * time.Millisecond}
	for range 1000 {
		if n := d.Next(); n < d.Min || n > d.Max {
			t.Fatalf("Next() = %v, want within [%v, %v]", n, d.Min, d.Max)
		}
	}
	if got := d.String(); got != "2ms-3ms" {
		t.Fatalf("String() = %q, want 2ms-3ms", got)
	}
}
