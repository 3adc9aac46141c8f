package handler

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"seckill/internal/api"
	"seckill/internal/stock/redisstore"
)

// maxAdopter bounds the "by" of an adoption: a name or an address, kept in
// the witness's record.
const maxAdopter = 200

// adoptWitness is POST /stock/witness/adopt, admin only, body {"by":"who"}:
// the way back from a witness_lost halt that keeps the sale
// (stock.AdoptWitness). The adoption, with who decided and the books, is
// kept in the witness and logged; a refusal says why and what to do
// instead (409).
func (a *server) adoptWitness(c *gin.Context) {
	if !a.admit(c) {
		return
	}
	w := a.deps.Witness
	if w == nil || w.Witness() == "" {
		a.problem(c, http.StatusConflict, "the sale has no witness (stock.witness none): nothing to adopt")
		return
	}
	by, ok := a.adminBy(c, "adoption")
	if !ok {
		return
	}
	ad, err := w.AdoptWitness(c.Request.Context(), by)
	if errors.Is(err, redisstore.ErrNotAdoptable) {
		a.problem(c, http.StatusConflict, err.Error())
		return
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	a.deps.Logger.Warn("the witness adopted the stock Redis's sale", "by", ad.By, "epoch", ad.Epoch,
		"stocks", ad.Stocks, "lucky", ad.Lucky, "lifted", ad.Why, "remote", c.ClientIP())
	a.json(c, http.StatusOK, &api.Adoption{ID: ad.ID, By: ad.By, At: ad.At, Epoch: ad.Epoch, Stocks: ad.Stocks, Lucky: ad.Lucky, Lifted: ad.Why})
}

// adminBy reads an admin decision's body, {"by":"who decides"} (an
// adoption, an unlatch), answering the refusal itself when it is not one.
func (a *server) adminBy(c *gin.Context, what string) (string, bool) {
	body, ok := a.adminBody(c, what)
	if !ok {
		return "", false
	}
	by, err := parseAdopter(body)
	if err != nil {
		a.problem(c, http.StatusBadRequest, err.Error())
		return "", false
	}
	return by, true
}

// parseAdopter reads {"by":"who decides"}, strictly (strictObject).
func parseAdopter(body []byte) (string, error) {
	const want = `want {"by":"who decides"}`
	fields, err := strictObject(body, []string{"by"}, false)
	if err != nil {
		return "", errors.New(want + ": " + err.Error())
	}
	return byField(fields, want)
}

// byField is the "by" of an admin decision's fields: who decides, named
// in at most maxAdopter bytes; want says the body's shape in an error.
func byField(fields map[string]json.RawMessage, want string) (string, error) {
	var by string
	if raw, ok := fields["by"]; !ok || json.Unmarshal(raw, &by) != nil {
		return "", errors.New(want + ": \"by\" must be a string")
	}
	if by = strings.TrimSpace(by); by == "" || len(by) > maxAdopter {
		return "", errors.New(want + ": \"by\" must name someone, in at most 200 bytes")
	}
	return by, nil
}
