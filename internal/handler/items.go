package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"seckill/internal/api"
	"seckill/internal/auth"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// items.go: the items' routes. POST /items and POST /items/:id/reset (the
// admin token) make and restart an item, DELETE /items/:id archives it; GET /items and GET /items/:id
// read them; POST /items/:id/reduce is POST /stock/reduce for one item,
// with the same buyer, key and answers, and not_started and ended outside
// the item's window; GET /items/:id/receipts/:attempt settles its
// unconfirmed sales; GET /items/:id/orders/:order, /orders?user= and
// /ledger read its order ledger as GET /orders/:id, /orders and /ledger
// read the default sale's.

// Items is the items of the stock Redis; *redisstore.Items implements it.
type Items interface {
	Create(ctx context.Context, it redisstore.Item) (redisstore.ItemStatus, error)
	Reset(ctx context.Context, it redisstore.Item) (redisstore.ItemStatus, error)
	Status(ctx context.Context, id string) (redisstore.ItemStatus, error)
	List(ctx context.Context) ([]redisstore.Item, error)
	ReduceFor(ctx context.Context, id string, b stock.Buyer) (stock.Sale, error)
	Receipt(ctx context.Context, id, attempt string) (stockAfter int64, sold bool, err error)
	// Orders is item id's order ledger.
	Orders(ctx context.Context, id string) (stock.OrderReader, error)
	// Archive stops item id's sales for good and frees its place in the
	// registry, keeping its books and orders.
	Archive(ctx context.Context, id string) (redisstore.ItemStatus, error)
	// Unlatch lifts item id's window latch set in error (a forward step
	// of the stock Redis's clock within stock.max_clock_skew), recording
	// who did it.
	Unlatch(ctx context.Context, id, by string) (redisstore.ItemStatus, error)
}

// errBadItemBody marks every client mistake in an item's body (→ 400).
var errBadItemBody = errors.New("bad item body")

func (a *server) createItem(c *gin.Context) {
	a.putItem(c, true)
}

func (a *server) resetItem(c *gin.Context) {
	a.putItem(c, false)
}

// putItem is POST /items (create) and POST /items/:id/reset.
func (a *server) putItem(c *gin.Context, create bool) {
	if !a.admit(c) || !a.itemsOn(c) {
		return
	}
	id := c.Param("id")
	if !create && !a.itemID(c, id) {
		return
	}
	body, ok := a.adminBody(c, "item")
	if !ok {
		return
	}
	it, err := parseItem(body, id)
	if err != nil {
		a.problem(c, http.StatusBadRequest, err.Error())
		return
	}
	if it.PerUserLimit > 0 && a.cfg.Buyers.Mode == auth.ModeNone {
		a.problem(c, http.StatusBadRequest, "per_user_limit needs named buyers, and auth.buyers is none here: every sale is anonymous")
		return
	}
	put, what, status := a.deps.Items.Reset, "reset", http.StatusOK
	if create {
		put, what, status = a.deps.Items.Create, "created", http.StatusCreated
	}
	st, err := put(c.Request.Context(), it)
	if err != nil {
		a.itemFail(c, err)
		return
	}
	a.deps.Logger.Info("item "+what, "item", it.ID, "stock", it.Stock, "starts_at", it.StartsAt, "ends_at", it.EndsAt,
		"per_user_limit", it.PerUserLimit, "remote", c.ClientIP())
	a.json(c, status, itemAnswer(st))
}

// archiveItem is DELETE /items/:id (the admin token): the item sells no
// more (410 to its buyers) and leaves the registry's bound, while
// GET /items/:id, its receipts, orders and ledger stay readable.
func (a *server) archiveItem(c *gin.Context) {
	id := c.Param("id")
	if !a.admit(c) || !a.itemsOn(c) || !a.itemID(c, id) {
		return
	}
	st, err := a.deps.Items.Archive(c.Request.Context(), id)
	if err != nil {
		a.itemFail(c, err)
		return
	}
	a.deps.Logger.Info("item archived", "item", id, "stock", st.Stock, "lucky", st.Lucky, "remote", c.ClientIP())
	a.json(c, http.StatusOK, itemAnswer(st))
}

// unlatchItem is POST /items/:id/unlatch (the admin token), body
// {"by":"who"}: an item ended early for good by a clock step (its end
// latch, window.lua) sells again, once the stock Redis's clock is right
// (redisstore.Items.Unlatch). 409 when the window has ended by that clock now.
func (a *server) unlatchItem(c *gin.Context) {
	id := c.Param("id")
	if !a.admit(c) || !a.itemsOn(c) || !a.itemID(c, id) {
		return
	}
	by, ok := a.adminBy(c, "unlatch")
	if !ok {
		return
	}
	st, err := a.deps.Items.Unlatch(c.Request.Context(), id, by)
	if err != nil {
		a.itemFail(c, err)
		return
	}
	a.deps.Logger.Warn("item window unlatched", "item", id, "by", by, "state", st.State, "remote", c.ClientIP())
	a.json(c, http.StatusOK, itemAnswer(st))
}

