package handler

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"seckill/internal/stock/redisstore"
)

func TestParseReset(t *testing.T) {
	ok := map[string]int64{
		`{"stock":300}`:              300,
		`{"stock":0}`:                0,
		` { "stock" : 12 } `:         12,
		`{"stock":9007199254740991}`: 9007199254740991, // redisstore.MaxStock, 2^53-1
		"{\"stock\":5}\n":            5,
		`{"stock":-0}`:               0,
	}
	for in, want := range ok {
		got, err := parseReset([]byte(in))
		if err != nil || got != want {
			t.Errorf("parseReset(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{``, `{`, `null`, `{}`, `{"stock":-5}`, `{"stock":"5"}`, `{"stock":5.0}`,
		`{"stock":true}`, `{"stock":5}x`, `{"Stock":5,"other":1}`, `{"stock":[5]}`,
		`{"stock":9007199254740992}`, `{"stock":9223372036854775807}`, `{"stock":99999999999999999999}`,
		`{"stock":5,"stock":7}`, `{"stock":5,"st\u006fck":7}`, `{"stock":5,"stock":5}`, `{"stock":null,"stock":1}`,
		`{"stock":1,}`, `{,"stock":1}`, `{"stock" 1}`, `{"stock":1`} {
		if _, err := parseReset([]byte(in)); !errors.Is(err, errBadReset) {
			t.Errorf("parseReset(%s): got %v, want errBadReset", in, err)
		}
	}
}

// FuzzResetBody checks parseReset's contract on arbitrary input: it never
// panics, refuses with errBadReset only, and whatever it accepts is an
// integer in 0..redisstore.MaxStock that really is the body's "stock" field.
func FuzzResetBody(f *testing.F) {
	for _, s := range []string{`{"stock":300}`, `{"stock":-1}`, `{"stock":1.5}`, `{"stock":"3"}`, `{}`,
		`{"stock":1e2}`, `{"stock":1}{}`, `{"stock":99999999999999999999}`, "\xff", `{"stock":0, "x":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := parseReset(body)
		if err != nil {
			if !errors.Is(err, errBadReset) {
				t.Fatalf("error %v does not wrap errBadReset", err)
			}
			return
		}
		if n < 0 || n > redisstore.MaxStock {
			t.Fatalf("accepted stock %d, outside 0..2^53-1, from %q", n, body)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("accepted %q, which is not a JSON object: %v", body, err)
		}
		if got, err := strconv.ParseInt(string(m["stock"]), 10, 64); err != nil || got != n {
			t.Fatalf("accepted %q as %d, but its stock field is %s", body, n, m["stock"])
		}
	})
}
