package stockd

import (
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"seckill/internal/stock"
)

// An edit renders what it assigns — a default included, so an overlay can
// undo a cluster's setting — and nothing else.
func TestOverridesRenderWhatIsAssigned(t *testing.T) {
	if got := Overrides(func(*Config) {}); len(got) != 0 {
		t.Fatalf("an empty edit rendered %v", got)
	}
	got := Overrides(
		func(c *Config) { c.Work.Delay = stock.Delay{Min: 2 * time.Millisecond, Max: 10 * time.Millisecond} },
		func(c *Config) { c.Lock.RedisAddr, c.Stock.Fencing = "", true },
		nil,
		func(c *Config) { c.Etcd.Endpoints = []string{"http://a:1", "http://b:2"}; c.Stock.Segments = 8 },
		func(c *Config) { c.Lab.Failpoints = "stock/falseSoldOut=10*return" },
		func(c *Config) { c.Stock.Segments = 4 }, // the last edit wins
	)
	want := map[string]string{
		"STOCKD_WORK_DELAY":      "2ms-10ms",
		"STOCKD_LOCK_REDIS_ADDR": "",
		"STOCKD_STOCK_FENCING":   "true",
		"STOCKD_ETCD_ENDPOINTS":  "http://a:1,http://b:2",
		"STOCKD_STOCK_SEGMENTS":  "4",
		"SECKILL_FAILPOINTS":     "stock/falseSoldOut=10*return",
	}
	if !maps.Equal(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

// What Overrides renders, Load reads back as the same values: every key
// of every type, set away from its default.
func TestOverridesLoadBack(t *testing.T) {
	edit := func(c *Config) {
		c.Replica = "r1"
		c.Admin.Token = testAdminToken
		c.HTTP.WriteTimeout = 90 * time.Second
		c.HTTP.TrustedProxies = []string{"10.0.0.0/8"}
		c.Work.Delay = stock.Delay{Min: 1500 * time.Microsecond, Max: 1500 * time.Microsecond}
		c.Stock.Combine, c.Stock.CombineMax = true, 32
		c.Stock.Fencing = false
		c.Redis.Sentinel.Addrs = []string{"127.0.0.1:26379"}
		c.Lab.Unsafe = true
	}
	env := Overrides(edit)
	var list []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		list = append(list, k+"="+env[k])
	}
	got, err := Load("", list)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Load("", []string{"STOCKD_REPLICA=x"})
	if err != nil {
		t.Fatal(err)
	}
	edit(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded back\n%+v\nwant\n%+v", got, want)
	}
}
