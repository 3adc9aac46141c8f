package lab

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/lab/localcluster"
)

// newerreset.go: the fault on the format guard itself (docs/versions.md).
// Mid-sale, a release newer than this build resets the sale in a format
// this build does not read: its epoch and its :format key (the units as
// they were, so the books stay judgeable). A replica that sold on would
// read keys and script answers it does not know as its own. Every replica
// must refuse, 503 saying it is older than the sale, and be unready
// naming the key; no sale sent after the reset may be answered sold.
// Then the newer release is rolled back (its key goes) and the sale goes
// on, its books exact.

// newerFormat is the format the newer release's reset writes.
const newerFormat = 3

// The answer and the /readyz reading of a replica older than its sale.
const (
	olderThanSale   = "older than the sale's stored format"
	newerSaleReadyz = "stock:format is 3"
)

// newerSaleAnswers is how many answers through nginx, sent after the
// newer reset, the cell waits for before the roll back: every replica's
// several times over.
const newerSaleAnswers = 10

func runNewerReset(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: x.c.Redis().Addr()})
	defer rdb.Close()
	format := stockKeyName + ":format"
	// Whatever happens, the next cell's reset must not meet the key.
	x.undo = append(x.undo, func() error {
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u := redis.NewClient(&redis.Options{Addr: x.c.Redis().Addr()})
		defer u.Close()
		return u.Del(uctx, format).Err()
	})
	if err := rdb.MSet(ctx, stockKeyName+":epoch", "reset-by-a-newer-release", format, newerFormat).Err(); err != nil {
		return fmt.Errorf("the newer release's reset: %w", err)
	}
	x.lagFrom = time.Now()
	for i := range x.c.Replicas() {
		name, base := localcluster.ReplicaName(i), x.c.ReplicaURL(i)
		if r := x.load.reduceAt(ctx, base+"/stock/reduce"); r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Error, olderThanSale) {
			x.problemf("%s answered a sale in the newer sale %d %q %q, want 503 saying it is %s", name, r.Status, describe(r), r.Error, olderThanSale)
		}
		st, ready, err := readyz(ctx, base)
		switch {
		case err != nil:
			return fmt.Errorf("%s /readyz: %w", name, err)
		case st != http.StatusServiceUnavailable || !strings.Contains(ready.Stock, newerSaleReadyz):
			x.problemf("%s /readyz %d stock %q, want 503 naming %q", name, st, ready.Stock, newerSaleReadyz)
		}
	}
	seen := 0
	if _, err := x.load.waitFor(ctx, x.lagFrom, func(r response) bool {
		if !r.Sent.Before(x.lagFrom) {
			seen++
		}
		return seen >= newerSaleAnswers
	}); err != nil {
		return fmt.Errorf("%d answers through nginx after the newer reset: %w", seen, err)
	}
	// The newer release rolled back: the sale is of this build's format
	// again, and sells.
	if err := rdb.Del(ctx, format).Err(); err != nil {
		return fmt.Errorf("roll the newer release back: %w", err)
	}
	x.faultEnd = time.Now()
	x.lagTo = x.faultEnd
	return nil
}

// checkNewerReset: of the answers to sales sent after the newer reset
// and answered before the roll back, none sold or sold out (the sale read
// as this build's), and some refused saying why.
func checkNewerReset(x *run) {
	var refused int
	others := map[string]int{}
	for _, r := range x.load.answers() {
		if r.Sent.Before(x.lagFrom) || !r.At.Before(x.lagTo) {
			continue
		}
		switch {
		case r.sold():
			x.problemf("a sale sent %v after the newer reset was answered sold by %s", r.Sent.Sub(x.lagFrom).Round(time.Millisecond), r.Replica)
		case r.Result == api.SoldOut:
			x.problemf("a sale sent after the newer reset was answered sold_out by %s: the newer sale read as this build's", r.Replica)
		case r.Status == http.StatusServiceUnavailable && strings.Contains(r.Error, olderThanSale):
			refused++
		default:
			others[describe(r)]++
		}
	}
	if refused == 0 {
		x.problemf("no sale refused as %s after the newer reset", olderThanSale)
	}
	x.notef("in the newer sale (%v): %d refused (%s), others %v; rolled back, the sale went on", x.lagTo.Sub(x.lagFrom).Round(time.Millisecond), refused, olderThanSale, others)
}
