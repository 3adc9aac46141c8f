package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"seckill/internal/api"
	"seckill/internal/backoff"
	"seckill/internal/stock/redisstore"
)

// witnesscells.go: the witness's own faults, and the operator's way back
// from a Redis that went back. restore-all and restore-both restore Redis
// (and the witness with it); here the witness is the one that forgot or
// went back on its own, and, last, the sale is reconciled while the
// durable orders' consumer is behind.

// Halt reasons the cells expect (stock's errors start with them).
const witnessLost = "witness_lost"

// witnessClient is an etcd client of the cluster's witness.
func (x *run) witnessClient() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{x.c.Etcd().Addr()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
}

// runWitnessWipe is restore-all with the witness's record deleted while
// every stockd and the Redis are down: one host's crash that takes etcd's
// data too. The new processes find a Redis holding a sale and a witness
// holding no record of it: they must halt the sale witness_lost, never
// adopt Redis's sale silently (which sold the units since the snapshot
// again, 220 in the first report).
func runWitnessWipe(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	etcd, err := x.witnessClient()
	if err != nil {
		return err
	}
	defer etcd.Close()
	p, rdb, saved, err := x.save(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	n := 0
	if _, err := x.load.waitFor(ctx, saved, func(r response) bool {
		if r.sold() && !r.Sent.Before(saved) {
			n++
		}
		return n >= soldAfterSave
	}); err != nil {
		return fmt.Errorf("after the SAVE, %d sales: %w", n, err)
	}
	killed, err := x.restartAll(ctx, p, func() error {
		if _, err := etcd.Delete(ctx, witnessKeyName); err != nil {
			return fmt.Errorf("wipe the witness's record: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := x.restored(ctx, rdb, saved, killed, "; the witness's record deleted, every stockd restarted"); err != nil {
		return err
	}
	// The way back: neither Redis (rewound) nor the witness (empty) knows
	// what was sold, so the operator counts the buyers' answers.
	initial, err := rdb.Get(ctx, stockKeyName+":initial").Int64()
	if err != nil {
		return fmt.Errorf("read the initial stock: %w", err)
	}
	least := initial
	for _, r := range x.load.answers() {
		if r.sold() && r.Left >= 0 {
			least = min(least, r.Left)
		}
	}
	var rec api.Reconciliation
	if err := x.wayBack(ctx, "/stock/reconcile", fmt.Sprintf(`{"by":"the fault lab","at_least":%d}`, initial-least), &rec); err != nil {
		return err
	}
	x.res.Store.Lifted = rec.Lifted
	x.notef("the way back: reconciled at_least %d (the buyers' answers: the least stock-after %d): redis lucky %d, lucky %d, held %d",
		initial-least, least, rec.RedisLucky, rec.Lucky, rec.Held)
	return nil
}

// wayBack makes the operator's admin call path with body (answer decoded
// into out), then waits for a sale answered 200 after it: the sale goes
// on, and the judge's no-unit-twice covers it. Answers sent from the call
// on are the operator's, not the fault's.
func (x *run) wayBack(ctx context.Context, path, body string, out any) error {
	x.res.Store.operator = time.Now()
	raw, err := x.admin(ctx, path, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: %w: %s", path, err, raw)
	}
	if _, err := x.load.waitFor(ctx, x.res.Store.operator, func(r response) bool { return r.sold() && !r.Sent.Before(x.res.Store.operator) }); err != nil {
		return fmt.Errorf("no sale answered 200 after %s: %w", path, err)
	}
	return nil
}

// runWitnessRestore restores the witness, while every stockd sells, to a
// backup taken before the sale's reset (redisstore.WitnessBackupBefore: the
// record without the sale, of an older generation). Redis is untouched,
// so nothing was lost yet; but the witness no longer holds what the next
// 200 needs, and a restart would take its word. The replicas' next flush
// must find its own sale missing and halt the sale witness_lost: no sale
// sent after the restore answered 200 (the report's replicas went on
// selling 100 and 145 and wrote nothing).
func runWitnessRestore(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	etcd, err := x.witnessClient()
	if err != nil {
		return err
	}
	defer etcd.Close()
	p := x.c.Redis()
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer rdb.Close()
	x.undo = append(x.undo, x.undoHalt(p, false))
	epoch, err := rdb.Get(ctx, stockKeyName+":epoch").Result()
	if err != nil {
		return fmt.Errorf("read the sale's epoch: %w", err)
	}
	got, err := etcd.Get(ctx, witnessKeyName)
	if err != nil || len(got.Kvs) != 1 {
		return fmt.Errorf("read the witness's record %s: %d keys, %v", witnessKeyName, len(got.Kvs), err)
	}
	backup, err := redisstore.WitnessBackupBefore(got.Kvs[0].Value, epoch)
	if err != nil {
		return err
	}
	if _, err := etcd.Put(ctx, witnessKeyName, string(backup)); err != nil {
		return fmt.Errorf("restore the witness's record: %w", err)
	}
	x.res.Store = &StoreLoss{back: time.Now()}
	x.notef("the witness's record (%d bytes) restored to a backup from before sale %s's reset (%d bytes), every stockd selling", len(got.Kvs[0].Value), epoch, len(backup))
	// The halt comes with the first flush after the restore: a buyer's
	// answer through nginx, not a time.
	if _, err := x.load.waitFor(ctx, x.res.Store.back, func(r response) bool { return r.Result == api.StoreLost }); err != nil {
		return fmt.Errorf("no sale refused %s after the witness's restore: %w", api.StoreLost, err)
	}
	if err := x.refusedEverywhere(ctx, true); err != nil {
		return err
	}
	// The way back: Redis kept every sale, so the operator adopts it.
	var ad api.Adoption
	if err := x.wayBack(ctx, "/stock/witness/adopt", `{"by":"the fault lab"}`, &ad); err != nil {
		return err
	}
	x.res.Store.Lifted = ad.Lifted
	x.notef("the way back: adopted Redis's sale (lucky %d, stocks %v)", ad.Lucky, ad.Stocks)
	return nil
}

// checkWitnessRestore: as checkStoreLoss, but the sales whose flush met
// the restored record are answered unconfirmed (their receipt says they
// sold: Redis still holds them), and the halt is the witness's.
func checkWitnessRestore(x *run) {
	m := x.res.Store
	if m == nil {
		return // the judge says so
	}
	x.tally(m)
	x.checkAfter(m, api.Unconfirmed)
	x.notef("answers sent after the witness's restore: %v; %d of %d replicas' /readyz %s", m.After, m.Rewound, x.c.Replicas(), api.StoreRewound)
	x.checkLifted(witnessLost)
}

// checkWitnessWipe is checkStoreLoss, and the halt must be the witness's.
func checkWitnessWipe(x *run) {
	checkStoreLoss(x)
	x.checkLifted(witnessLost)
}

// checkLifted holds the halt the operator lifted to prefix.
func (x *run) checkLifted(prefix string) {
	m := x.res.Store
	if m == nil {
		return
	}
	if !strings.HasPrefix(m.Lifted, prefix) {
		x.problemf("the way back lifted the halt %q, want the reason %s", m.Lifted, prefix)
		return
	}
	x.notef("halted, then lifted: %s", m.Lifted)
}

// runReconcile: the operator's way back that keeps the sale. MariaDB is
// paused, so the durable orders' consumer falls behind; the stock Redis
// is SAVEd, every replica sells after it, and Redis is restarted from the
// snapshot: the running replicas halt the sale (their memory). MariaDB
// resumes, and POST /stock/reconcile rebuilds the counts: the witness
// knows every unit answered 200, MariaDB fewer, Redis fewer still. The
// sale then sells out through the same buyers, and is judged as any safe
// cell (books, history, no oversale) and by no stock-after answered 200
// twice: every unit acknowledged before the restart stays sold, none is
// sold again.
func runReconcile(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	db := x.c.MariaDB()
	if db == nil {
		return errors.New("no MariaDB (orders.durable)")
	}
	if err := db.Pause(); err != nil {
		return fmt.Errorf("pause MariaDB: %w", err)
	}
	x.undo = append(x.undo, db.Resume)
	p, rdb, saved, err := x.save(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	sellers := map[string]bool{}
	n := 0
	if _, err := x.load.waitFor(ctx, saved, func(r response) bool {
		if r.sold() && !r.Sent.Before(saved) {
			n++
			sellers[r.Replica] = true
		}
		return n >= soldAfterSave && len(sellers) == x.c.Replicas()
	}); err != nil {
		return fmt.Errorf("after the SAVE, %d sales on %d of %d replicas: %w", n, len(sellers), x.c.Replicas(), err)
	}
	if err := x.restartStore(ctx, p); err != nil {
		return err
	}
	back := x.res.Store.back
	if _, err := x.load.waitFor(ctx, back, func(r response) bool { return r.Result == api.StoreLost }); err != nil {
		return fmt.Errorf("the restored Redis was not refused (%s): %w", api.StoreLost, err)
	}
	lost := x.load.countSent(saved, func(r response) bool { return r.sold() && r.At.Before(back) })
	if err := db.Resume(); err != nil {
		return fmt.Errorf("resume MariaDB: %w", err)
	}
	raw, err := x.admin(ctx, "/stock/reconcile", `{"by":"the fault lab"}`)
	if err != nil {
		return err
	}
	var rec api.Reconciliation
	if err := json.Unmarshal(raw, &rec); err != nil {
		return fmt.Errorf("reconcile: %w: %s", err, raw)
	}
	x.faultEnd = time.Now()
	x.notef("reconciled after %d sales answered 200 since the SAVE: redis lucky %d, durable unit %d, witness %d: lucky %d, held %d, pending %d (lifted %q)",
		lost, rec.RedisLucky, rec.DurableUnit, rec.WitnessSold, rec.Lucky, rec.Held, rec.Pending, rec.Lifted)
	if rec.Lucky < rec.WitnessSold || rec.WitnessSold <= rec.RedisLucky {
		x.problemf("reconciled lucky %d, witness %d, redis %d: want the witness's count, above Redis's", rec.Lucky, rec.WitnessSold, rec.RedisLucky)
	}
	if rec.Held == 0 {
		x.problemf("the reconcile held no unit: the consumer was not behind, so the cell tested nothing of it")
	}
	return nil
}

// admin makes an admin call through nginx as the cluster's operator
// (POST path with body), retried while it answers 503 (a server just
// resumed) or nothing; any other answer than 200 is an error.
func (x *run) admin(ctx context.Context, path, body string) ([]byte, error) {
	poll := backoff.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.c.URL()+path, bytes.NewReader([]byte(body)))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Admin-Token", x.c.AdminToken())
		resp, err := http.DefaultClient.Do(req)
		var raw []byte
		if err == nil {
			raw, err = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		switch {
		case err == nil && resp.StatusCode == http.StatusOK:
			return raw, nil
		case err == nil && resp.StatusCode != http.StatusServiceUnavailable:
			return nil, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, raw)
		}
		if poll.Wait(ctx) != nil {
			return nil, fmt.Errorf("POST %s: still unavailable (%v %s): %w", path, err, raw, ctx.Err())
		}
	}
}

// checkReconcile: no stock-after answered 200 twice in the whole cell.
func checkReconcile(x *run) {
	lefts := x.soldLefts()
	if n := soldTwice(lefts); n > 0 {
		x.problemf("%d stock-after values answered 200 twice: units sold twice", n)
	}
	x.notef("%d sales answered 200 in all, each stock-after once", len(lefts))
}
