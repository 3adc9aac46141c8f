package lab

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"seckill/internal/auth"
	"seckill/internal/lab/localcluster"
	"seckill/internal/stockd"
)

// Every cell of the default matrix starts stockd with settings it accepts:
// a typo or a range the validator refuses would fail the cell at start, 12
// minutes into a run; here it fails in milliseconds.
func TestEveryCellConfigValidates(t *testing.T) {
	cells := Matrix(nil, nil)
	if len(cells) < 50 {
		t.Fatalf("the default matrix has %d cells", len(cells))
	}
	token, secret := auth.NewSecret(), auth.NewSecret() // one each: Overrides runs an edit twice
	for _, cell := range cells {
		// What the local cluster sets around the cell's settings.
		env := stockd.Overrides(localcluster.Defaults, func(c *stockd.Config) {
			c.Admin.Token, c.Auth.JWTSecret = token, secret
		})
		maps.Copy(env, cellEnv(cell))
		env["STOCKD_LOCK_BACKEND"] = cell.Backend
		env["STOCKD_REPLICA"] = "r1"
		env["STOCKD_MYSQL_DSN"] = "seckill:pw@tcp(127.0.0.1:3306)/seckill"
		if _, ok := env["STOCKD_REDIS_SENTINEL_MASTER"]; !ok && scenarios[cell.Scenario].failover {
			env["STOCKD_REDIS_SENTINEL_MASTER"], env["STOCKD_REDIS_SENTINEL_ADDRS"] = "seckill", "127.0.0.1:26379"
		}
		var list []string
		for _, k := range slices.Sorted(maps.Keys(env)) {
			list = append(list, k+"="+env[k])
		}
		c, err := stockd.Load("", list)
		if err == nil {
			err = stockd.Validate(c)
		}
		// A product build refuses the lab's settings, and says so.
		if err != nil && (stockd.LabBuild || !strings.Contains(err.Error(), "this stockd is a product build")) {
			t.Errorf("%s: %v\nenv %v", cell, err, env)
		}
	}
}
