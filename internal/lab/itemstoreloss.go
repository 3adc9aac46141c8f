package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/lab/loadgen"
	"seckill/internal/lab/localcluster"
	"seckill/internal/stock/redisstore"
)

// itemstoreloss.go: the item-restore-all cell, restore-all (storeloss.go)
// with items (docs/items.md) under stock.witness etcd, where each item's
// sale is witnessed in a register of its own (redisstore.ItemWitnessName).
// Two items are sold at once, each by a loadgen run of its own; the stock
// Redis is SAVEd once both have sold, and they sell on; then every stockd
// is stopped, the Redis killed and started from the snapshot, and every
// stockd started again. No running process remembers either sale: only
// the witness knows how low each item's stock went. Both items must halt
// on every replica (store_lost, /readyz naming them, GET /items/:id
// halted), no unit be sold twice, and an item created after the restore
// sell out exactly: one item's halt, and the witness, stop no other sale.

// The item-restore-all cell: two items of rewindStock units, each sold by
// rewindRequests requests at rewindConcurrency in flight (fewer than its
// units: a sold-out item would have nothing to sell again); the SAVE once
// both have sold rewindSaveAt. After the restore each replica is asked
// rewindProbes sales of each item directly and nginx rewindThrough; then
// a new item of freshStock units is sold by freshRequests requests.
const (
	rewindStock       = 200
	rewindRequests    = 80
	rewindConcurrency = 4
	rewindSaveAt      = 20
	rewindProbes      = 3
	rewindThrough     = 10
	freshStock        = 40
	freshRequests     = 60
	labItemRewoundA   = "lab-rewound-a"
	labItemRewoundB   = "lab-rewound-b"
	labItemFresh      = "lab-fresh"
)

// runItemRestoreAll stages restore-all on two items and judges what the
// restarted replicas answer: see the file's comment.
func runItemRestoreAll(x *run) error {
	ids := []string{labItemRewoundA, labItemRewoundB}
	all := append(append([]string(nil), ids...), labItemFresh)
	if err := x.dropItems(all...); err != nil {
		return err
	}
	x.undo = append(x.undo, func() error { return x.dropItems(all...) })
	ctx, cancel := x.until()
	defer cancel()

	// The sales, and the SAVE once both items have sold.
	reports, errs := make([]*loadgen.Report, len(ids)), make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		cfg := x.itemRun(id, loadgen.Config{Requests: rewindRequests, Concurrency: rewindConcurrency, Stock: rewindStock})
		wg.Go(func() { reports[i], errs[i] = loadgen.Run(ctx, cfg) })
	}
	saved, serr := x.saveOnceSold(ctx, ids)
	wg.Wait()
	if err := errors.Join(append(errs, serr)...); err != nil {
		return err
	}

	// Each item's books as its run left them, before the fault: they
	// must balance (the judge), and some sales must have been answered
	// 200 after the SAVE, or the restore takes none back.
	lefts := make([][]int64, len(ids))
	afterSave := make([]int, len(ids))
	for i, id := range ids {
		it := x.addItem(id, "rewound", reports[i])
		if !reports[i].OK() {
			x.problemf("%s before the fault: verdict %q", id, it.Verdict)
		}
		for _, a := range reports[i].Answers {
			if a.Outcome != loadgen.OutcomeSold {
				continue
			}
			if a.Left >= 0 {
				lefts[i] = append(lefts[i], a.Left)
			}
			if !a.Sent.Before(saved) {
				afterSave[i]++
			}
		}
		if afterSave[i] == 0 {
			x.problemf("%s sold nothing sent after the SAVE: the restore takes back none of its sales", id)
		}
	}

	// The fault: every stockd new, the Redis back from the snapshot.
	if _, err := x.restartAll(ctx, x.c.Redis(), nil); err != nil {
		return err
	}
	m := x.res.Store
	m.After = map[string]int{}
	for i, id := range ids {
		m.SoldAfterSave += afterSave[i]
		answers, err := x.askItem(ctx, id)
		if err != nil {
			return err
		}
		for _, a := range answers {
			m.After[string(resultOf(a.Result, a.Status))]++
			if a.Outcome == loadgen.OutcomeSold && a.Left >= 0 {
				lefts[i] = append(lefts[i], a.Left)
			}
		}
		m.SoldTwice += soldTwice(lefts[i])
	}
	x.checkAfter(m)
	if err := x.itemsRewound(ctx, ids, reports); err != nil {
		return err
	}

	// A new item: the halted ones, and their witness, stop no new sale.
	rep, err := loadgen.Run(ctx, x.itemRun(labItemFresh, loadgen.Config{Requests: freshRequests, Concurrency: rewindConcurrency, Stock: freshStock}))
	if err != nil {
		return fmt.Errorf("%s after the restore: %w", labItemFresh, err)
	}
	fresh := x.addItem(labItemFresh, "fresh", rep)
	if !rep.OK() || fresh.Sold != freshStock || fresh.Lucky != freshStock || fresh.Stock != 0 || fresh.Errors != 0 {
		x.problemf("%s, created after the restore, did not sell out exactly: verdict %q, sold %d, lucky %d, stock %d, errors %d",
			labItemFresh, fresh.Verdict, fresh.Sold, fresh.Lucky, fresh.Stock, fresh.Errors)
	}
	x.notef("stock Redis and every stockd down %dms; %d sales of the two items answered 200 after the SAVE (%s %d, %s %d), then lost; answers after: %v; %d of %d replicas' /readyz name both halted; %s sold out %d/%d after the restore",
		m.DownMS, m.SoldAfterSave, ids[0], afterSave[0], ids[1], afterSave[1], m.After, m.Rewound, x.c.Replicas(),
		labItemFresh, fresh.Lucky, freshStock)
	return nil
}

