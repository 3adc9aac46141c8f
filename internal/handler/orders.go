package handler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"seckill/internal/api"
	"seckill/internal/auth"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// orders.go: the buyer's headers on a sale, and the ledger's read side
// (GET /orders/:id, GET /orders?user=, GET /ledger; an item's under
// /items/:id, items.go).

// Headers naming the buyer and the request on POST /stock/reduce.
const (
	HeaderUser           = "X-User"
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on an answer that repeats an earlier
	// sale with the same Idempotency-Key (the IETF idempotency draft's
	// convention, as Stripe's API has it).
	HeaderReplayed = "Idempotent-Replayed"
)

// Paging of GET /orders?user=.
const (
	defaultOrdersLimit = 50
	maxOrdersLimit     = 500
)

// maxOrderIDLen bounds an order id in a path: order ids are attempt ids,
// 64 is far above theirs (and what GET /stock/receipts/:attempt allows).
const maxOrderIDLen = 64

// DurableOrders reports the ledger's durable copy (orders.durable); the
// orders consumer implements it.
type DurableOrders interface {
	// Durable is how many orders of the sale are stored.
	Durable(ctx context.Context, sale string) (int64, error)
	// Lag is how many ledger entries are not yet stored.
	Lag(ctx context.Context) (int64, error)
	// Orders reads sale's orders with ids, the ones found, in the order
	// of ids: the orders the ledger in Redis no longer holds (trimmed
	// once stored).
	Orders(ctx context.Context, sale string, ids []string) ([]stock.Order, error)
}

// errDurableDown: an order the ledger in Redis no longer holds could not
// be read from the durable copy (MySQL down or slow).
var errDurableDown = errors.New("durable orders unavailable")

// buyer is the sale's buyer and key: the buyer as Config.Buyers finds it
// (401 when a credential is refused or one is required), the key from
// Idempotency-Key (400 when malformed). A 401 says what to fix; it names
// nothing of the keys.
func (a *server) buyer(c *gin.Context) (stock.Buyer, int, string) {
	user, status, msg := a.identify(c, true)
	if msg != "" {
		return stock.Buyer{}, status, msg
	}
	key, msg := identity(c.Request.Header, HeaderIdempotencyKey, stock.MaxKeyLen)
	if msg != "" {
		return stock.Buyer{}, http.StatusBadRequest, msg
	}
	return stock.Buyer{User: user, Key: key}, 0, ""
}

// identify is the request's authenticated buyer, "" for none; a sale's
// (auth.required applies) or a read's.
func (a *server) identify(c *gin.Context, sale bool) (string, int, string) {
	id := a.cfg.Buyers
	unauthorized := func(err error) (string, int, string) {
		// Every 401 carries its challenge (RFC 9110), whatever the mode:
		// a buyer header the mode does not take is refused as much as a
		// bad token.
		challenge(c, err)
		return "", http.StatusUnauthorized, err.Error()
	}
	who := id.Caller
	if sale {
		who = id.Buyer
	}
	user, err := who(c.Request)
	if err != nil {
		return unauthorized(err)
	}
	_, header := c.Request.Header[auth.HeaderBuyer]
	switch {
	case id.Mode == auth.ModeProxy && header:
		// The gateway's header, held to the rules of any header.
		b, msg := buyerHeaders(c.Request.Header)
		if msg != "" {
			return "", http.StatusBadRequest, msg
		}
		user = b.User
	case user != "":
		if msg := checkIdentity("the token's sub", user, stock.MaxUserLen); msg != "" {
			return unauthorized(fmt.Errorf("%w: %s (it names the buyer)", auth.ErrUnauthenticated, msg))
		}
	}
	return user, 0, ""
}

// buyerHeaders reads X-User and Idempotency-Key. An absent header is no buyer or
// no key; a header that is present must be valid (a buyer whose id is
// silently dropped would escape the per-user limit), so an empty, repeated
// or malformed one is a problem text for a 400.
func buyerHeaders(h http.Header) (stock.Buyer, string) {
	user, msg := identity(h, HeaderUser, stock.MaxUserLen)
	if msg != "" {
		return stock.Buyer{}, msg
	}
	key, msg := identity(h, HeaderIdempotencyKey, stock.MaxKeyLen)
	if msg != "" {
		return stock.Buyer{}, msg
	}
	return stock.Buyer{User: user, Key: key}, ""
}

// identity reads one identity header: absent is "", otherwise exactly one
// value of 1..max printable ASCII characters with no space.
func identity(h http.Header, name string, max int) (string, string) {
	vs := h.Values(name)
	switch {
	case len(vs) == 0:
		return "", ""
	case len(vs) > 1:
		return "", name + " given more than once"
	}
	if vs[0] == "" {
		return "", name + " is empty: send 1.." + strconv.Itoa(max) + " printable ASCII characters without spaces, or no " + name
	}
	if msg := checkIdentity(name, vs[0], max); msg != "" {
		return "", msg
	}
	return vs[0], ""
}

