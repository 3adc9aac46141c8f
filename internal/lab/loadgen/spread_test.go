package loadgen

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// RunItems sells every item at once with its share of the load: each
// item sells out exactly, the totals are the items' sums, and no item
// fires before every item has been reset.
func TestRunItemsSpreadsTheSale(t *testing.T) {
	f := &itemsFake{unconfirmEvery: 9}
	srv := newItemsFake(t, f)
	ids := ItemIDs("spread", 4)
	s, err := RunItems(context.Background(), Config{URL: srv.URL, AdminToken: "t", Requests: 200, Concurrency: 8, Stock: 30}, ids)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	_ = s.WriteText(&text)
	if !s.OK(4) || s.Sold != 120 || s.Initial != 120 || s.Oversold != 0 || s.SalesPerSec <= 0 || s.SellOutMS <= 0 ||
		s.SoldP50ms <= 0 || s.SoldP99ms < s.SoldP50ms {
		t.Fatalf("got %+v:\n%s", s, text.String())
	}
	for i, r := range s.Items {
		if r.Item != ids[i] || r.Requests != 50 || r.Concurrency != 2 || r.Lucky != 30 {
			t.Fatalf("item %d: got item %q, %d requests at %d in flight, lucky %d; want %s, 50 at 2, 30",
				i, r.Item, r.Requests, r.Concurrency, r.Lucky, ids[i])
		}
	}
	if f.created != 4 || f.defaultSale != 0 || !f.firstSale.After(f.lastPut) {
		t.Fatalf("got %d creates, %d requests to the default sale, first sale at %v, last reset at %v; want 4, 0, the sale after every reset",
			f.created, f.defaultSale, f.firstSale, f.lastPut)
	}
	if !strings.Contains(text.String(), "4 items (spread-1, spread-2, spread-3, spread-4): sold 120 of 120, oversold 0") {
		t.Fatalf("the summary line is missing:\n%s", text.String())
	}
}

// An item whose reset fails does not hold the others at the start line:
// they sell, and its error is returned.
func TestRunItemsOneItemFails(t *testing.T) {
	f := &itemsFake{refuse: "x-2"}
	srv := newItemsFake(t, f)
	s, err := RunItems(context.Background(), Config{URL: srv.URL, AdminToken: "t", Requests: 90, Concurrency: 6, Stock: 10}, ItemIDs("x", 3))
	if err == nil || s == nil || len(s.Items) != 2 || s.Sold != 20 || s.OK(3) {
		t.Fatalf("got %+v, %v; want the two other items sold and an error", s, err)
	}
}

func TestRunItemsRefusesWhatItCannotSplit(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		n    int
	}{
		{"no item", Config{URL: "http://127.0.0.1:1"}, 0},
		{"too many", Config{URL: "http://127.0.0.1:1"}, MaxSpreadItems + 1},
		{"named buyers", Config{URL: "http://127.0.0.1:1", Users: 5}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := RunItems(context.Background(), tc.cfg, ItemIDs("", tc.n)); !errors.Is(err, ErrConfig) {
				t.Fatalf("got %v, want ErrConfig", err)
			}
		})
	}
}
