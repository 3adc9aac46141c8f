package handler

import (
	"errors"
	"testing"

	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

func TestParseItem(t *testing.T) {
	ok := map[string]redisstore.Item{
		`{"id":"x","stock":5}`: {ID: "x", Stock: 5},
		`{"id":"x","stock":5,"starts_at":1000,"ends_at":2000,"per_user_limit":2}`:                           {ID: "x", Stock: 5, StartsAt: 1000, EndsAt: 2000, PerUserLimit: 2},
		`{"stock":0,"id":"a-1","starts_at":"2030-01-02T10:00:00Z","ends_at":"2030-01-02T11:00:00.5+01:00"}`: {ID: "a-1", StartsAt: 1893578400000, EndsAt: 1893578400500},
		`{"id":"x","stock":5,"starts_at":0,"ends_at":0}`:                                                    {ID: "x", Stock: 5},
	}
	for in, want := range ok {
		got, err := parseItem([]byte(in), "")
		if err != nil || got != want {
			t.Errorf("parseItem(%s) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	if got, err := parseItem([]byte(`{"stock":3}`), "p"); err != nil || got != (redisstore.Item{ID: "p", Stock: 3}) {
		t.Errorf("a reset's body: got %+v, %v", got, err)
	}
	for _, in := range []string{``, `{`, `null`, `{}`, `{"id":"x"}`, `{"stock":1}`, `{"id":"x","stock":"5"}`,
		`{"id":"x","stock":5,"Stock":5}`, `{"id":"x","stock":5,"st\u006fck":5}`, `{"id":"x","stock":5,"id":"y"}`,
		`{"id":"x","stock":5.0}`, `{"id":"x","stock":9007199254740992}`, `{"id":"x","stock":5}x`,
		`{"id":"x","stock":5,"starts_at":true}`, `{"id":"x","stock":5,"starts_at":1.5}`, `{"id":"x","stock":5,"starts_at":"1969-12-31T23:59:59Z"}`,
		`{"id":"x","stock":5,"ends_at":"not a time"}`, `{"id":"x","stock":5,"starts_at":2,"ends_at":1}`,
		`{"id":"x","stock":5,"per_user_limit":1.5}`, `{"id":"","stock":5}`, `{"id":null,"stock":5}`, `{"id":"x","stock":5,"ends_at":null}`} {
		_, err := parseItem([]byte(in), "")
		if !errors.Is(err, errBadItemBody) && !errors.Is(err, stock.ErrBadItem) {
			t.Errorf("parseItem(%s): got %v, want a bad body", in, err)
		}
	}
	if _, err := parseItem([]byte(`{"id":"p","stock":3}`), "p"); !errors.Is(err, errBadItemBody) {
		t.Errorf("an id in a reset's body: got %v, want a bad body", err)
	}
}
