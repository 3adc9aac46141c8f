package mysqllock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"seckill/internal/lock"
)

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Config.DSN: empty"},
		{Config{DSN: "not a dsn"}, "Config.DSN"},
		{Config{DSN: "u:p@tcp(127.0.0.1:1)/"}, "Config.DSN: no database name"},
		{Config{DSN: "u:p@tcp(127.0.0.1:1)/db?readTimeout=1s"}, "Config.DSN: readTimeout"},
		{Config{DSN: "u:p@tcp(127.0.0.1:1)/db", PoolSize: -1}, "Config.PoolSize"},
		{Config{DSN: "u:p@tcp(127.0.0.1:1)/db", TTL: -time.Second}, "Config.TTL"},
		{Config{DSN: "u:p@tcp(127.0.0.1:1)/db", TTL: 3 * time.Second, KeepAlive: 2 * time.Second}, "Config.KeepAlive"},
		{Config{DSN: "u:p@tcp(127.0.0.1:1)/db", WaitSlice: -1}, "Config.WaitSlice"},
		{Config{DSN: "u:p@tcp(127.0.0.1:1)/db", CleanupTimeout: -1}, "Config.CleanupTimeout"},
	} {
		for _, open := range []func(context.Context, Config) (*Locker, error){New, NewRow} {
			l, err := open(t.Context(), tc.cfg)
			if err == nil {
				_ = l.Close()
				t.Fatalf("%+v: no error, want one naming %q", tc.cfg, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%+v: %v, want it to name %q", tc.cfg, err, tc.want)
			}
		}
	}
	// A valid config with an unreachable server is not a config error.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := New(ctx, Config{DSN: "u:p@tcp(127.0.0.1:1)/db"}); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("unreachable server: %v, want ErrUnavailable", err)
	}
}

func TestLockName(t *testing.T) {
	short := strings.Repeat("a", MaxNameLen)
	if got := LockName(short); got != short {
		t.Errorf("LockName(64 bytes) = %q, want it unchanged", got)
	}
	long1, long2 := short+"/one", short+"/two"
	n1, n2 := LockName(long1), LockName(long2)
	if len(n1) != MaxNameLen || !strings.HasPrefix(n1, "sha256:") {
		t.Errorf("LockName(long) = %q (%d bytes), want sha256:… of %d bytes", n1, len(n1), MaxNameLen)
	}
	if n1 == n2 {
		t.Errorf("two long keys with a common prefix share the name %q", n1)
	}
	if LockName(long1) != n1 {
		t.Error("LockName is not deterministic")
	}
}

// Describe names both backends as the fence and metrics know them.
func TestDescribe(t *testing.T) {
	srv := newServer(t)
	for _, backend := range backends {
		lk := newLocker(t, backend, srv.dsn, Config{})
		if got := lk.Describe(); got.Name != backend || !got.Safe {
			t.Errorf("Describe() = %+v, want {%s true}", got, backend)
		}
		if err := lk.Ping(t.Context()); err != nil {
			t.Errorf("%s: Ping: %v", backend, err)
		}
	}
}
