package health

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// ErrDurabilityUnknown: the Redis answered INFO persistence without saying
// whether its AOF is on (a proxy, a trimmed INFO), so what it keeps of an
// acknowledged sale cannot be told.
var ErrDurabilityUnknown = errors.New("durability unknown")

// The append-only file's fsync policies (appendfsync), and FsyncUnknown
// where CONFIG GET is refused: managed services disable or rename CONFIG
// and do not report the policy anywhere else.
const (
	FsyncAlways   = "always"
	FsyncEverysec = "everysec"
	FsyncNo       = "no"
	FsyncUnknown  = "unknown"
)

// DurabilityReader is what ReadDurability needs; every go-redis client
// (redis.UniversalClient) has it.
type DurabilityReader interface {
	InfoReader
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
}

// Durability is what the stock Redis's configuration makes of a sale
// answered 200: which failures it outlives. Everything a sale leaves
// (stock, lucky, fence, order, receipt) is in that one Redis and shares its
// fate.
type Durability struct {
	// AOF: the Redis logs every write to its append-only file and loads it
	// when it starts (INFO persistence aof_enabled).
	AOF bool
	// Fsync is appendfsync with the AOF on (FsyncAlways, FsyncEverysec,
	// FsyncNo or FsyncUnknown); empty without it.
	Fsync string
	// WaitAOF: the Redis has WAITAOF (7.2 and later), with which a sale
	// could wait for its own fsync whatever the policy. stockd does not
	// send it: the promise rests on Fsync.
	WaitAOF bool
	// ReplicaAcks is stock.min_replica_acks in effect, which the caller
	// sets: a sale is answered sold only once that many replicas hold it.
	ReplicaAcks int
	// Version is INFO server's redis_version.
	Version string
	// LastSave and UnsavedChanges are INFO persistence's
	// rdb_last_save_time and rdb_changes_since_last_save: without AOF, a
	// restart from that snapshot (if one is kept) brings the sale back as it
	// was then. Informative only.
	LastSave       time.Time
	UnsavedChanges int64
}

// ReadDurability reads the Redis's persistence (INFO persistence), its
// fsync policy (CONFIG GET appendfsync, FsyncUnknown where refused) and its
// version (INFO server). An unreachable Redis is stock.ErrUnavailable; an INFO
// that does not say whether the AOF is on is ErrDurabilityUnknown.
//
// On a cluster client every master is read and the one that promises
// least is the answer: a sale lives on one master, and which one is the
// buyer's luck.
func ReadDurability(ctx context.Context, rdb DurabilityReader) (Durability, error) {
	ms, ok, err := mastersOf(ctx, rdb)
	if !ok {
		return readDurability(ctx, rdb)
	}
	if err != nil {
		return Durability{}, err
	}
	var weakest Durability
	for i, m := range ms {
		d, err := readDurability(ctx, m.rdb)
		if err != nil {
			return d, fmt.Errorf("master %s: %w", m.addr, err)
		}
		if i == 0 || d.strength() < weakest.strength() {
			weakest = d
		}
	}
	return weakest, nil
}

// strength orders readings by what a 200 outlives: no AOF, then an AOF
// whose fsync is unknown or never, every second, always.
func (d Durability) strength() int {
	switch {
	case !d.AOF:
		return 0
	case d.Fsync == FsyncEverysec:
		return 2
	case d.Fsync == FsyncAlways:
		return 3
	}
	return 1
}

func readDurability(ctx context.Context, rdb DurabilityReader) (Durability, error) {
	var d Durability
	// Two INFO calls, not one with two sections: a Redis before 7.0 takes
	// a single section.
	info, err := rdb.Info(ctx, "persistence").Result()
	if err != nil {
		return d, redisstore.WrapRedis(ctx, "INFO persistence", err)
	}
	aof, ok := InfoField(info, "aof_enabled")
	if !ok {
		return d, fmt.Errorf("%w: INFO persistence reports no aof_enabled", ErrDurabilityUnknown)
	}
	d.AOF = aof == "1"
	if v, ok := InfoField(info, "rdb_last_save_time"); ok {
		if sec, err := strconv.ParseInt(v, 10, 64); err == nil && sec > 0 {
			d.LastSave = time.Unix(sec, 0)
		}
	}
	if v, ok := InfoField(info, "rdb_changes_since_last_save"); ok {
		d.UnsavedChanges, _ = strconv.ParseInt(v, 10, 64)
	}

	server, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return d, redisstore.WrapRedis(ctx, "INFO server", err)
	}
	d.Version, _ = InfoField(server, "redis_version")
	d.WaitAOF = versionAtLeast(d.Version, 7, 2)

	if d.AOF {
		d.Fsync = FsyncUnknown
		cfg, err := rdb.ConfigGet(ctx, "appendfsync").Result()
		err = redisstore.WrapRedis(ctx, "CONFIG GET appendfsync", err)
		var rerr redis.Error
		switch {
		case err == nil:
			switch p := cfg["appendfsync"]; p {
			case FsyncAlways, FsyncEverysec, FsyncNo:
				d.Fsync = p
			}
		case errors.Is(err, stock.ErrUnavailable), !errors.As(err, &rerr):
			return d, err
		}
		// A refusal (CONFIG disabled or renamed, an ACL) leaves
		// FsyncUnknown: the policy is the service's to tell.
	}
	return d, nil
}

// versionAtLeast compares the major.minor of a redis_version.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// MemoryOnly: an acknowledged sale is in one Redis's memory and nowhere
// else (no AOF, no replica acks), so a restart of that Redis loses it.
func (d Durability) MemoryOnly() bool { return !d.AOF && d.ReplicaAcks <= 0 }

// Promise says in one line which failures a sale answered 200 outlives.
// "Process crash" is the Redis process dying (kill -9, OOM killer): what
// it had written is in the kernel's page cache and reaches the file.
// "Machine crash" loses the page cache too, so only what was fsynced is
// kept; that is where the fsync policies differ.
func (d Durability) Promise() string {
	var p string
	switch {
	case !d.AOF && d.ReplicaAcks <= 0:
		return "a 200 is in one Redis's memory only: a Redis restart loses it (no AOF)"
	case !d.AOF:
		// A primary restarted faster than Sentinel fails it over is still
		// the primary, and its replicas resync from its empty data set.
		return fmt.Sprintf("a 200 is in the memory of the primary and %s: it survives a failover to a replica "+
			"that acknowledged it, but a restart of the primary loses it (no AOF: back empty before a failover, "+
			"it empties its replicas too)", replicas(d.ReplicaAcks))
	case d.Fsync == FsyncAlways:
		p = "a 200 survives a Redis process crash and a machine crash (AOF, fsync always)"
	case d.Fsync == FsyncEverysec:
		p = "a 200 survives a Redis process crash (AOF, fsync everysec: up to 1 s of sales may be lost on a machine crash)"
	case d.Fsync == FsyncNo:
		p = "a 200 survives a Redis process crash (AOF, fsync no: the sales the kernel has not written out, " +
			"typically up to 30 s, may be lost on a machine crash)"
	default:
		p = "a 200 survives a Redis process crash (AOF, fsync policy unknown: CONFIG GET refused, " +
			"so a machine crash may lose the last sales)"
	}
	if d.ReplicaAcks > 0 {
		p += ", and survives a failover to a replica that acknowledged it"
	}
	return p
}

func replicas(n int) string {
	if n == 1 {
		return "1 replica"
	}
	return strconv.Itoa(n) + " replicas"
}
