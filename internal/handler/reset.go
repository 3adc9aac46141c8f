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
	// A map of raw values, not a struct: struct decoding matches field names
	// case-insensitively ("STOCK" would do) and a json.Number field would
	// accept the string "300" — exactly the sloppiness refused here.
	var req map[string]json.RawMessage
	if err := dec.Decode(&req); err != nil || req == nil {
		return 0, fmt.Errorf("%w: want a JSON object like {\"stock\":300}: %v", errBadReset, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, fmt.Errorf("%w: unexpected data after the JSON object", errBadReset)
	}
	for k := range req {
		if k != "stock" {
			return 0, fmt.Errorf("%w: unknown field %q (only \"stock\" is accepted)", errBadReset, k)
		}
	}
	raw, ok := req["stock"]
	if !ok {
		return 0, fmt.Errorf("%w: field \"stock\" is required", errBadReset)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: \"stock\" must be an integer, got %.40s", errBadReset, raw)
	}
	if n < 0 {
		return 0, fmt.Errorf("%w: \"stock\" must not be negative, got %d", errBadReset, n)
	}
	return n, nil
}
