package servertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill/internal/servers"
)

// Sentinels starts a Redis primary, a synced replica and three Sentinels
// on free loopback ports (servers.StartSentinelSet) and stops them in
// t.Cleanup.
func Sentinels(t testing.TB, opt servers.SentinelOptions) *servers.SentinelSet {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	set, err := servers.StartSentinelSet(ctx, t.TempDir(), opt)
	if errors.Is(err, servers.ErrNotInstalled) {
		SkipOrFail(t, err, "redis-server redis-sentinel")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Stop(5 * time.Second) })
	return set
}
