package history

import (
	"testing"
	"time"
)

// What the other sends of a purchase say of its unanswered one: the model
// would decide the same, but the search no longer has to.
func TestResolveKeyed(t *testing.T) {
	const ms = time.Millisecond
	send := func(o Outcome, call, ret time.Duration, after int64, order string) Op {
		return Op{User: "ann", Key: "k1", Outcome: o, Call: call * ms, Return: ret * ms, After: after, Order: order}
	}
	cut := send(Unknown, 0, 0, 0, "")
	cut.Return = Never
	for _, tc := range []struct {
		name string
		ops  []Op
		want Op // what the cut send becomes
	}{
		{"another send sold", []Op{cut, send(Sold, 1, 2, 4, "o1")}, Op{Outcome: NoChange, Return: Never}},
		{"another send told sold_out", []Op{cut, send(SoldOut, 1, 2, 0, "")}, Op{Outcome: NoChange, Return: Never}},
		{"another send told limit_reached", []Op{cut, send(LimitReached, 1, 2, 0, "")}, Op{Outcome: NoChange, Return: Never}},
		{"replayed: sold by the replay's answer, leaving what it names", []Op{cut, send(Replay, 3, 5, 7, "o1"), send(Replay, 1, 4, 7, "o1")},
			Op{Outcome: Sold, Return: 4 * ms, After: 7, Order: "o1"}},
		{"a busy answer proves nothing", []Op{cut, send(NoChange, 1, 2, 0, "")}, Op{Outcome: Unknown, Return: Never}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolveKeyed(tc.ops)[0]
			if got.Outcome != tc.want.Outcome || got.Return != tc.want.Return || got.After != tc.want.After || got.Order != tc.want.Order {
				t.Fatalf("got %v returning %v, after %d, order %q; want %v returning %v, after %d, order %q",
					got.Outcome, got.Return, got.After, got.Order, tc.want.Outcome, tc.want.Return, tc.want.After, tc.want.Order)
			}
		})
	}
	two := resolveKeyed([]Op{cut, cut, send(Replay, 1, 2, 7, "o1")})
	if two[0].Outcome != Unknown || two[1].Outcome != Unknown {
		t.Fatalf("two cut sends and a replay: got %v and %v, want both unknown (either may have sold)", two[0].Outcome, two[1].Outcome)
	}
}