// checkIdentity says what is wrong with v as a buyer id or key, "" if
// nothing: 1..max bytes, each printable ASCII other than space (what every
// store of the ledger keeps and every log line shows unescaped).
func checkIdentity(name, v string, max int) string {
	if v == "" {
		return name + " is empty: want 1.." + strconv.Itoa(max) + " printable ASCII characters without spaces"
	}
	if len(v) > max {
		return name + " longer than " + strconv.Itoa(max) + " characters"
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] > '~' {
			return name + " must be printable ASCII with no spaces"
		}
	}
	return ""
}

// ledgerOff answers a ledger read when the ledger is off.
func (a *server) ledgerOff(c *gin.Context) {
	a.problem(c, http.StatusNotFound, "the order ledger is off (stock.ledger: false)")
}

// ledgerFail answers a failed ledger read: ErrNoLedger and ErrNoOrder are
// 404s, everything else goes through the usual failure mapping (503 when
// Redis is down).
func (a *server) ledgerFail(c *gin.Context, err error, id string) {
	switch {
	case errors.Is(err, stock.ErrNoLedger):
		a.ledgerOff(c)
	case errors.Is(err, stock.ErrNoOrder):
		a.problem(c, http.StatusNotFound, "no such order: "+id)
	case errors.Is(err, stock.ErrOrderFormat):
		// Read, but of a newer format (from the ledger or the durable
		// copy): this replica's, not the store's, fault.
		a.fail(c, err)
	case errors.Is(err, errDurableDown):
		// Not a 404: the order may well be there, in MySQL.
		a.problem(c, http.StatusServiceUnavailable, "the durable orders (MySQL) are unavailable: try again")
	default:
		a.fail(c, err)
	}
}

// order answers GET /orders/:id.
func (a *server) order(c *gin.Context) {
	if a.deps.Orders == nil {
		a.ledgerOff(c)
		return
	}
	o, ok := a.ownOrder(c, a.deps.Orders, a.deps.Durable, c.Param("id"))
	if !ok {
		return
	}
	body := &orderBody{apiOrder(o)}
	if a.deps.Reservations != nil {
		// With reservations the order's state is part of it: a buyer
		// whose sale was replayed learns its deadline here.
		state, payBy, err := a.deps.Reservations.OrderState(c.Request.Context(), o.ID)
		switch {
		case errors.Is(err, redisstore.ErrNoReservation): // sold without a window: final
		case err != nil:
			a.fail(c, err)
			return
		default:
			body.State, body.PayBy = state, payBy
		}
	}
	a.json(c, http.StatusOK, body)
}

// readOrder answers a read of order id from the ledger r, and from its
// durable copy d (nil: none) once trimmed from r.
func (a *server) readOrder(c *gin.Context, r stock.OrderReader, d DurableOrders, id string) {
	o, ok := a.ownOrder(c, r, d, id)
	if !ok {
		return
	}
	a.json(c, http.StatusOK, &orderBody{apiOrder(o)})
}

// lookupOrder reads order id from the ledger r, or from its durable copy
// d (nil: none) once trimmed from r, for whoever may read it.
func (a *server) lookupOrder(c *gin.Context, r stock.OrderReader, d DurableOrders, id string) (stock.Order, error) {
	o, err := r.Order(c.Request.Context(), id)
	if errors.Is(err, stock.ErrNoOrder) && d != nil {
		o, err = a.storedOrder(c, r, d, id)
	}
	return o, err
}

// ownOrder reads order id for its buyer, or the admin (an anonymous
// order, for whoever holds its id), from the ledger r or its durable copy
// d; ok false when the refusal is answered. Another buyer's order is no
// order: a 403 would tell that the id exists.
func (a *server) ownOrder(c *gin.Context, r stock.OrderReader, d DurableOrders, id string) (stock.Order, bool) {
	if len(id) > maxOrderIDLen {
		a.problem(c, http.StatusBadRequest, "order id too long")
		return stock.Order{}, false
	}
	admin, user, ok := a.reader(c)
	if !ok {
		return stock.Order{}, false
	}
	o, err := a.lookupOrder(c, r, d, id)
	if err == nil && o.User != "" && o.User != user && !admin {
		err = stock.ErrNoOrder
	}
	if err != nil {
		a.ledgerFail(c, err, id)
		return stock.Order{}, false
	}
	return o, true
}

