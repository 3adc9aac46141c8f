package localcluster

import (
	"errors"
	"fmt"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// CutMySQL disconnects replica i from MariaDB whatever the lock backend:
// its durable orders consumer (orders.durable) loses its database while
// the sale goes on, which LinkLock reaches only under the mysql backends.
// Established connections are closed and new ones refused; restore
// reconnects it. Cutting twice, or restoring twice, is harmless.
func (c *Cluster) CutMySQL(i int) (restore func() error, err error) {
	if c.faults == nil {
		return nil, ErrNoFaults
	}
	if i < 0 || i >= len(c.addrs) {
		return nil, fmt.Errorf("%w: replica %d of %d", ErrConfig, i, len(c.addrs))
	}
	p := c.faults.existing(targetMySQL, i)
	if p == nil {
		return nil, fmt.Errorf("%w: no %s proxy for replica %d (MariaDB not started)", ErrConfig, targetMySQL, i)
	}
	p.Stop()
	return func() error {
		err := p.Start()
		if errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("localcluster: restore mysql of replica %d: %w", i, err)
		}
		return nil
	}, nil
}
