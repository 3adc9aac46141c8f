package orders

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

func TestParse(t *testing.T) {
	good := func() map[string]any {
		return order{id: "o1", sale: "s1", user: "U1", key: "k", token: 18446744073709551615,
			replica: "r1", stockAfter: 3, ms: 1795420836805}.values()
	}
	r, err := parse(redis.XMessage{ID: "1-0", Values: good()})
	if err != nil {
		t.Fatal(err)
	}
	want := row{id: "o1", sale: "s1", user: "U1", key: "k", token: 18446744073709551615, replica: "r1",
		stockAfter: 3, soldAt: time.UnixMilli(1795420836805).UTC(), entry: "1-0"}
	if r != want {
		t.Errorf("parse = %+v, want %+v", r, want)
	}

	for _, tc := range []struct {
		name  string
		edit  func(map[string]any)
		error string // "" when it must parse
	}{
		{"no user or key", func(v map[string]any) { delete(v, "user"); delete(v, "key") }, ""},
		{"anonymous", func(v map[string]any) { v["user"] = "" }, ""},
		{"no id", func(v map[string]any) { delete(v, "id") }, `missing field "id"`},
		{"empty sale", func(v map[string]any) { v["sale"] = "" }, `"sale" is empty`},
		{"no token", func(v map[string]any) { delete(v, "token") }, `missing field "token"`},
		{"no replica", func(v map[string]any) { delete(v, "replica") }, `missing field "replica"`},
		{"no stock_after", func(v map[string]any) { delete(v, "stock_after") }, `missing field "stock_after"`},
		{"no time", func(v map[string]any) { delete(v, "time") }, `missing field "time"`},
		{"negative token", func(v map[string]any) { v["token"] = "-1" }, `"token"`},
		{"token overflow", func(v map[string]any) { v["token"] = "18446744073709551616" }, `"token"`},
		{"stock not a number", func(v map[string]any) { v["stock_after"] = "x" }, `"stock_after"`},
		{"time before 1970", func(v map[string]any) { v["time"] = "-5" }, "DATETIME"},
		{"time past 9999", func(v map[string]any) { v["time"] = "253402300800000" }, "DATETIME"},
		{"long id", func(v map[string]any) { v["id"] = strings.Repeat("i", 65) }, "longer than 64"},
		{"long key", func(v map[string]any) { v["key"] = strings.Repeat("k", 256) }, "longer than 255"},
		{"space in user", func(v map[string]any) { v["user"] = "U 1" }, `"user" has a byte`},
		{"non-ASCII key", func(v map[string]any) { v["key"] = "clé" }, `"key" has a byte`},
		{"replica not UTF-8", func(v map[string]any) { v["replica"] = "r\xff" }, "UTF-8"},
		{"a deleted entry", func(v map[string]any) { clear(v) }, "missing field"},
	} {
		v := good()
		tc.edit(v)
		_, err := parse(redis.XMessage{ID: "1-0", Values: v})
		switch {
		case tc.error == "" && err != nil:
			t.Errorf("%s: %v, want it parsed", tc.name, err)
		case tc.error != "" && (err == nil || !strings.Contains(err.Error(), tc.error)):
			t.Errorf("%s: error %v, want one containing %s", tc.name, err, tc.error)
		}
	}
}

func TestDeadLetterFits(t *testing.T) {
	d := deadLetter(redis.XMessage{ID: "1-0", Values: map[string]any{"x": strings.Repeat("é", 40000), "y": "\xff"}},
		errors.New(strings.Repeat("why ", 100)))
	if len(d.raw) > 60000 || !utf8.ValidString(d.raw) || len(d.reason) > 255 {
		t.Errorf("dead letter raw %d bytes (valid UTF-8 %v), reason %d bytes; want ≤ 60000, valid, ≤ 255",
			len(d.raw), utf8.ValidString(d.raw), len(d.reason))
	}
}
