package stockd

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"seckill/internal/orders"
	"seckill/internal/stock"
)

// units.go: the durable orders' side of the check a process makes when it
// learns a sale (stock.DurableUnits): Redis must count every unit MySQL
// committed for it, or it went back with the witness (orderscheck.go).

// errUnitsUnbound: a sale was learned before startOrders bound the
// consumers; serve binds them before the listener starts, so only a
// caller outside serve sees it.
var errUnitsUnbound = errors.New("durable orders not started yet")

// durableUnits reads the highest committed unit from the orders
// consumers, once bound. A read that fails skips the check (the orders
// are written after the 200, and MySQL never stops a sale): logged, so
// that a sale learned unchecked is said.
type durableUnits struct {
	log *slog.Logger
	c   atomic.Pointer[orders.Consumer]
	ic  atomic.Pointer[orders.ItemConsumers]
}

// bind sets the consumers (ic nil: no items).
func (u *durableUnits) bind(c *orders.Consumer, ic *orders.ItemConsumers) {
	u.c.Store(c)
	u.ic.Store(ic)
}

// HighestUnit is the default sale's.
func (u *durableUnits) HighestUnit(ctx context.Context, sale string) (int64, error) {
	return u.read(ctx, "", sale, func() (*orders.Consumer, error) {
		if c := u.c.Load(); c != nil {
			return c, nil
		}
		return nil, errUnitsUnbound
	})
}

// item is item id's.
func (u *durableUnits) item(id string) stock.DurableUnits { return itemUnits{u: u, id: id} }

type itemUnits struct {
	u  *durableUnits
	id string
}

func (i itemUnits) HighestUnit(ctx context.Context, sale string) (int64, error) {
	return i.u.read(ctx, i.id, sale, func() (*orders.Consumer, error) {
		if ic := i.u.ic.Load(); ic != nil {
			return ic.For(i.id)
		}
		return nil, errUnitsUnbound
	})
}

func (u *durableUnits) read(ctx context.Context, item, sale string, consumer func() (*orders.Consumer, error)) (int64, error) {
	c, err := consumer()
	if err == nil {
		var n int64
		if n, err = c.HighestUnit(ctx, sale); err == nil {
			return n, nil
		}
	}
	u.log.Warn("durable orders: could not check the sale redis holds against them; learned unchecked", "item", item, "sale", sale, "err", err)
	return 0, err
}