// reader is who reads orders: the admin (the right admin token) or a
// buyer ("" for none); ok false when the refusal is answered. Reads are no
// way around the admin bound (whether another buyer's order answers 200
// or 404 would tell a guesser its admin token was right), so a wrong admin
// token is a failed admin attempt here too: X-Admin-Token, or a bearer
// token that is no buyer's credential. A refused buyer token is the
// buyer's 401 and spends nothing of the bound: a buyer with an expired
// token must not slow the admin.
func (a *server) reader(c *gin.Context) (admin bool, user string, ok bool) {
	o, err := a.adminOffer(c.Request)
	switch {
	case err == nil && a.rightToken(o.token):
		return true, "", true
	case err != nil:
		challenge(c, err)
		a.problem(c, http.StatusUnauthorized, err.Error())
		return false, "", false
	case o.token != "" && !o.buyer:
		a.wrongAdmin(c, "bad admin token")
		return false, "", false
	}
	user, status, msg := a.identify(c, false)
	if msg != "" {
		a.problem(c, status, msg)
		return false, "", false
	}
	return false, user, true
}

// orderBody is the answer of GET /orders/:id. Its "replica" is the order's
// own (the replica that sold it), not the answering one's, which the
// X-Replica header carries as on every answer.
type orderBody struct {
	api.Order
}

// SetReplica keeps the order's replica (the one that sold it).
func (*orderBody) SetReplica(string) {}

// orders answers GET /orders?user=U&offset=O&limit=L: one page of U's
// orders, oldest first. A buyer reads its own (user defaults to it);
// another's, or any with no buyer named, take the admin token.
func (a *server) orders(c *gin.Context) {
	if a.deps.Orders == nil {
		a.ledgerOff(c)
		return
	}
	a.readOrders(c, a.deps.Orders, a.deps.Durable)
}

// readOrders answers a read of one buyer's orders from the ledger r, and
// from its durable copy d (nil: none) for those trimmed from r.
func (a *server) readOrders(c *gin.Context, r stock.OrderReader, d DurableOrders) {
	user, asked := c.GetQuery("user")
	if asked {
		if msg := checkIdentity("user", user, stock.MaxUserLen); msg != "" {
			a.problem(c, http.StatusBadRequest, msg)
			return
		}
	}
	admin, me, ok := a.reader(c)
	if !ok {
		return
	}
	if !admin {
		switch {
		case me == "" && asked:
			// Counted by admit: a guesser of the admin token is slowed.
			if !a.admit(c) {
				return
			}
		case me == "":
			a.problem(c, http.StatusUnauthorized, "no buyer: GET /orders lists the authenticated buyer's own orders")
			return
		case asked && user != me:
			a.problem(c, http.StatusForbidden, "another buyer's orders need the admin token")
			return
		default:
			user = me
		}
	} else if !asked {
		a.problem(c, http.StatusBadRequest, "user is required with the admin token: GET /orders?user=<buyer>")
		return
	}
	offset, msg := queryInt(c, "offset", 0, 0, maxOffset)
	if msg != "" {
		a.problem(c, http.StatusBadRequest, msg)
		return
	}
	limit, msg := queryInt(c, "limit", defaultOrdersLimit, 1, maxOrdersLimit)
	if msg != "" {
		a.problem(c, http.StatusBadRequest, msg)
		return
	}
	list, total, err := r.OrdersByUser(c.Request.Context(), user, offset, limit)
	if err != nil {
		a.ledgerFail(c, err, "")
		return
	}
	if list, err = a.storedOrders(c, d, list); err != nil {
		a.ledgerFail(c, err, "")
		return
	}
	body := &api.Orders{Orders: make([]api.Order, 0, len(list)), Total: total, User: user}
	for _, o := range list {
		body.Orders = append(body.Orders, apiOrder(o))
	}
	a.json(c, http.StatusOK, body)
}

// maxOffset keeps an offset an int on every platform the store pages with.
const maxOffset = 1<<31 - 1

// queryInt reads an optional integer query parameter in [lo, hi].
func queryInt(c *gin.Context, name string, def, lo, hi int) (int, string) {
	v, ok := c.GetQuery(name)
	if !ok {
		return def, ""
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, name + " must be an integer from " + strconv.Itoa(lo) + " to " + strconv.Itoa(hi)
	}
	return n, ""
}

// ledger answers GET /ledger: the ledger's counts at one instant, and the
// durable copy's when orders.durable is on. A durable count that cannot be
// read within Config.ProbeTimeout (MySQL down) is left out, and logged, rather than failing the
// answer: the ledger itself lives in Redis and is still right, and /info
// says whether durable was expected.
func (a *server) ledger(c *gin.Context) {
	if a.deps.Orders == nil {
		a.ledgerOff(c)
		return
	}
	a.readLedger(c, a.deps.Orders, a.deps.Durable)
}

