package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// maxResetBody bounds the reset body; a valid one is a few dozen bytes.
const maxResetBody = 4 << 10

// errBadReset marks every client mistake in a reset body (→ 400).
var errBadReset = errors.New("bad reset body")

// parseReset reads {"stock": N} where N is a non-negative JSON integer. It is
// strict on purpose — unknown fields, trailing data, "300", 300.5 and 3e2 are
// all refused — because a typo in an admin call that silently set the stock
// to 0 would start a sale with nothing in it.
func parseReset(body []byte) (int64, error) {
	if len(body) > maxResetBody {
		return 0, fmt.Errorf("%w: body larger than %d bytes", errBadReset, maxResetBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	// RawMessage, not json.Number: a Number field also accepts the string
	// "300", which is exactly the sloppiness refused here.
	var req struct {
		Stock json.RawMessage `json:"stock"`
	}
	if err := dec.Decode(&req); err != nil {
		return 0, fmt.Errorf("%w: want a JSON object like {\"stock\":300}: %v", errBadReset, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, fmt.Errorf("%w: unexpected data after the JSON object", errBadReset)
	}
	if req.Stock == nil {
		return 0, fmt.Errorf("%w: field \"stock\" is required", errBadReset)
	}
	n, err := strconv.ParseInt(string(req.Stock), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: \"stock\" must be an integer, got %.40s", errBadReset, req.Stock)
	}
	if n < 0 {
		return 0, fmt.Errorf("%w: \"stock\" must not be negative, got %d", errBadReset, n)
	}
	return n, nil
}
