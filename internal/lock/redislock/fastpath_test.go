package redislock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locktest"
	"seckill/internal/servers/servertest"
)

// queueCalls counts the queue commands Redis has run so far (scripts'
// calls included): the uncontended path must send none of them.
func queueCalls(t *testing.T, c *redis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		switch name {
		case "zrem", "hdel", "zrange", "zadd", "hset", "hget", "time":
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			got[name] = n
		}
	}
	return got
}

// An acquisition nobody contends takes the fast path in both scripts: no
// queue command at all, while the token still grows by one per hold.
func TestUncontendedSendsNoQueueWork(t *testing.T) {
	srv := servertest.Redis(t)
	lk, c := newLocker(t, srv, 10*time.Second)
	ctx := context.Background()
	key := locktest.Key(t)
	before := queueCalls(t, c)
	var last uint64
	for i := range 20 {
		ls, err := lk.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if tok := ls.Token(); i > 0 && tok <= last {
			t.Fatalf("token %d after %d: not increasing", tok, last)
		} else {
			last = tok
		}
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after := queueCalls(t, c)
	for name, n := range after {
		if n != before[name] {
			t.Errorf("%s ran %d times in 20 uncontended holds, want 0", name, n-before[name])
		}
	}
	if n, err := c.Exists(ctx, "{"+key+"}").Result(); err != nil || n != 0 {
		t.Errorf("lock key left behind after release: exists=%d err=%v", n, err)
	}
}