// readLedger answers a read of the ledger r's counts, and of its durable
// copy d's when d is not nil.
func (a *server) readLedger(c *gin.Context, r stock.OrderReader, d DurableOrders) {
	// Every buyer's counts: the operator's, not the public's.
	if !a.admit(c) {
		return
	}
	ctx := c.Request.Context()
	st, err := r.LedgerStats(ctx)
	if err != nil {
		a.ledgerFail(c, err, "")
		return
	}
	body := &api.Ledger{Buyers: st.Buyers, Lucky: st.Lucky, Orders: st.Orders, Sale: st.Sale}
	if d != nil {
		// Each read bounded like a /readyz probe: a stalled MySQL must
		// not hold the answer, whose ledger part is ready, nor the lag,
		// which Redis answers.
		body.Durable = a.durableRead(c, "durable", func(ctx context.Context) (int64, error) { return d.Durable(ctx, st.Sale) })
		body.Lag = a.durableRead(c, "lag", d.Lag)
	}
	a.json(c, http.StatusOK, body)
}

// storedOrder is order id of the current sale from the durable copy: the
// ledger in Redis has none, as it has for no order once it is stored and
// trimmed. ErrNoOrder if the copy has none either; errDurableDown if it
// cannot be read within the probe timeout.
func (a *server) storedOrder(c *gin.Context, r stock.OrderReader, d DurableOrders, id string) (stock.Order, error) {
	st, err := r.LedgerStats(c.Request.Context())
	if err != nil {
		return stock.Order{}, err
	}
	found, err := a.readStored(c, d, st.Sale, []string{id})
	if err != nil {
		return stock.Order{}, err
	}
	if len(found) != 1 {
		return stock.Order{}, fmt.Errorf("%w: %q", stock.ErrNoOrder, id)
	}
	return found[0], nil
}

// storedOrders fills in the orders of list the ledger in Redis lists by id
// alone (trimmed once stored) from the durable copy. Without one (or for
// an id it has no row of: an order a unique key refused), they are left
// out, as the ledger has nothing else to show of them.
func (a *server) storedOrders(c *gin.Context, d DurableOrders, list []stock.Order) ([]stock.Order, error) {
	var ids []string
	sale := ""
	for _, o := range list {
		if o.Trimmed() {
			ids, sale = append(ids, o.ID), o.Sale
		}
	}
	if len(ids) == 0 {
		return list, nil
	}
	byID := map[string]stock.Order{}
	if d != nil {
		found, err := a.readStored(c, d, sale, ids)
		if err != nil {
			return nil, err
		}
		for _, o := range found {
			byID[o.ID] = o
		}
	}
	out := list[:0]
	for _, o := range list {
		if o.Trimmed() {
			var ok bool
			if o, ok = byID[o.ID]; !ok {
				continue
			}
		}
		out = append(out, o)
	}
	return out, nil
}

// readStored reads orders from the durable copy, bounded like a /readyz
// probe (as durableRead): a stalled MySQL must not hold the answer. A
// failure is logged (at most once a second) and is errDurableDown.
func (a *server) readStored(c *gin.Context, d DurableOrders, sale string, ids []string) ([]stock.Order, error) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), a.cfg.ProbeTimeout)
	defer cancel()
	found, err := d.Orders(ctx, sale, ids)
	if err != nil {
		if ok, suppressed := a.logs.Allow("orders_durable"); ok {
			a.deps.Logger.Warn("orders: could not read trimmed orders from the durable copy",
				"path", c.Request.URL.Path, "n", len(ids), "err", err, "suppressed", suppressed)
		}
		return nil, fmt.Errorf("%w: %w", errDurableDown, err)
	}
	return found, nil
}

// durableRead makes one read of the durable copy within the probe
// timeout; nil when it failed (logged, at most once a second per kind).
func (a *server) durableRead(c *gin.Context, what string, read func(context.Context) (int64, error)) *int64 {
	ctx, cancel := context.WithTimeout(c.Request.Context(), a.cfg.ProbeTimeout)
	defer cancel()
	n, err := read(ctx)
	if err != nil {
		if ok, suppressed := a.logs.Allow("ledger_" + what); ok {
			a.deps.Logger.Warn("ledger: could not read the durable orders", "what", what,
				"path", c.Request.URL.Path, "err", err, "suppressed", suppressed)
		}
		return nil
	}
	return &n
}

// apiOrder is o as the API shows it.
func apiOrder(o stock.Order) api.Order {
	return api.Order{
		Entry: o.Entry, ID: o.ID, Key: o.Key, Replica: o.Replica, Sale: o.Sale,
		StockAfter: o.StockAfter, Time: o.Time.UTC().Format(orderTime), Token: o.Token, Unit: o.Unit, User: o.User,
	}
}

// orderTime is RFC 3339 with milliseconds, the ledger's resolution.
const orderTime = "2006-01-02T15:04:05.000Z07:00"
