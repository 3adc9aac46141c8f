package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/health"
	"seckill/internal/lab/localcluster"
)

// evict.go: the stock Redis set to evict keys, then out of memory, mid-sale.
// An evicting maxmemory-policy loses keys a sale relies on (the stock, the
// idempotency records, the receipts) without an error; stockd refuses to
// start on one, and a running replica must go unready when the policy
// changes under it. Under noeviction, a Redis at its maxmemory refuses
// every write: the sales must get a definite 503 and the books stay exact.

// evictSpike is one junk value of the memory spike.
const evictSpike = 256 << 10

// evictHeadroom is how far above the Redis's memory in use its maxmemory
// is set: a few spike values, so the spike reaches it at once.
const evictHeadroom = 2 << 20

// runEvict turns the stock Redis's maxmemory-policy to allkeys-lru (with no
// maxmemory yet, nothing is evicted) until every replica's /readyz says
// it is evicting, and back; then caps its memory a little above what it
// uses and fills it with junk until it refuses writes (OOM), keeps it over
// its limit for two leases, and frees it.
func runEvict(x *run) error {
	ctx, cancel := x.until()
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: x.c.Redis().Addr()})
	defer rdb.Close()
	x.undo = append(x.undo, func() error {
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rdb := redis.NewClient(&redis.Options{Addr: x.c.Redis().Addr()})
		defer rdb.Close()
		return errors.Join(rdb.ConfigSet(uctx, "maxmemory", "0").Err(),
			rdb.ConfigSet(uctx, "maxmemory-policy", "noeviction").Err(), dropJunk(uctx, rdb))
	})

	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		return fmt.Errorf("CONFIG SET maxmemory-policy: %w", err)
	}
	unready := x.everyReplica(ctx, "unready, evicting", func(st int, r api.Ready) bool {
		return st == http.StatusServiceUnavailable && strings.Contains(r.Redis, "allkeys-lru")
	})
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		return fmt.Errorf("CONFIG SET maxmemory-policy: %w", err)
	}
	ready := x.everyReplica(ctx, "ready again", func(st int, r api.Ready) bool { return st == http.StatusOK })
	x.notef("allkeys-lru: %d of %d replicas unready; noeviction again: %d ready", unready, x.c.Replicas(), ready)

	used, err := health.UsedMemory(ctx, rdb)
	if err != nil {
		return err
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+evictHeadroom, 10)).Err(); err != nil {
		return fmt.Errorf("CONFIG SET maxmemory: %w", err)
	}
	junk := strings.Repeat("x", evictSpike)
	full := false
	n := 0
	for ; n < 4*evictHeadroom/evictSpike-1 && !full; n++ {
		err := rdb.Set(ctx, junkKey(n), junk, 0).Err()
		switch {
		case err == nil:
		case redis.HasErrorPrefix(err, "OOM"):
			full = true
		default:
			return fmt.Errorf("the spike: %w", err)
		}
	}
	if !full {
		return fmt.Errorf("the spike: %d junk values of %d bytes and no OOM under maxmemory %d", n, evictSpike, used+evictHeadroom)
	}
	// The refused value's own query buffer is what tipped it over; once
	// it is freed, small writes fit again. The Redis stays full the way a
	// full one does: maxmemory back to what it held before the spike, well
	// below what it holds now.
	if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used, 10)).Err(); err != nil {
		return fmt.Errorf("CONFIG SET maxmemory: %w", err)
	}
	if err := rdb.Set(ctx, junkKey(n), "x", 0).Err(); !redis.HasErrorPrefix(err, "OOM") {
		return fmt.Errorf("a small write after the spike: %v, want OOM", err)
	}
	oomAt := time.Now()
	wctx, cancel := x.until()
	_, err = x.load.waitFor(wctx, oomAt, func(r response) bool {
		return r.Status == http.StatusServiceUnavailable && r.Result == api.Error
	})
	cancel()
	if err != nil {
		x.problemf("no sale answered 503 error while the stock Redis refused writes (OOM): %v", err)
	}
	if err := x.hold(oomAt.Add(2 * x.lease)); err != nil {
		return err
	}
	// A sale sent once the Redis was over its limit cannot have written.
	sold := x.load.countSent(oomAt.Add(100*time.Millisecond), response.sold)
	if sold > 0 {
		x.problemf("%d sales sent while the stock Redis refused writes (OOM) answered 200", sold)
	}
	refused := x.load.countSent(oomAt, func(r response) bool { return r.Status == http.StatusServiceUnavailable && r.Result == api.Error })
	if err := errors.Join(dropJunk(ctx, rdb), rdb.ConfigSet(ctx, "maxmemory", "0").Err()); err != nil {
		return fmt.Errorf("free the memory: %w", err)
	}
	x.faultEnd = time.Now()
	x.notef("OOM after %d junk values of %d KiB over %d MiB in use; sales sent during it: %d answered 503 error, %d 200",
		n, evictSpike>>10, used>>20, refused, sold)
	return nil
}

// everyReplica polls every replica's /readyz until ok says so, for up to
// 10 s each; a replica that never does is a problem. It returns how many
// did.
func (x *run) everyReplica(ctx context.Context, what string, ok func(int, api.Ready) bool) int {
	n := 0
	for i := range x.c.Replicas() {
		name, base := localcluster.ReplicaName(i), x.c.ReplicaURL(i)
		deadline := time.Now().Add(10 * time.Second)
		var (
			st    int
			ready api.Ready
			err   error
			seen  bool
		)
		for !seen && time.Now().Before(deadline) {
			if st, ready, err = readyz(ctx, base); err == nil && ok(st, ready) {
				seen = true
				n++
				break
			}
			select {
			case <-ctx.Done():
				return n
			case <-time.After(50 * time.Millisecond):
			}
		}
		if !seen {
			x.problemf("%s not %s within 10s: /readyz %d redis %q (%v)", name, what, st, ready.Redis, err)
		}
	}
	return n
}

func junkKey(i int) string { return "lab:junk:" + strconv.Itoa(i) }

// dropJunk deletes the spike's keys (DEL is allowed under OOM).
func dropJunk(ctx context.Context, rdb *redis.Client) error {
	keys := make([]string, 0, 4*evictHeadroom/evictSpike)
	for i := range cap(keys) {
		keys = append(keys, junkKey(i))
	}
	return rdb.Del(ctx, keys...).Err()
}
