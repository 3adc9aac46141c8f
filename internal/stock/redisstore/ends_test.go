package redisstore_test

import (
	"slices"
	"testing"
)

// With durable states every end goes into the set MySQL copies, in the
// script that decides it: a payment, a cancel, an expiry, and a late
// payment's expiry, each once however often it is asked again; a Reset
// keeps what is not copied yet. Without them nothing goes there.
func TestEveryEndIsKeptForMySQL(t *testing.T) {
	ctx := t.Context()
	s, rdb, svc := reservedSale(t, 4, ledgerModes[0])
	s.WithDurableStates()
	paid, cancelled, expired, late := sellOne(t, svc), sellOne(t, svc), sellOne(t, svc), sellOne(t, svc)
	for range 2 { // asked twice: one end each
		if _, err := s.Pay(ctx, paid.OrderID, "pay-1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Cancel(ctx, cancelled.OrderID); err != nil {
			t.Fatal(err)
		}
	}
	jumpClock(t, rdb, expired.PayBy+1)
	if x, err := s.ExpireDue(ctx, 1); err != nil || x.Expired != 1 {
		t.Fatalf("expire: %+v, %v; want 1", x, err)
	}
	jumpClock(t, rdb, late.PayBy+1)
	if e, err := s.Pay(ctx, late.OrderID, "pay-late"); err != nil || !e.Refund {
		t.Fatalf("late payment: %+v, %v; want a refund", e, err)
	}
	if err := s.Reset(ctx, 4); err != nil {
		t.Fatal(err)
	}
	ends, err := s.Ended(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(ends))
	for i, e := range ends {
		if e.Malformed != "" || e.At.IsZero() {
			t.Fatalf("end %+v", e)
		}
		got[i] = e.Order + " " + e.State + " " + e.PaymentID
	}
	want := []string{paid.OrderID + " paid pay-1", cancelled.OrderID + " cancelled ", expired.OrderID + " expired ", late.OrderID + " expired "}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ends kept for MySQL:\n got %q\nwant %q", got, want)
	}
	if err := s.Synced(ctx, ends[:3]); err != nil {
		t.Fatal(err)
	}
	if n, err := s.EndedLag(ctx); err != nil || n != 1 {
		t.Fatalf("after 3 synced: %d left, %v; want 1", n, err)
	}

	plain, _, plainSvc := reservedSale(t, 1, ledgerModes[1])
	if _, err := plain.Cancel(ctx, sellOne(t, plainSvc).OrderID); err != nil {
		t.Fatal(err)
	}
	if n, err := plain.EndedLag(ctx); err != nil || n != 0 {
		t.Fatalf("without durable states: %d ends kept, %v; want none", n, err)
	}
}
