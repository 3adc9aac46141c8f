package stockd

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/backend"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// mariadb is one MariaDB for the whole package's tests: each start is a
// mariadb-install-db plus a server start, seconds on two cores.
func mariadb(t *testing.T) *servers.Process {
	t.Helper()
	mariaOnce.Do(func() {
		addr, err := servers.LoopbackAddr()
		if err != nil {
			mariaErr = err
			return
		}
		dir, err := os.MkdirTemp("", "stockd-mariadb-")
		if err != nil {
			mariaErr = err
			return
		}
		mariaDir = dir
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		mariaProc, mariaErr = servers.StartMariaDB(ctx, dir, addr)
	})
	if errors.Is(mariaErr, servers.ErrNotInstalled) {
		servertest.SkipOrFail(t, mariaErr, "mariadb-server")
	}
	if mariaErr != nil {
		t.Fatal(mariaErr)
	}
	return mariaProc
}

var (
	mariaOnce sync.Once
	mariaProc *servers.Process
	mariaErr  error
	mariaDir  string
)

// stopMariaDB runs after every test (TestMain).
func stopMariaDB() {
	if mariaProc != nil {
		_ = mariaProc.Stop(5 * time.Second)
	}
	if mariaDir != "" {
		_ = os.RemoveAll(mariaDir)
	}
}

// Every wired backend builds from a Config against its real server, takes and
// releases the lock, describes itself under its configured name with the
// expected safety, and closes cleanly.
func TestBuildLockerEveryBackend(t *testing.T) {
	rds := servertest.Redis(t)
	cases := []struct {
		backend string
		safe    bool
		server  func(t *testing.T, c *Config)
	}{
		{"none", false, nil},
		{"local", false, nil},
		{"redis", true, nil},
		{"redisson", true, nil},
		{"setnx", false, nil},
		{"redis-nocheck", false, nil},
		{"redis-checkdel", false, nil},
		{"etcd", true, func(t *testing.T, c *Config) { c.Etcd.Endpoints = []string{"http://" + servertest.Etcd(t).Addr()} }},
		{"zookeeper", true, func(t *testing.T, c *Config) { c.ZooKeeper.Servers = []string{servertest.ZooKeeper(t).Addr()} }},
		{"mysql", true, func(t *testing.T, c *Config) { c.MySQL.DSN = servers.MariaDBDSN(mariadb(t).Addr()) }},
		{"mysql-row", true, func(t *testing.T, c *Config) { c.MySQL.DSN = servers.MariaDBDSN(mariadb(t).Addr()) }},
	}
	for _, tc := range cases {
		t.Run(tc.backend, func(t *testing.T) {
			c := validConfig(t)
			c.Lock.Backend = tc.backend
			if !tc.safe && !LabBuild {
				// A product build has none of the lab's backends: it
				// refuses them, naming itself.
				c.Lab.Unsafe, c.Redis.Addr = true, rds.Addr()
				if err := Validate(c); err == nil || !strings.Contains(err.Error(), "this stockd is a product build") {
					t.Fatalf("a product build validated lab backend %s: %v", tc.backend, err)
				}
				return
			}
			c.Lab.Unsafe = !tc.safe
			c.Redis.Addr = rds.Addr()
			c.Lock.TTL = 5 * time.Second
			if tc.server != nil {
				tc.server(t, c)
			}
			lk, info, w := builtLocker(t, c)
			if info.Name != tc.backend || info.Safe != tc.safe {
				t.Fatalf("got %+v, want name %q safe %v", info, tc.backend, tc.safe)
			}
			if p, ok := lk.(lock.Pinger); ok {
				if err := p.Ping(t.Context()); err != nil {
					t.Fatalf("ping: %v", err)
				}
			}
			l, err := lk.Acquire(t.Context(), c.Lock.Key)
			if err != nil {
				t.Fatalf("acquire: %v", err)
			}
			if err := l.Release(t.Context()); err != nil {
				t.Fatalf("release: %v", err)
			}
			if err := w.close(); err != nil {
				t.Fatalf("close: %v", err)
			}
		})
	}
}

// builtLocker validates c, wires it and builds its lock backend, closed
// after the test.
func builtLocker(t *testing.T, c *Config) (lock.Locker, lock.Info, *wiring) {
	t.Helper()
	if err := Validate(c); err != nil {
		t.Fatal(err)
	}
	w := &wiring{cfg: c, log: slog.Default()}
	t.Cleanup(func() { _ = w.close() })
	lk, info, err := buildLocker(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	return lk, info, w
}

// The wiring table holds exactly the backends the backend package names:
// every product backend, and the lab-only ones only in a lab build, each
// marked so.
func TestBackendsAreTheNamedOnes(t *testing.T) {
	for _, name := range backend.Product() {
		if spec, ok := backends[name]; !ok || spec.labOnly {
			t.Errorf("product backend %s: in the table %v, lab only %v; want it, not lab only", name, ok, spec.labOnly)
		}
	}
	for name, spec := range backends {
		switch {
		case slices.Contains(backend.Product(), name):
		case slices.Contains(backend.LabOnly(), name):
			if !spec.labOnly {
				t.Errorf("%s is a lab-only backend, not marked so in the table", name)
			}
		default:
			t.Errorf("%s is in the wiring table, not in package backend", name)
		}
	}
}
