package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"seckill/internal/stock/redisstore"
)

// maxResetBody bounds the reset body; a valid one is a few dozen bytes.
const maxResetBody = 4 << 10

// resetContentProblem says why a reset body's declared type cannot be read
// as JSON, or "" when it can: no Content-Type, or application/json in UTF-8
// (RFC 8259: JSON is UTF-8), with no content coding. A form post (curl -d
// without -H), text/plain or a gzip body was parsed as if it were plain
// JSON, and refused, when at all, as "malformed JSON".
func resetContentProblem(h http.Header) string {
	const want = "; send Content-Type: application/json (or none) and a plain UTF-8 body like {\"stock\":300}"
	if ce := h.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return "unsupported Content-Encoding " + strconv.Quote(ce) + want
	}
	ct := h.Get("Content-Type")
	if ct == "" {
		return ""
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return "unsupported Content-Type " + strconv.Quote(ct) + want
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return "unsupported charset " + strconv.Quote(cs) + want
	}
	return ""
}

// errBadReset marks every client mistake in a reset body (→ 400).
var errBadReset = errors.New("bad reset body")

// parseReset reads {"stock": N} where N is a JSON integer in 0..redisstore.MaxStock
// (2^53-1: the stock scripts and every JSON client reading the answer hold
// numbers as doubles, exact only that far). It is strict on purpose —
// unknown fields, a repeated field, trailing data, "300", 300.5 and 3e2 are
// all refused — because a typo in an admin call that silently set the stock
// to 0 would start a sale with nothing in it.
func parseReset(body []byte) (int64, error) {
	if len(body) > maxResetBody {
		return 0, fmt.Errorf("%w: body larger than %d bytes", errBadReset, maxResetBody)
	}
	// Token by token, not into a map or a struct: both keep the last of a
	// repeated key ({"stock":5,"stock":7} set 7, where another parser may
	// take 5), struct decoding matches names case-insensitively ("STOCK"
	// would do), and a json.Number field would accept the string "300".
	dec := json.NewDecoder(bytes.NewReader(body))
	notObject := func(err error) error {
		return fmt.Errorf("%w: want a JSON object like {\"stock\":300}: %v", errBadReset, err)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		if err == nil {
			err = fmt.Errorf("got %v", tok)
		}
		return 0, notObject(err)
	}
	var raw json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0, notObject(err)
		}
		key, _ := tok.(string)
		if key != "stock" {
			return 0, fmt.Errorf("%w: unknown field %q (only \"stock\" is accepted)", errBadReset, key)
		}
		if raw != nil {
			return 0, fmt.Errorf("%w: duplicate field \"stock\"", errBadReset)
		}
		if err := dec.Decode(&raw); err != nil {
			return 0, notObject(err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return 0, notObject(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, fmt.Errorf("%w: unexpected data after the JSON object", errBadReset)
	}
	if raw == nil {
		return 0, fmt.Errorf("%w: field \"stock\" is required", errBadReset)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if errors.Is(err, strconv.ErrRange) && raw[0] != '-' {
		return 0, fmt.Errorf("%w: \"stock\" must be an integer of at most %d (2^53-1), got %.40s", errBadReset, redisstore.MaxStock, raw)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: \"stock\" must be an integer, got %.40s", errBadReset, raw)
	}
	if n < 0 {
		return 0, fmt.Errorf("%w: \"stock\" must not be negative, got %d", errBadReset, n)
	}
	if n > redisstore.MaxStock {
		return 0, fmt.Errorf("%w: \"stock\" must be an integer of at most %d (2^53-1), got %d", errBadReset, redisstore.MaxStock, n)
	}
	return n, nil
}
