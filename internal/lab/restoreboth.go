package lab

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // MariaDB, for the durable orders' highest unit
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"seckill/internal/backoff"
	"seckill/internal/servers"
	"seckill/internal/stockd"
)

// restoreboth.go: the restore-both cell. restore-all's Redis came back
// from a snapshot while its witness kept the sale's ceilings, so the new
// processes halted. Here the witness comes back from a backup of the same
// night too (its record as it was before the SAVE), so it agrees with the
// restored Redis, and the processes, all new, have seen no later
// generation: the witness passes the sale. What still remembers the units
// sold since the backup is the durable orders in MariaDB (each order's
// unit number), so the replicas' first sales must halt the sale with the
// reason orders_ahead, none answered 200 and no unit sold twice.

// Keys of the sale as stockd names them by default.
const (
	saleIDKey      = "stock:orders:sale"
	witnessKeyName = "/seckill/witness/" + stockKeyName
	ordersTable    = "orders"
	ordersAhead    = "orders_ahead"
)

// restoreBothEnv adds to the witness the order ledger (whose orders
// number their units) and the durable orders (MariaDB).
func restoreBothEnv(c *stockd.Config) {
	witnessEnv(c)
	c.Stock.Ledger = true
	c.Orders.Durable, c.Orders.ClaimIdle = true, time.Second
}

// runRestoreBoth reads the witness's record, SAVEs the stock Redis, waits
// for soldAfterSave sales after it and for MariaDB to hold a unit above
// the snapshot's, then stops every stockd, restarts the Redis from the
// snapshot, writes the record back as it was (a restored backup) and
// starts every stockd again.
func runRestoreBoth(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{x.c.Etcd().Addr()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer etcd.Close()
	got, err := etcd.Get(ctx, witnessKeyName)
	if err != nil || len(got.Kvs) != 1 {
		return fmt.Errorf("read the witness's record %s: %d keys, %v", witnessKeyName, len(got.Kvs), err)
	}
	backup := got.Kvs[0].Value

	p, rdb, saved, err := x.save(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	// At least the snapshot's: read after the SAVE.
	lucky, err := rdb.Get(ctx, luckyKeyName).Int64()
	if err != nil {
		return fmt.Errorf("read lucky after the SAVE: %w", err)
	}
	sale, err := rdb.Get(ctx, saleIDKey).Result()
	if err != nil {
		return fmt.Errorf("read the sale id: %w", err)
	}
	n := 0
	if _, err := x.load.waitFor(ctx, saved, func(r response) bool {
		if r.sold() && !r.Sent.Before(saved) {
			n++
		}
		return n >= soldAfterSave
	}); err != nil {
		return fmt.Errorf("after the SAVE, %d sales: %w", n, err)
	}
	stored, err := x.storedAbove(ctx, sale, lucky)
	if err != nil {
		return err
	}
	x.notef("witness record of %d bytes read before the SAVE (lucky %d after it); MariaDB holds unit %d of sale %s before the restart", len(backup), lucky, stored, sale)

	killed, err := x.restartAll(ctx, p, func() error {
		if _, err := etcd.Put(ctx, witnessKeyName, string(backup)); err != nil {
			return fmt.Errorf("restore the witness's record: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return x.restored(ctx, rdb, saved, killed, "; the witness restored to its record before the SAVE, every stockd restarted")
}

// storedAbove waits until the durable orders hold a unit of sale above
// lucky (the consumers store them within about a second) and returns the
// highest: without one, nothing outside the restored pair remembers a
// lost sale, and the cell would prove nothing.
func (x *run) storedAbove(ctx context.Context, sale string, lucky int64) (int64, error) {
	db, err := sql.Open("mysql", servers.MariaDBDSN(x.c.MariaDB().Addr()))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	poll := backoff.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	var high sql.NullInt64
	for {
		err = db.QueryRowContext(ctx, "SELECT MAX(unit) FROM `"+ordersTable+"` WHERE sale = ?", sale).Scan(&high)
		if err == nil && high.Int64 > lucky {
			return high.Int64, nil
		}
		if poll.Wait(ctx) != nil {
			return 0, fmt.Errorf("MariaDB's highest unit of sale %s stayed %d (%v), want above the snapshot's %d", sale, high.Int64, err, lucky)
		}
	}
}

// checkRestoreBoth is checkStoreLoss, and the halt must be the durable
// orders' (the witness, restored with Redis, passed the sale).
func checkRestoreBoth(x *run) {
	checkStoreLoss(x)
	ctx, cancel := x.until()
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: x.c.Redis().Addr()})
	defer rdb.Close()
	why, err := rdb.Get(ctx, haltKeyName).Result()
	switch {
	case errors.Is(err, redis.Nil):
		x.problemf("the sale is not halted (no %s)", haltKeyName)
	case err != nil:
		x.problemf("read %s: %v", haltKeyName, err)
	case !strings.HasPrefix(why, ordersAhead):
		x.problemf("halted %q, want the durable orders' reason %s", why, ordersAhead)
	default:
		x.notef("halted: %s", why)
	}
}
