package handler

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"seckill/internal/api"
	"seckill/internal/orders"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// reservations.go: POST /orders/:id/pay and POST /orders/:id/cancel, the
// ends of a reserved order (orders.payment_window; docs/reservations.md).
// Each end is one script in the stock Redis (redisstore's lifecycle), so
// a race between two of them has one outcome and the loser is answered
// the state that won.

// Reservations ends reserved orders (redisstore.Store).
type Reservations interface {
	Pay(ctx context.Context, id, paymentID string) (redisstore.Ending, error)
	Cancel(ctx context.Context, id string) (redisstore.Ending, error)
	// OrderState is the order's state and, reserved, its pay_by (unix
	// ms); redisstore.ErrNoReservation for an order without one.
	OrderState(ctx context.Context, id string) (state string, payBy int64, err error)
	// Census counts every order by state beside the counters, at one
	// instant (GET /stock/reservations).
	Census(ctx context.Context) (redisstore.Census, error)
}

// DurableEnds stores orders' ends in MySQL (orders.Ends).
type DurableEnds interface {
	Record(ctx context.Context, ends []redisstore.End) error
}

// census is GET /stock/reservations, the admin's: the reservations'
// census and the invariants it breaks. It reads every order's state, so
// it is an audit, not a buyer's route.
func (a *server) census(c *gin.Context) {
	if !a.admit(c) {
		return
	}
	if a.deps.Reservations == nil {
		a.problem(c, http.StatusNotFound, "no reservations: orders.payment_window is 0, a unit sold is final")
		return
	}
	cs, err := a.deps.Reservations.Census(c.Request.Context())
	if err != nil {
		a.fail(c, err)
		return
	}
	problems := append([]string{}, cs.Problems()...)
	a.json(c, http.StatusOK, &api.Census{
		Cancelled: cs.Cancelled, Expired: cs.Expired, Initial: cs.Initial, Lucky: cs.Lucky, OK: len(problems) == 0,
		Other: cs.Other, Paid: cs.Paid, Problems: problems, Reserved: cs.Reserved, Returned: cs.Returned, Stock: cs.Stock,
	})
}

// pay is POST /orders/:id/pay {"payment_id":".."}, by the order's buyer or
// the admin: paid while its deadline holds; a payment that meets an order
// no longer reserved is answered 200 with the order's state and a refund
// owed, not refused, since its money was taken.
func (a *server) pay(c *gin.Context) {
	if c.GetHeader(HeaderPaymentSignature) != "" {
		a.providerPay(c)
		return
	}
	o, ok := a.reservedOrder(c)
	if !ok {
		return
	}
	body, ok := a.adminBody(c, "payment")
	if !ok {
		return
	}
	a.payOrder(c, o.ID, body)
}

// payOrder pays order id with the payment body names, and answers.
func (a *server) payOrder(c *gin.Context, id string, body []byte) {
	pid, err := parsePayment(body)
	if err != nil {
		a.problem(c, http.StatusBadRequest, err.Error())
		return
	}
	e, err := a.deps.Reservations.Pay(c.Request.Context(), id, pid)
	if err == nil && e.State == redisstore.StatePaid && !e.Refund && a.deps.Ends != nil {
		// Paid is money: its 200 says MySQL holds it, not only Redis. A
		// payment sent again pays nothing twice (idempotent by its id),
		// so a 503 here is safe to retry; the syncer stores it anyway.
		end := redisstore.End{Order: id, State: redisstore.StatePaid, PaymentID: pid, At: now()}
		dctx, cancel := context.WithTimeout(c.Request.Context(), a.cfg.DurableTimeout)
		err := a.deps.Ends.Record(dctx, []redisstore.End{end})
		cancel()
		if err != nil {
			a.notDurable(c, id, err)
			return
		}
	}
	a.ended(c, id, e, err)
}

// notDurable answers a payment the stock Redis holds as paid and MySQL
// does not.
func (a *server) notDurable(c *gin.Context, id string, err error) {
	if errors.Is(err, orders.ErrEndConflict) {
		// The stock Redis decided this order again after it lost an end
		// MySQL holds: not paid in the books that last.
		a.deps.Logger.Error("payment refused: MySQL holds another end for the order", "order", id, "err", err)
		a.problem(c, http.StatusConflict, "order "+id+": MySQL holds another end for it (the stock Redis lost state); the operator settles it")
		return
	}
	a.deps.Logger.Warn("payment paid in the stock Redis, not yet stored in MySQL", "order", id, "err", err)
	c.Header("Retry-After", "1")
	a.problem(c, http.StatusServiceUnavailable, "order "+id+": paid in the stock Redis, not yet stored in MySQL; send the payment again (the same payment_id pays once)")
}

// A payment provider's callback (orders.payment_secret) is POST
// /orders/:id/pay signed, instead of a buyer's credential: the signature
// is HMAC-SHA256 under the shared secret of "<timestamp>\n<path>\n<body>"
// (PaymentSignature), in hex, the timestamp unix seconds within
// paymentSkew of this replica's clock. The path binds it to its order;
// a callback replayed within the skew pays nothing twice, since a
// payment is idempotent by its id, and one older is refused.
const (
	HeaderPaymentTimestamp = "X-Payment-Timestamp"
	HeaderPaymentSignature = "X-Payment-Signature"
	paymentSkew            = 5 * time.Minute
)

