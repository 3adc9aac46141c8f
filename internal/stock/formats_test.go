package stock_test

import (
	"errors"
	"testing"

	"seckill/internal/stock"
)

// A sale reset by a newer replica, whose format this build does not read,
// is refused on every path in (a process that sold in the old sale, one
// that starts now), and nothing is written in it; a sale without a format
// key (set up before formats) is format 1 and sells.
func TestSaleOfANewerFormatIsRefused(t *testing.T) {
	s, rdb := newStore(t, 10)
	if got, err := rdb.Get(t.Context(), "stock:format").Result(); err != nil || got != "1" {
		t.Fatalf("the reset's stock:format = %q, %v; want \"1\"", got, err)
	}
	if _, err := s.SellAtomic(t.Context(), stock.NewAttemptID()); err != nil {
		t.Fatalf("sale of this build's format: %v", err)
	}
	// A newer replica's reset: a new epoch, and its format.
	if err := rdb.MSet(t.Context(), "stock", 10, "lucky", 0, "stock:epoch", "reset-by-a-newer-replica", "stock:format", 2).Err(); err != nil {
		t.Fatal(err)
	}
	fresh := stock.NewStore(rdb, stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"})
	for name, st := range map[string]*stock.Store{"the process that sold": s, "a process started after": fresh} {
		_, err := st.SellAtomic(t.Context(), stock.NewAttemptID())
		if !errors.Is(err, stock.ErrSaleFormat) || !errors.Is(err, stock.ErrUnavailable) {
			t.Fatalf("%s, on a sale of format 2: %v; want ErrSaleFormat (unavailable)", name, err)
		}
	}
	wantStatus(t, s, stock.Status{Stock: 10, Lucky: 0})
	if got, _ := rdb.Get(t.Context(), "stock:format").Result(); got != "2" {
		t.Fatalf("stock:format became %q; want the newer replica's 2 untouched", got)
	}

	if err := rdb.Set(t.Context(), "stock:format", "two", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.SellAtomic(t.Context(), stock.NewAttemptID()); !errors.Is(err, stock.ErrSaleFormat) {
		t.Fatalf("sale with stock:format \"two\": %v; want ErrSaleFormat", err)
	}

	if err := rdb.Del(t.Context(), "stock:format").Err(); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*stock.Store{"the process that sold": s, "a process started after": fresh} {
		if _, err := st.SellAtomic(t.Context(), stock.NewAttemptID()); err != nil {
			t.Fatalf("%s, on a sale without stock:format (an older stockd's): %v", name, err)
		}
	}
	wantStatus(t, s, stock.Status{Stock: 8, Lucky: 2})
}

// Every format this build writes, it also reads.
func TestFormatsReadWhatTheyWrite(t *testing.T) {
	for _, f := range stock.Formats() {
		if f.Name == "" || f.What == "" || f.Writes < 1 || f.ReadsFrom > f.Writes {
			t.Errorf("format %+v: want a name, what it covers, and Writes >= 1 >= ... ReadsFrom <= Writes", f)
		}
	}
}
