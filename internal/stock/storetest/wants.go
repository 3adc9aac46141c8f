package storetest

import (
	"strings"
	"testing"

	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// WantStatus checks the sale's stock and lucky.
func WantStatus(t *testing.T, s *redisstore.Store, want stock.Status) {
	t.Helper()
	got, err := s.Status(t.Context())
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if got != want {
		t.Fatalf("got status %+v, want %+v", got, want)
	}
}

// WantHalted checks the sale's halt reason starts with prefix ("": not
// halted).
func WantHalted(t *testing.T, s *redisstore.Store, prefix string) {
	t.Helper()
	why, err := s.Halted(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if prefix == "" && why != "" || !strings.HasPrefix(why, prefix) {
		t.Fatalf("halt reason %q, want prefix %q", why, prefix)
	}
}
