package orders

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestNew(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	db, err := sql.Open("mysql", "u:p@tcp(127.0.0.1:1)/d") // never dialled
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	good := Config{Redis: rdb, Stream: "s", Consumer: "r1", DB: db}

	c, err := New(good)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.cfg; got.Group != "orders" || got.Table != "orders" || got.ClaimIdle != 5*time.Second ||
		got.Batch != 100 || got.Logger == nil || got.ReadDB != db {
		t.Errorf("defaults: %+v, want group and table orders, ClaimIdle 5s, Batch 100, a logger, reads on DB", got)
	}

	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"Redis", func(c *Config) { c.Redis = nil }},
		{"Stream", func(c *Config) { c.Stream = "" }},
		{"Consumer", func(c *Config) { c.Consumer = "" }},
		{"DB", func(c *Config) { c.DB = nil }},
		{"Table", func(c *Config) { c.Table = "orders`; --" }},
		{"Table", func(c *Config) { c.Table = strings.Repeat("t", 60) }},
		{"ClaimIdle", func(c *Config) { c.ClaimIdle = -time.Second }},
		{"Batch", func(c *Config) { c.Batch = MaxBatch + 1 }},
		{"Batch", func(c *Config) { c.Batch = -1 }},
		{"TrimEvery", func(c *Config) { c.TrimEvery = -time.Second }},
	} {
		cfg := good
		tc.edit(&cfg)
		_, err := New(cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New with a bad %s: %v, want ErrConfig naming %s", tc.field, err, tc.field)
		}
	}
}