// PaymentSignature is a provider callback's signature: hex HMAC-SHA256
// under secret of timestamp, path and body, each line-separated.
func PaymentSignature(secret, timestamp, path string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp + "\n" + path + "\n"))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// errBadCallback refuses a provider callback: 401.
var errBadCallback = errors.New("payment callback refused")

// checkCallback verifies a provider callback's timestamp and signature
// over body.
func (a *server) checkCallback(c *gin.Context, body []byte) error {
	if a.cfg.PaymentSecret == "" {
		return fmt.Errorf("%w: no orders.payment_secret is set, so no callback is believed", errBadCallback)
	}
	ts := c.GetHeader(HeaderPaymentTimestamp)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s must be unix seconds", errBadCallback, HeaderPaymentTimestamp)
	}
	if d := now().Sub(time.Unix(sec, 0)); d > paymentSkew || d < -paymentSkew {
		return fmt.Errorf("%w: %s is %s off this replica's clock, beyond %s", errBadCallback, HeaderPaymentTimestamp, d.Round(time.Second), paymentSkew)
	}
	want := PaymentSignature(a.cfg.PaymentSecret, ts, c.Request.URL.Path, body)
	if !hmac.Equal([]byte(strings.ToLower(c.GetHeader(HeaderPaymentSignature))), []byte(want)) {
		return fmt.Errorf("%w: bad signature", errBadCallback)
	}
	return nil
}

// providerPay is pay for a signed callback: the provider may pay any
// order, its buyer's credential absent.
func (a *server) providerPay(c *gin.Context) {
	if a.deps.Orders == nil {
		a.ledgerOff(c)
		return
	}
	body, ok := a.adminBody(c, "payment")
	if !ok {
		return
	}
	if err := a.checkCallback(c, body); err != nil {
		a.problem(c, http.StatusUnauthorized, err.Error())
		return
	}
	id := c.Param("id")
	if len(id) > maxOrderIDLen {
		a.problem(c, http.StatusBadRequest, "order id too long")
		return
	}
	o, err := a.lookupOrder(c, a.deps.Orders, a.deps.Durable, id)
	if err != nil {
		a.ledgerFail(c, err, id)
		return
	}
	if a.deps.Reservations == nil {
		a.noReservations(c, o.ID)
		return
	}
	a.payOrder(c, o.ID, body)
}

// cancel is POST /orders/:id/cancel, by the order's buyer or the admin:
// a reserved order is cancelled and its unit goes back on sale; any other
// is answered the state it is in.
func (a *server) cancel(c *gin.Context) {
	o, ok := a.reservedOrder(c)
	if !ok {
		return
	}
	e, err := a.deps.Reservations.Cancel(c.Request.Context(), o.ID)
	a.ended(c, o.ID, e, err)
}

// reservedOrder is the order of the route, read as GET /orders/:id reads
// it (its buyer or the admin; another's is no order); ok false when the
// refusal is answered.
func (a *server) reservedOrder(c *gin.Context) (stock.Order, bool) {
	if a.deps.Orders == nil {
		a.ledgerOff(c)
		return stock.Order{}, false
	}
	// Who asks first, as for every order: whether reservations are on is
	// no secret, but an order's existence is.
	o, ok := a.ownOrder(c, a.deps.Orders, a.deps.Durable, c.Param("id"))
	if ok && a.deps.Reservations == nil {
		a.noReservations(c, o.ID)
		return stock.Order{}, false
	}
	return o, ok
}

// noReservations answers a route of reservations with them off.
func (a *server) noReservations(c *gin.Context, id string) {
	a.problem(c, http.StatusNotFound, "order "+id+" has no reservation: orders.payment_window is 0, a unit sold is final")
}

// ended answers a lifecycle call on order id.
func (a *server) ended(c *gin.Context, id string, e redisstore.Ending, err error) {
	switch {
	case err == nil:
		a.json(c, http.StatusOK, &api.OrderEnd{Order: id, State: e.State, Refund: e.Refund})
	case errors.Is(err, redisstore.ErrNoReservation):
		a.problem(c, http.StatusNotFound, "order "+id+" has no reservation: it was sold without a payment window, and is final")
	case errors.Is(err, redisstore.ErrPaymentReused):
		a.problem(c, http.StatusConflict, "the payment id already paid another order")
	default:
		a.fail(c, err)
	}
}

// parsePayment reads {"payment_id":".."}, strictly (strictObject): 1..255
// printable ASCII, no spaces (stock.MaxKeyLen), as an idempotency key.
func parsePayment(body []byte) (string, error) {
	const want = `want {"payment_id":"<the payment's id>"}`
	fields, err := strictObject(body, []string{"payment_id"}, false)
	if err != nil {
		return "", errors.New(want + ": " + err.Error())
	}
	var pid string
	if raw, ok := fields["payment_id"]; !ok || json.Unmarshal(raw, &pid) != nil {
		return "", errors.New(want + `: "payment_id" must be a string`)
	}
	// Checked as an idempotency key is: it is one, for the payment.
	if pid == "" || (stock.Buyer{Key: pid}).Check() != nil {
		return "", errors.New(want + `: "payment_id" must be 1..255 printable ASCII, no spaces`)
	}
	return pid, nil
}