func (a *server) item(c *gin.Context) {
	id := c.Param("id")
	if !a.itemsOn(c) || !a.itemID(c, id) {
		return
	}
	st, err := a.deps.Items.Status(c.Request.Context(), id)
	if err != nil {
		a.itemFail(c, err)
		return
	}
	a.json(c, http.StatusOK, itemAnswer(st))
}

func (a *server) items(c *gin.Context) {
	if !a.itemsOn(c) {
		return
	}
	list, err := a.deps.Items.List(c.Request.Context())
	if err != nil {
		a.itemFail(c, err)
		return
	}
	body := &api.Items{Items: make([]api.ItemSettings, 0, len(list))}
	for _, it := range list {
		body.Items = append(body.Items, api.ItemSettings{ID: it.ID, Stock: it.Stock, StartsAt: it.StartsAt,
			EndsAt: it.EndsAt, PerUserLimit: it.PerUserLimit})
	}
	a.json(c, http.StatusOK, body)
}

// itemSale is the routes of item :id's sale; false when a refusal (items
// off, a bad id) is answered.
func (a *server) itemSale(c *gin.Context) (saleOn, bool) {
	id := c.Param("id")
	if !a.itemsOn(c) || !a.itemID(c, id) {
		return saleOn{}, false
	}
	return saleOn{
		reduce: func(ctx context.Context, b stock.Buyer) (stock.Sale, error) {
			return a.deps.Items.ReduceFor(ctx, id, b)
		},
		receipt: func(ctx context.Context, attempt string) (int64, bool, error) {
			return a.deps.Items.Receipt(ctx, id, attempt)
		},
		receipts: "/items/" + id + "/receipts/",
		fail:     a.itemFail,
	}, true
}

func (a *server) reduceItem(c *gin.Context) {
	if s, ok := a.itemSale(c); ok {
		a.sell(c, s) // POST only, as /stock/reduce
	}
}

func (a *server) itemReceipt(c *gin.Context) {
	if s, ok := a.itemSale(c); ok {
		a.readReceipt(c, s)
	}
}

// itemOrders is item :id's order ledger and its durable copy (nil:
// none); false when the refusal is answered.
func (a *server) itemOrders(c *gin.Context) (stock.OrderReader, DurableOrders, bool) {
	id := c.Param("id")
	if !a.itemsOn(c) || !a.itemID(c, id) {
		return nil, nil, false
	}
	r, err := a.deps.Items.Orders(c.Request.Context(), id)
	if err != nil {
		a.itemFail(c, err)
		return nil, nil, false
	}
	var d DurableOrders
	if a.deps.ItemsDurable != nil {
		d = a.deps.ItemsDurable(id)
	}
	return r, d, true
}

// itemOrder is GET /items/:id/orders/:order, as GET /orders/:id.
func (a *server) itemOrder(c *gin.Context) {
	if r, d, ok := a.itemOrders(c); ok {
		a.readOrder(c, r, d, c.Param("order"))
	}
}

// itemOrdersByUser is GET /items/:id/orders?user=, as GET /orders.
func (a *server) itemOrdersByUser(c *gin.Context) {
	if r, d, ok := a.itemOrders(c); ok {
		a.readOrders(c, r, d)
	}
}

// itemLedger is GET /items/:id/ledger, as GET /ledger.
func (a *server) itemLedger(c *gin.Context) {
	if r, d, ok := a.itemOrders(c); ok {
		a.readLedger(c, r, d)
	}
}

// itemsOn answers 404 when this replica has no items.
func (a *server) itemsOn(c *gin.Context) bool {
	if a.deps.Items == nil {
		a.problem(c, http.StatusNotFound, "items are off on this replica")
		return false
	}
	return true
}

