package loadgen

import (
	"strings"
	"testing"
	"time"

	"seckill/internal/api"
)

// Each rule of an order's lifecycle, broken once, and kept.
func TestOrderLifeRules(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	cfg := ReserveConfig{Window: time.Second, SameClock: true}
	// A sale sent at 1000, answered at 1005, its deadline 2003: paid by
	// a payment sent at 1010.
	paid := orderLife{order: "o", payBy: 2003, sent: at(1000), answered: at(1005),
		paySent: at(1010), payAnswered: at(1012), end: api.OrderEnd{State: "paid"}}
	expired := paid
	expired.paySent, expired.payAnswered, expired.end = at(1990), at(2004), api.OrderEnd{State: "expired", Refund: true}
	cases := []struct {
		name  string
		life  orderLife
		final string
		cfg   ReserveConfig
		want  string // in the reason; "" = kept
	}{
		{"paid", paid, "paid", cfg, ""},
		{"paid in the deadline's millisecond", func() orderLife { l := paid; l.paySent = at(2003); return l }(), "paid", cfg, ""},
		{"paid, sent after the deadline", func() orderLife { l := paid; l.paySent = at(2004); return l }(), "paid", cfg, "after its deadline"},
		{"paid, another clock", func() orderLife { l := paid; l.paySent = at(2004); return l }(), "paid", ReserveConfig{}, ""},
		{"answered paid, expired at the end", paid, "expired", cfg, "answered paid"},
		{"expired", expired, "expired", cfg, ""},
		{"expired, answered by the deadline", func() orderLife { l := expired; l.payAnswered = at(2003); return l }(), "expired", cfg, "by its deadline"},
		{"answered expired, paid at the end", expired, "paid", cfg, "answered expired"},
		{"paid by another payment", func() orderLife { l := paid; l.end.Refund = true; return l }(), "paid", cfg, "refund true"},
		{"never paid, expired", orderLife{order: "o", neverPays: true}, "expired", cfg, ""},
		{"never paid, paid at the end", orderLife{order: "o", neverPays: true}, "paid", cfg, "never paid"},
		{"deadline before its sale", func() orderLife { l := paid; l.payBy = 1999; return l }(), "paid", cfg, "less the window"},
		{"deadline after its answer", func() orderLife { l := paid; l.payBy = 2006; return l }(), "paid", cfg, "less the window"},
		{"a replay: no deadline to judge", func() orderLife { l := paid; l.payBy, l.paySent = 0, at(9999); return l }(), "paid", cfg, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.life.broken(api.Order{State: tc.final}, tc.cfg)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
