package orders

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// row is one order as the table holds it.
type row struct {
	id, sale, user, key string // user, key: "" stored as NULL
	token               uint64
	replica             string
	stockAfter          int64
	unit                int64 // the unit's number in the sale; 0 (NULL) for an entry without one
	soldAt              time.Time
	entry               string
}

// dead is an entry that cannot become a row.
type dead struct {
	entry, reason, raw string
}

// maxMillis is the last millisecond DATETIME(3) holds (9999-12-31).
const maxMillis = 253402300799999

// parse turns a stream entry (stock's ledger fields) of a format this
// build reads (the consumer leaves the others pending: loop.known) into a
// row, or says why it cannot: every check here is one the table would
// otherwise make by refusing the whole batch, again and again.
func parse(m redis.XMessage) (row, error) {
	r := row{entry: m.ID}
	if len(m.ID) > 40 {
		return r, fmt.Errorf("entry id longer than 40")
	}
	str := func(name string, required bool, max int) (string, error) {
		v, ok := m.Values[name]
		if !ok {
			if required {
				return "", fmt.Errorf("missing field %q", name)
			}
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("field %q is %T, not a string", name, v)
		}
		if required && s == "" {
			return "", fmt.Errorf("field %q is empty", name)
		}
		if len(s) > max {
			return "", fmt.Errorf("field %q longer than %d", name, max)
		}
		return s, nil
	}
	// Identities: printable ASCII without spaces (the table compares them
	// as ASCII bytes).
	ident := func(name string, required bool, max int) (string, error) {
		s, err := str(name, required, max)
		if err != nil {
			return "", err
		}
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] > '~' {
				return "", fmt.Errorf("field %q has a byte outside printable ASCII (or a space) at %d", name, i)
			}
		}
		return s, nil
	}
	var err error
	if r.id, err = ident("id", true, 64); err != nil {
		return r, err
	}
	if r.sale, err = ident("sale", true, 64); err != nil {
		return r, err
	}
	if r.user, err = ident("user", false, 64); err != nil {
		return r, err
	}
	if r.key, err = ident("key", false, 255); err != nil {
		return r, err
	}
	if r.replica, err = str("replica", true, 64); err != nil {
		return r, err
	}
	if !utf8.ValidString(r.replica) {
		return r, fmt.Errorf("field %q is not UTF-8", "replica")
	}
	num := func(name string) (string, error) { return str(name, true, 20) }
	s, err := num("token")
	if err != nil {
		return r, err
	}
	if r.token, err = strconv.ParseUint(s, 10, 64); err != nil {
		return r, fmt.Errorf("field %q: %w", "token", err)
	}
	if s, err = num("stock_after"); err != nil {
		return r, err
	}
	if r.stockAfter, err = strconv.ParseInt(s, 10, 64); err != nil {
		return r, fmt.Errorf("field %q: %w", "stock_after", err)
	}
	if s, err = str("unit", false, 20); err != nil {
		return r, err
	}
	if s != "" {
		if r.unit, err = strconv.ParseInt(s, 10, 64); err != nil || r.unit < 1 {
			return r, fmt.Errorf("field %q: not a unit number: %q", "unit", s)
		}
	}
	if s, err = num("time"); err != nil {
		return r, err
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return r, fmt.Errorf("field %q: %w", "time", err)
	}
	if ms < 0 || ms > maxMillis {
		return r, fmt.Errorf("field %q: %d ms is outside DATETIME's range", "time", ms)
	}
	r.soldAt = time.UnixMilli(ms).UTC()
	return r, nil
}

// deadLetter describes m for the dead-letter table, bounded to what its
// columns hold (JSON keeps the raw text valid UTF-8).
func deadLetter(m redis.XMessage, why error) dead {
	raw, err := json.Marshal(m.Values)
	if err != nil {
		raw = []byte(fmt.Sprintf("%q", fmt.Sprint(m.Values)))
	}
	return dead{entry: truncate(m.ID, 40), reason: truncate(why.Error(), 255), raw: truncate(string(raw), 60000)}
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
