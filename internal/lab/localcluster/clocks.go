package localcluster

import (
	"fmt"
	"path/filepath"

	"seckill/internal/servers"
)

// clocks.go: with the fault layer, the stock Redis and the lock Redis run
// on wall clocks a cell can step (servers.ShiftedClock), one each, so a
// cell can move one without the other: the stock Redis's decides windows
// and keeps the sales' records, the lock Redis's expires the lock.
// Restarts keep the offset (the same Env). etcd and ZooKeeper are Go and
// Java processes that read the clock through the vDSO: no preloaded
// library moves their clocks, so the cells step the Redis ones only.

func newClocks(dir string) (stock, lock *servers.ShiftedClock, err error) {
	if stock, err = servers.NewShiftedClock(filepath.Join(dir, "clock-stock")); err != nil {
		return nil, nil, fmt.Errorf("localcluster: stock redis clock: %w", err)
	}
	if lock, err = servers.NewShiftedClock(filepath.Join(dir, "clock-lock")); err != nil {
		return nil, nil, fmt.Errorf("localcluster: lock redis clock: %w", err)
	}
	return stock, lock, nil
}

// StockClock steps the stock Redis's wall clock; nil without the fault
// layer (Config.Faults). A Sentinel set or Redis Cluster a cell starts
// does not run on it.
func (c *Cluster) StockClock() *servers.ShiftedClock { return c.stockClock }

// LockClock steps the lock Redis's wall clock; nil without the fault layer.
func (c *Cluster) LockClock() *servers.ShiftedClock { return c.lockClock }
