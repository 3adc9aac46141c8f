package orders

import (
	"fmt"
	"testing"
	"time"

	"seckill/internal/stock/redisstore"
)

// HighestUnit reads the highest unit stored for the sale asked, not
// another sale's, and 0 (no error) for a sale with no order stored, or
// whose entries came before units.
func TestHighestUnitIsTheSales(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := e.consumer(t, Config{Table: "units_orders"})
	var _ redisstore.DurableUnits = c
	for _, u := range []int64{1, 2, 3, 5} { // 4's order not stored (yet)
		e.xadd(t, "seckill:orders", order{id: fmt.Sprintf("a-%d", u), sale: "sale-a", token: uint64(u),
			replica: "r0", stockAfter: 10 - u, unit: u, ms: time.Now().UnixMilli()}.values())
	}
	e.sell(t, "seckill:orders", "sale-old", "old", 2) // entries from before units
	e.xadd(t, "seckill:orders", order{id: "b-9", sale: "sale-b", token: 9, replica: "r0", unit: 9, ms: time.Now().UnixMilli()}.values())
	run(t, c)
	e.drained(t, c, "units_orders", 4+2+1)

	for sale, want := range map[string]int64{"sale-a": 5, "sale-b": 9, "sale-old": 0, "sale-none": 0} {
		if got, err := c.HighestUnit(ctx, sale); err != nil || got != want {
			t.Errorf("HighestUnit(%s) = %d, %v; want %d", sale, got, err, want)
		}
	}
}
