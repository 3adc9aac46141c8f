package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"seckill/internal/api"
)

// items.go: the items' table (docs/items.md). Items live in the stock
// Redis, so any replica answers for all of them: the first replica that
// answers GET /items names them, and GET /items/:id gives each one's
// books and state by Redis's clock. They are read at most every
// itemsEvery, not every poll: the table is for a person, and a sale of
// many items should not pay for it several times a second.

// MaxItems is the most items the table shows; Items.More counts the rest.
const MaxItems = 12

// itemsEvery bounds how often the items are read.
const itemsEvery = time.Second

// Items is the items' table.
type Items struct {
	// Off: the replicas have no items (GET /items answers 404).
	Off   bool       `json:"off"`
	Items []ItemView `json:"items"`
	More  int        `json:"more"` // items past MaxItems, not shown
	Error string     `json:"error,omitempty"`
}

// ItemView is one item's row.
type ItemView struct {
	ID      string `json:"id"`
	State   string `json:"state"` // upcoming, open, ended, halted (GET /items/:id)
	Stock   int64  `json:"stock"`
	Lucky   int64  `json:"lucky"`
	Initial int64  `json:"initial"`
	SoldOut bool   `json:"sold_out"`
	// Oversold: stock + lucky != initial, or a negative stock.
	Oversold bool   `json:"oversold"`
	Error    string `json:"error,omitempty"`
}

// itemsDue reports whether the items are due for a read at now, and
// marks them read.
func (a *Aggregator) itemsDue(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now.Sub(a.itemsAt) < cmp.Or(a.itemsEvery, itemsEvery) {
		return false
	}
	a.itemsAt = now
	return true
}

// readItems reads the items from the first replica that answers GET
// /items.
func (a *Aggregator) readItems(ctx context.Context) Items {
	var list api.Items
	var errs []error
	for _, base := range a.cfg.Replicas {
		code, err := a.getJSON(ctx, base+"/items", &list)
		switch {
		case err == nil && code == http.StatusNotFound:
			return Items{Off: true}
		case err == nil && code == http.StatusOK:
			return a.readEachItem(ctx, base, list.Items)
		case err == nil:
			err = fmt.Errorf("GET /items: %d", code)
		}
		errs = append(errs, err)
	}
	return Items{Error: fmt.Sprint(errs[0])}
}

func (a *Aggregator) readEachItem(ctx context.Context, base string, list []api.ItemSettings) Items {
	out := Items{Items: make([]ItemView, min(len(list), MaxItems)), More: max(len(list)-MaxItems, 0)}
	var wg sync.WaitGroup
	for i := range out.Items {
		id := list[i].ID
		wg.Go(func() {
			v := ItemView{ID: id}
			var it api.Item
			code, err := a.getJSON(ctx, base+"/items/"+url.PathEscape(id), &it)
			switch {
			case err != nil:
				v.Error = err.Error()
			case code != http.StatusOK:
				v.Error = fmt.Sprintf("GET /items/%s: %d", id, code)
			default:
				v.State, v.Stock, v.Lucky, v.Initial, v.SoldOut = it.State, it.Stock, it.Lucky, it.Initial, it.SoldOut
				v.Oversold = it.Stock < 0 || it.Stock+it.Lucky != it.Initial
			}
			out.Items[i] = v
		})
	}
	wg.Wait()
	return out
}
