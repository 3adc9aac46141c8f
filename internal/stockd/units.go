package stockd

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"seckill/internal/orders"
	"seckill/internal/stock/redisstore"
)

// units.go: the durable orders' side of the check a process makes when it
// learns a sale (redisstore.DurableUnits): Redis must count every unit MySQL
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

// sale is sale id's: the default sale's (u) for "", else item id's.
func (u *durableUnits) sale(id string) redisstore.DurableUnits {
	if id == "" {
		return u
	}
	return itemUnits{u: u, id: id}
}

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

// unitsTimeout bounds one read of the highest unit: a process learning
// the sale waits for it before its first sale, and a MySQL that stalls
// (paused, black-holed) would otherwise hold those sales for the read
// pool's I/O timeout. The witness's own bound, for the same reason.
const unitsTimeout = redisstore.DefaultWitnessTimeout

func (u *durableUnits) read(ctx context.Context, item, sale string, consumer func() (*orders.Consumer, error)) (int64, error) {
	c, err := consumer()
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, unitsTimeout)
		defer cancel()
		var n int64
		if n, err = c.HighestUnit(ctx, sale); err == nil {
			return n, nil
		}
	}
	// A sale learned goes on unchecked; a reconciliation or an adoption
	// is refused (stock's callers say which).
	u.log.Warn("durable orders: could not read the highest unit stored", "item", item, "sale", sale, "err", err)
	return 0, err
}
