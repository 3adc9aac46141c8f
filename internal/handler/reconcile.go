package handler

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"seckill/internal/api"
	"seckill/internal/stock/redisstore"
)

// reconcile is POST /stock/reconcile, admin only, body {"by":"who",
// "at_least":n}: the way back from a halt where the stock Redis is the
// one behind, keeping the sale and every unit it acknowledged
// (stock.Reconcile). The answer, also logged, says what each source
// counted, what was written, and how many units are held for the buyers'
// receipts; a refusal says why (409), a durable store or witness that
// does not answer is 503.
func (a *server) reconcile(c *gin.Context) {
	if !a.admit(c) {
		return
	}
	w := a.deps.Witness
	if w == nil {
		a.problem(c, http.StatusConflict, "this stockd has no store to reconcile")
		return
	}
	body, ok := a.adminBody(c, "reconciliation")
	if !ok {
		return
	}
	by, atLeast, err := parseReconcile(body)
	if err != nil {
		a.problem(c, http.StatusBadRequest, err.Error())
		return
	}
	r, err := w.Reconcile(c.Request.Context(), by, atLeast)
	if errors.Is(err, redisstore.ErrNotReconcilable) {
		a.problem(c, http.StatusConflict, err.Error())
		return
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	a.deps.Logger.Warn("the sale was reconciled", "by", r.By, "epoch", r.Epoch, "sale", r.Sale,
		"redis_lucky", r.RedisLucky, "durable_unit", r.DurableUnit, "witness_sold", r.WitnessSold, "at_least", r.AtLeast,
		"lucky", r.Lucky, "stocks", r.Stocks, "held", r.Held, "pending", r.Pending, "lifted", r.Lifted, "remote", c.ClientIP())
	a.json(c, http.StatusOK, &api.Reconciliation{ID: r.ID, By: r.By, At: r.At, Epoch: r.Epoch, Sale: r.Sale, Lifted: r.Lifted,
		Initial: r.Initial, RedisStocks: r.RedisStocks, RedisLucky: r.RedisLucky, DurableUnit: r.DurableUnit,
		WitnessSold: r.WitnessSold, AtLeast: r.AtLeast, Stocks: r.Stocks, Lucky: r.Lucky, Held: r.Held, Pending: r.Pending})
}

// parseReconcile reads {"by":"who decides","at_least":n}, strictly;
// at_least (the units the buyers' answers show sold) is optional.
func parseReconcile(body []byte) (string, int64, error) {
	const want = `want {"by":"who decides","at_least":<units answered sold, optional>}`
	fields, err := strictObject(body, []string{"by", "at_least"}, false)
	if err != nil {
		return "", 0, errors.New(want + ": " + err.Error())
	}
	by, err := byField(fields, want)
	if err != nil {
		return "", 0, err
	}
	var atLeast int64
	if raw, ok := fields["at_least"]; ok {
		if err := json.Unmarshal(raw, &atLeast); err != nil || atLeast < 0 {
			return "", 0, errors.New(want + ": \"at_least\" must be a whole number of units, 0 or more")
		}
	}
	return by, atLeast, nil
}
