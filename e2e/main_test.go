// Package e2e runs seckill end to end from real processes: redis-server,
// stockd replicas built from this module, and nginx in front of them, all
// started by internal/lab/localcluster. One cluster serves every test in the
// package; each test switches the replicas to the backend it needs, so the
// tests must not run in parallel with each other.
package e2e

import (
	"context"
	"errors"
	"log"
	"os"
	"sync"
	"testing"
	"time"

	"seckill/internal/lab/localcluster"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// testEnv is every test's stockd configuration: a business delay inside
// the critical section wide enough that unlocked sales reliably collide,
// and a lock wait long enough that correct backends never answer "busy".
var testEnv = map[string]string{
	"work.delay":        "2ms-6ms",
	"lock.wait_timeout": "60s",
}

var shared struct {
	once    sync.Once
	c       *localcluster.Cluster
	err     error
	backend string // what the replicas run now, "" after a failed switch
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		if err := shared.c.Close(); err != nil {
			log.Printf("e2e: close cluster: %v", err)
		}
	}
	os.Exit(code)
}

// cluster returns the package's three-replica cluster, starting it on first
// use. Missing server binaries skip the test (fail it under CI).
func cluster(t *testing.T) *localcluster.Cluster {
	t.Helper()
	stockd := stockdPath(t)
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		shared.c, shared.err = localcluster.Start(ctx, localcluster.Config{
			Replicas: 3, Backend: "local", Env: testEnv, Stockd: stockd,
		})
		if shared.err == nil {
			shared.backend = "local"
		}
	})
	if errors.Is(shared.err, servers.ErrNotInstalled) {
		servertest.SkipOrFail(t, shared.err, "redis-server nginx-light")
	}
	if shared.err != nil {
		t.Fatalf("start cluster: %v", shared.err)
	}
	return shared.c
}

// stockdPath is $SECKILL_STOCKD when set (a prebuilt binary, e.g.
// bin/stockd), else "" so the cluster builds ./cmd/stockd.
func stockdPath(t *testing.T) string {
	t.Helper()
	return os.Getenv("SECKILL_STOCKD")
}

// onBackend returns the shared cluster running backend. A backend stockd
// refuses fails the test: every backend is built, so a refusal is a
// regression, never a reason to skip.
func onBackend(t *testing.T, backend string) *localcluster.Cluster {
	t.Helper()
	c := cluster(t)
	if shared.backend == backend {
		return c
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	err := c.SetBackend(ctx, backend, testEnv)
	if err != nil {
		shared.backend = ""
		t.Fatalf("switch to %s: %v\n%s", backend, err, c.Logs(20))
	}
	shared.backend = backend
	return c
}
