package health_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/health"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
)

// Every policy Redis 7 knows, read from a real server: only noeviction is
// accepted, and the error of every other one names it.
func TestMaxmemoryPolicy(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	for _, policy := range []string{
		"allkeys-lru", "allkeys-lfu", "allkeys-random",
		"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl",
		"noeviction",
	} {
		if err := rdb.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := health.MaxmemoryPolicy(ctx, rdb)
		if got != policy {
			t.Errorf("%s: read policy %q", policy, got)
		}
		switch {
		case policy == health.NoEviction && err != nil:
			t.Errorf("noeviction: got %v, want no error", err)
		case policy != health.NoEviction && (!errors.Is(err, health.ErrEvictingPolicy) || !strings.Contains(err.Error(), "maxmemory-policy "+policy)):
			t.Errorf("%s: got %v, want ErrEvictingPolicy naming the policy", policy, err)
		}
	}

	if err := srv.Stop(5e9); err != nil {
		t.Fatal(err)
	}
	if _, err := health.MaxmemoryPolicy(ctx, rdb); !errors.Is(err, stock.ErrUnavailable) || errors.Is(err, health.ErrEvictingPolicy) {
		t.Fatalf("Redis down: got %v, want ErrUnavailable only", err)
	}
}

// infoReply answers INFO with a fixed text.
type infoReply string

func (r infoReply) Info(ctx context.Context, _ ...string) *redis.StringCmd {
	return redis.NewStringResult(string(r), nil)
}

// A Redis (or a proxy in front of one) that does not report its policy is
// not trusted to keep the keys.
func TestMaxmemoryPolicyUnreported(t *testing.T) {
	_, err := health.MaxmemoryPolicy(t.Context(), infoReply("# Memory\r\nused_memory:1024\r\n"))
	if !errors.Is(err, health.ErrEvictingPolicy) {
		t.Fatalf("got %v, want ErrEvictingPolicy", err)
	}
	got, err := health.MaxmemoryPolicy(t.Context(), infoReply("# Memory\r\nmaxmemory_policy:noeviction\r\n"))
	if got != health.NoEviction || err != nil {
		t.Fatalf("got %q %v, want noeviction", got, err)
	}
}

// ReadMemory reads maxmemory (0: none) and used_memory from a real
// server; the headroom is what lies between them.
func TestReadMemory(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	m, err := health.ReadMemory(t.Context(), rdb)
	if err != nil || m.Max != 0 || m.Used <= 0 {
		t.Fatalf("no maxmemory: got %+v, %v; want Max 0 and some used", m, err)
	}
	if err := rdb.ConfigSet(t.Context(), "maxmemory", "64mb").Err(); err != nil {
		t.Fatal(err)
	}
	m, err = health.ReadMemory(t.Context(), rdb)
	if err != nil || m.Max != 64<<20 || m.Headroom() != 64<<20-m.Used || m.Used <= 0 {
		t.Fatalf("maxmemory 64mb: got %+v (headroom %d), %v", m, m.Headroom(), err)
	}
}
