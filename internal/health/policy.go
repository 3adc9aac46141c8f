package health

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// ErrEvictingPolicy: the Redis may evict keys when it reaches maxmemory. A
// sale's keys are not a cache: an evicted stock key reads as "0 left", an
// evicted receipt or idempotency record lets a retry or a replayed key
// sell again. The wrapping error names the policy.
var ErrEvictingPolicy = errors.New("evicting")

// NoEviction is the one maxmemory-policy under which Redis keeps every key
// it acknowledged: at maxmemory it refuses writes (ErrOutOfMemory) instead.
const NoEviction = "noeviction"

// InfoReader is the one command MaxmemoryPolicy needs; every go-redis
// client (redis.UniversalClient) has it.
type InfoReader interface {
	Info(ctx context.Context, section ...string) *redis.StringCmd
}

// MaxmemoryPolicy reads rdb's maxmemory-policy from INFO memory, which
// managed Redis services answer where they disable CONFIG GET. It returns
// the policy, and an error wrapping ErrEvictingPolicy when it is anything
// but noeviction (the allkeys-* and volatile-* policies), or when Redis
// answers but does not report it (an ACL without INFO, a proxy): a policy
// that cannot be read cannot be trusted. An unreachable Redis is
// stock.ErrUnavailable, as for every other command.
//
// On a cluster client every master is read, and the first that may evict
// is the answer, named: each holds a part of the sale.
func MaxmemoryPolicy(ctx context.Context, rdb InfoReader) (string, error) {
	if ms, ok, err := mastersOf(ctx, rdb); ok {
		if err != nil {
			return "", err
		}
		var policy string
		for _, m := range ms {
			p, err := maxmemoryPolicy(ctx, m.rdb)
			if err != nil {
				return p, fmt.Errorf("master %s: %w", m.addr, err)
			}
			policy = p
		}
		return policy, nil
	}
	return maxmemoryPolicy(ctx, rdb)
}

func maxmemoryPolicy(ctx context.Context, rdb InfoReader) (string, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		err = redisstore.WrapRedis(ctx, "INFO memory", err)
		var rerr redis.Error
		if !errors.Is(err, stock.ErrUnavailable) && errors.As(err, &rerr) {
			return "", fmt.Errorf("%w: maxmemory-policy unreadable: %w", ErrEvictingPolicy, err)
		}
		return "", err
	}
	policy, ok := InfoField(info, "maxmemory_policy")
	switch {
	case !ok:
		return "", fmt.Errorf("%w: INFO memory reports no maxmemory_policy", ErrEvictingPolicy)
	case policy != NoEviction:
		return policy, fmt.Errorf("%w: maxmemory-policy %s", ErrEvictingPolicy, policy)
	}
	return policy, nil
}

// InfoField finds one "name:value" line of an INFO reply.
func InfoField(info, name string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// BytesPerUnit is what the stock Redis is taken to grow by per unit sold,
// to tell whether its maxmemory leaves room for the stock left. Measured:
// 266 to 348 B per unit for anonymous sales with the ledger on (the
// floods, docs/bench-flood.md); earlier, about 430 B anonymous and about
// 1 KB for a named buyer's sale with an Idempotency-Key (its order, the
// buyer's index entries, the idempotency record and the receipt). The
// heaviest sale the API makes sets the figure: a warning a little early
// costs nothing, while a Redis at maxmemory refuses every sale (OOM).
const BytesPerUnit = 1024

// Memory is a Redis's INFO memory: its limit and what it holds.
type Memory struct {
	// Max is maxmemory in bytes; 0 is no limit.
	Max int64
	// Used is used_memory, what Redis holds maxmemory against.
	Used int64
}

// Headroom is what the Redis may still take before maxmemory; meaningless
// without a limit.
func (m Memory) Headroom() int64 { return m.Max - m.Used }

// ReadMemory reads rdb's maxmemory and used_memory, in one INFO memory.
// On a cluster client, the master with a limit and the least headroom:
// the stock left is checked against it as if it all lived there, which
// warns early rather than late.
func ReadMemory(ctx context.Context, rdb InfoReader) (Memory, error) {
	ms, ok, err := mastersOf(ctx, rdb)
	if !ok {
		return readMemory(ctx, rdb)
	}
	if err != nil {
		return Memory{}, err
	}
	var least Memory
	for _, m := range ms {
		mem, err := readMemory(ctx, m.rdb)
		if err != nil {
			return Memory{}, fmt.Errorf("master %s: %w", m.addr, err)
		}
		if mem.Max > 0 && (least.Max == 0 || mem.Headroom() < least.Headroom()) {
			least = mem
		}
	}
	return least, nil
}

func readMemory(ctx context.Context, rdb InfoReader) (Memory, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return Memory{}, redisstore.WrapRedis(ctx, "INFO memory", err)
	}
	var m Memory
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"maxmemory", &m.Max}, {"used_memory", &m.Used}} {
		v, ok := InfoField(info, f.name)
		if !ok {
			return Memory{}, fmt.Errorf("stock: INFO memory reports no %s", f.name)
		}
		if *f.dst, err = strconv.ParseInt(v, 10, 64); err != nil {
			return Memory{}, fmt.Errorf("stock: INFO memory %s %q: %w", f.name, v, err)
		}
	}
	return m, nil
}

// UsedMemory is INFO memory's used_memory: what the Redis holds, in bytes,
// allocator overhead included.
func UsedMemory(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	return memoryField(ctx, rdb, "used_memory")
}

// DatasetMemory is INFO memory's used_memory_dataset: the keys and values
// alone, without the server's overhead (clients' buffers, replication).
func DatasetMemory(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	return memoryField(ctx, rdb, "used_memory_dataset")
}

func memoryField(ctx context.Context, rdb redis.UniversalClient, field string) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO memory: %w", err)
	}
	v, ok := InfoField(info, field)
	if !ok {
		return 0, fmt.Errorf("INFO memory reports no %s", field)
	}
	return strconv.ParseInt(v, 10, 64)
}
