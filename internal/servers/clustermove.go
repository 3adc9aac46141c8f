package servers

import (
	"context"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"
)

// MigrateSlot moves slot from master from to master to as `redis-cli
// --cluster reshard` does: IMPORTING on to, MIGRATING on from, the slot's
// keys MIGRATEd batch at a time, then SETSLOT NODE on to, from and every
// other master. Between batches it calls step, if set (a test's hook to
// let sales run mid-migration, when some keys of the slot are on each
// node and clients get ASK and TRYAGAIN).
func (c *RedisCluster) MigrateSlot(ctx context.Context, slot, batch int, from, to *Process, step func()) error {
	fc := redis.NewClient(&redis.Options{Addr: from.Addr(), MaxRetries: -1})
	defer fc.Close()
	tc := redis.NewClient(&redis.Options{Addr: to.Addr(), MaxRetries: -1})
	defer tc.Close()
	fromID, err := fc.ClusterMyID(ctx).Result()
	if err != nil {
		return fmt.Errorf("migrate slot %d: %s's id: %w", slot, from.Name(), err)
	}
	toID, err := tc.ClusterMyID(ctx).Result()
	if err != nil {
		return fmt.Errorf("migrate slot %d: %s's id: %w", slot, to.Name(), err)
	}
	if err := tc.Do(ctx, "cluster", "setslot", slot, "importing", fromID).Err(); err != nil {
		return fmt.Errorf("migrate slot %d: importing: %w", slot, err)
	}
	if err := fc.Do(ctx, "cluster", "setslot", slot, "migrating", toID).Err(); err != nil {
		return fmt.Errorf("migrate slot %d: migrating: %w", slot, err)
	}
	host, port, err := net.SplitHostPort(to.Addr())
	if err != nil {
		return err
	}
	for {
		keys, err := fc.ClusterGetKeysInSlot(ctx, slot, batch).Result()
		if err != nil {
			return fmt.Errorf("migrate slot %d: keys: %w", slot, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := fc.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("migrate slot %d: %d keys: %w", slot, len(keys), err)
		}
		if step != nil {
			step()
		}
	}
	// The new owner first, then the old one: in between, the old one
	// still redirects with ASK to a node that already owns the slot.
	nodes := []*Process{to, from}
	for _, m := range c.Masters() {
		if m != to && m != from {
			nodes = append(nodes, m)
		}
	}
	for _, n := range nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		err := rc.Do(ctx, "cluster", "setslot", slot, "node", toID).Err()
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("migrate slot %d: setslot node on %s: %w", slot, n.Name(), err)
		}
	}
	return nil
}
