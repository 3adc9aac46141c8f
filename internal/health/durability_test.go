package health_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/health"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
)

func client(t *testing.T, srv *servers.Process) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// What a real Redis 7 reports, with and without an AOF, under each fsync
// policy, and the promise each one makes.
func TestReadDurability(t *testing.T) {
	ctx := t.Context()
	plain := servertest.Redis(t)
	d, err := health.ReadDurability(ctx, client(t, plain))
	if err != nil {
		t.Fatal(err)
	}
	if d.AOF || d.Fsync != "" || !d.MemoryOnly() || !strings.HasPrefix(d.Version, "7.") {
		t.Fatalf("no AOF: got %+v, want AOF off, no fsync, memory only, a 7.x version", d)
	}
	if strings.HasPrefix(d.Version, "7.0.") && d.WaitAOF {
		t.Errorf("redis %s has no WAITAOF, got WaitAOF true", d.Version)
	}
	if want := "a 200 is in one Redis's memory only: a Redis restart loses it (no AOF)"; d.Promise() != want {
		t.Errorf("no AOF: promise %q, want %q", d.Promise(), want)
	}
	d.ReplicaAcks = 1
	if d.MemoryOnly() || !strings.Contains(d.Promise(), "survives a failover to a replica that acknowledged it, but a restart of the primary loses it") {
		t.Errorf("no AOF, acks 1: memory only %v, promise %q", d.MemoryOnly(), d.Promise())
	}

	aof := servertest.RedisWith(t, "--appendonly", "yes", "--appendfsync", "everysec")
	rdb := client(t, aof)
	for _, tc := range []struct {
		fsync, promise string
	}{
		{health.FsyncEverysec, "a 200 survives a Redis process crash (AOF, fsync everysec: up to 1 s of sales may be lost on a machine crash)"},
		{health.FsyncAlways, "a 200 survives a Redis process crash and a machine crash (AOF, fsync always)"},
		{health.FsyncNo, "a 200 survives a Redis process crash (AOF, fsync no: the sales the kernel has not written out, typically up to 30 s, may be lost on a machine crash)"},
	} {
		if err := rdb.ConfigSet(ctx, "appendfsync", tc.fsync).Err(); err != nil {
			t.Fatal(err)
		}
		d, err := health.ReadDurability(ctx, rdb)
		if err != nil {
			t.Fatal(err)
		}
		if !d.AOF || d.Fsync != tc.fsync || d.MemoryOnly() || d.Promise() != tc.promise {
			t.Errorf("AOF %s: got %+v, promise %q; want %q", tc.fsync, d, d.Promise(), tc.promise)
		}
		d.ReplicaAcks = 2
		if want := tc.promise + ", and survives a failover to a replica that acknowledged it"; d.Promise() != want {
			t.Errorf("AOF %s, acks 2: promise %q, want %q", tc.fsync, d.Promise(), want)
		}
	}

	if err := aof.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := health.ReadDurability(ctx, rdb); !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("Redis down: got %v, want ErrUnavailable", err)
	}
}

// A managed Redis that refuses CONFIG still says whether its AOF is on;
// its fsync policy is then unknown, and the promise says so.
func TestReadDurabilityConfigRefused(t *testing.T) {
	srv := servertest.RedisWith(t, "--appendonly", "yes", "--rename-command", "CONFIG", "")
	d, err := health.ReadDurability(t.Context(), client(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	if !d.AOF || d.Fsync != health.FsyncUnknown || !strings.Contains(d.Promise(), "fsync policy unknown: CONFIG GET refused") {
		t.Fatalf("got %+v, promise %q; want AOF on, fsync unknown", d, d.Promise())
	}
}

// infoAndConfig answers INFO with a fixed text and refuses CONFIG.
type infoAndConfig string

func (r infoAndConfig) Info(context.Context, ...string) *redis.StringCmd {
	return redis.NewStringResult(string(r), nil)
}

func (infoAndConfig) ConfigGet(context.Context, string) *redis.MapStringStringCmd {
	return redis.NewMapStringStringResult(nil, errors.New("unexpected CONFIG GET"))
}

// An INFO that does not say whether the AOF is on (a proxy) is no promise.
func TestReadDurabilityUnreported(t *testing.T) {
	_, err := health.ReadDurability(t.Context(), infoAndConfig("# Persistence\r\nloading:0\r\n"))
	if !errors.Is(err, health.ErrDurabilityUnknown) {
		t.Fatalf("got %v, want ErrDurabilityUnknown", err)
	}
}

// WAITAOF came with Redis 7.2 (and is in Valkey, which reports a 7.2
// redis_version); the machines here run 7.0, so the versions are canned.
func TestReadDurabilityWaitAOF(t *testing.T) {
	for version, want := range map[string]bool{
		"6.2.14": false, "7.0.15": false, "7.2.4": true, "7.4.1": true, "8.0.0": true, "": false, "x.y": false,
	} {
		d, err := health.ReadDurability(t.Context(), infoAndConfig("aof_enabled:0\r\nredis_version:"+version+"\r\n"))
		if err != nil || d.WaitAOF != want || d.Version != version {
			t.Errorf("redis_version %q: got %+v %v, want WaitAOF %v", version, d, err, want)
		}
	}
}