// saveOnceSold SAVEs the stock Redis once every item of ids has sold
// rewindSaveAt units, and returns when (x.save: the snapshot and the halt
// are undone after the cell).
func (x *run) saveOnceSold(ctx context.Context, ids []string) (time.Time, error) {
	rdb := redis.NewClient(&redis.Options{Addr: x.c.Redis().Addr()})
	defer rdb.Close()
	for _, id := range ids {
		if _, err := waitSold(ctx, rdb, id, rewindSaveAt); err != nil {
			return time.Time{}, err
		}
	}
	_, srdb, saved, err := x.save(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return saved, srdb.Close()
}

// askItem asks each replica directly for rewindProbes sales of item id,
// then nginx for rewindThrough, and returns every answer; a replica's
// answer other than 503 store_lost is a problem (checkAfter judges them
// all, nginx's too).
func (x *run) askItem(ctx context.Context, id string) ([]loadgen.Response, error) {
	client := loadgen.NewClient(2, 10*time.Second)
	defer client.CloseIdleConnections()
	path := "/items/" + id + "/reduce" // item ids need no escaping (redisstore.CheckItemID)
	var all []loadgen.Response
	for i := range x.c.Replicas() {
		wrong := map[string]int{}
		for _, a := range loadgen.Fire(ctx, client, x.c.ReplicaURL(i)+path, rewindProbes, 1) {
			if a.Result != api.StoreLost || a.Status != http.StatusServiceUnavailable {
				wrong[fmt.Sprintf("%d %s", a.Status, resultOf(a.Result, a.Status))]++
			}
			all = append(all, a)
		}
		if len(wrong) > 0 {
			x.problemf("%s answered sales of %s after the restore %v, want 503 %s", localcluster.ReplicaName(i), id, wrong, api.StoreLost)
		}
	}
	all = append(all, loadgen.Fire(ctx, client, x.c.URL()+path, rewindThrough, 2)...)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sales of %s after the restore: %w", id, err)
	}
	return all, nil
}

// itemsRewound checks that every replica's /readyz names each item of
// ids halted (counted in Store.Rewound), and that GET /items/:id says so
// too, with the snapshot's stock: above what the item's run left, by the
// sales the restore took back.
func (x *run) itemsRewound(ctx context.Context, ids []string, reports []*loadgen.Report) error {
	for i := range x.c.Replicas() {
		name := localcluster.ReplicaName(i)
		_, ready, err := readyz(ctx, x.c.ReplicaURL(i))
		if err != nil {
			return fmt.Errorf("%s /readyz: %w", name, err)
		}
		named := 0
		for _, id := range ids {
			if strings.Contains(ready.Items, id) {
				named++
			}
		}
		if named == len(ids) {
			x.res.Store.Rewound++
		} else {
			x.problemf("%s /readyz items %q, want both of %v halted", name, ready.Items, ids)
		}
	}
	client := loadgen.NewClient(1, 10*time.Second)
	defer client.CloseIdleConnections()
	for i, id := range ids {
		it, err := loadgen.GetItem(ctx, client, x.c.URL(), id)
		if err != nil {
			return fmt.Errorf("GET %s after the restore: %w", id, err)
		}
		if it.State != redisstore.ItemHalted {
			x.problemf("%s after the restore: state %q, want %q", id, it.State, redisstore.ItemHalted)
		}
		if it.Stock <= reports[i].Stock {
			x.problemf("%s after the restore: stock %d, not above the %d its run left: the snapshot took back no sale", id, it.Stock, reports[i].Stock)
		}
		x.notef("%s: stock %d after its run, %d in the snapshot, %s", id, reports[i].Stock, it.Stock, it.State)
	}
	return nil
}