// itemID answers 400 for a malformed item id.
func (a *server) itemID(c *gin.Context, id string) bool {
	if err := redisstore.CheckItemID(id); err != nil {
		a.problem(c, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

// itemFail answers an item call's error: its refusals (itemProblem) with
// what they say, the rest as any failed call.
func (a *server) itemFail(c *gin.Context, err error) {
	if status, ok := itemProblem(err); ok {
		a.problem(c, status, err.Error())
		return
	}
	if errors.Is(err, redisstore.ErrNotReplicated) {
		a.deps.Logger.Warn("item reset not acknowledged by the replicas", "path", c.Request.URL.Path, "err", err)
		a.problem(c, http.StatusServiceUnavailable,
			"not acknowledged by enough replicas in time (stock.min_replica_acks); a failover could lose it: send it again")
		return
	}
	a.fail(c, err)
}

func itemAnswer(st redisstore.ItemStatus) *api.Item {
	return &api.Item{
		ID: st.Item.ID, Stock: st.Stock, Lucky: st.Lucky, Initial: st.Initial, StartsAt: st.StartsAt, EndsAt: st.EndsAt,
		PerUserLimit: st.PerUserLimit, State: st.State, SoldOut: st.SoldOut, Now: st.Now, ArchivedAt: st.ArchivedAt,
	}
}

// itemFields are the fields of an item's body; "id" only in POST /items's.
var itemFields = []string{"id", "stock", "starts_at", "ends_at", "per_user_limit"}

// parseItem reads an item's settings, {"id":"x","stock":100,"starts_at":T,
// "ends_at":T,"per_user_limit":0}: stock required, id too unless pathID
// names the item (POST /items/:id/reset), the rest optional. A time
// is unix ms, or an RFC 3339 string; 0 (or absent) is no bound. As strict
// as parseReset, and for the same reason: an unknown or repeated field,
// trailing data or a number that is not an integer are refused rather
// than read as something the admin did not mean. The item's rules
// (redisstore.Item.Check) are checked too: every refusal wraps errBadItemBody
// or stock.ErrBadItem, a 400.
func parseItem(body []byte, pathID string) (redisstore.Item, error) {
	fields, err := strictObject(body, itemFields, pathID == "")
	if err != nil {
		return redisstore.Item{}, err
	}
	it := redisstore.Item{ID: pathID}
	if raw, ok := fields["id"]; ok {
		if err := json.Unmarshal(raw, &it.ID); err != nil {
			return redisstore.Item{}, fmt.Errorf("%w: \"id\" must be a string, got %.40s", errBadItemBody, raw)
		}
	} else if pathID == "" {
		return redisstore.Item{}, fmt.Errorf("%w: field \"id\" is required", errBadItemBody)
	}
	raw, ok := fields["stock"]
	if !ok {
		return redisstore.Item{}, fmt.Errorf("%w: field \"stock\" is required", errBadItemBody)
	}
	if it.Stock, err = itemInt("stock", raw); err != nil {
		return redisstore.Item{}, err
	}
	if raw, ok := fields["per_user_limit"]; ok {
		n, err := itemInt("per_user_limit", raw)
		if err != nil {
			return redisstore.Item{}, err
		}
		it.PerUserLimit = int(n)
	}
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"starts_at", &it.StartsAt}, {"ends_at", &it.EndsAt}} {
		if raw, ok := fields[f.name]; ok {
			if *f.dst, err = itemTime(f.name, raw); err != nil {
				return redisstore.Item{}, err
			}
		}
	}
	if err := it.Check(); err != nil {
		return redisstore.Item{}, err // stock.ErrBadItem: says what is wrong
	}
	return it, nil
}

// strictObject reads body as one JSON object whose keys are among
// allowed, each at most once ("id" only when withID), token by token as
// parseReset does.
func strictObject(body []byte, allowed []string, withID bool) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	notObject := func(err error) error {
		return fmt.Errorf("%w: want a JSON object like {\"stock\":100,\"starts_at\":\"2030-01-02T10:00:00Z\"}: %v", errBadItemBody, err)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		if err == nil {
			err = fmt.Errorf("got %v", tok)
		}
		return nil, notObject(err)
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notObject(err)
		}
		key, _ := tok.(string)
		if !slices.Contains(allowed, key) || (key == "id" && !withID) {
			known := slices.DeleteFunc(slices.Clone(allowed), func(f string) bool { return f == "id" && !withID })
			return nil, fmt.Errorf("%w: unknown field %q (known: %s)", errBadItemBody, key, strings.Join(known, ", "))
		}
		if _, dup := fields[key]; dup {
			return nil, fmt.Errorf("%w: duplicate field %q", errBadItemBody, key)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, notObject(err)
		}
		fields[key] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, notObject(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: unexpected data after the JSON object", errBadItemBody)
	}
	return fields, nil
}

// itemInt reads field name as a JSON integer in 0..redisstore.MaxStock.
func itemInt(name string, raw json.RawMessage) (int64, error) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 || n > redisstore.MaxStock {
		return 0, fmt.Errorf("%w: %q must be an integer in 0..%d, got %.40s", errBadItemBody, name, int64(redisstore.MaxStock), raw)
	}
	return n, nil
}

// itemTime reads field name as unix ms (a JSON integer, 0 or more) or an
// RFC 3339 string, as unix ms.
func itemTime(name string, raw json.RawMessage) (int64, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("%w: %q: %v", errBadItemBody, name, err)
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || t.UnixMilli() <= 0 {
			return 0, fmt.Errorf("%w: %q must be unix ms or an RFC 3339 time after 1970 (2030-01-02T10:00:00Z), got %.40q", errBadItemBody, name, s)
		}
		return t.UnixMilli(), nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %q must be unix ms (an integer, 0 for no bound) or an RFC 3339 string, got %.40s", errBadItemBody, name, raw)
	}
	return n, nil
}
